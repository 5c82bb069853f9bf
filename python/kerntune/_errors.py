"""The exceptions for bad arguments of kerntune's Python API: kerntune's own classes
(``kerntune.KerntuneError`` catches them), which are also the built-in exceptions a caller
would catch (a bad value is a ``ValueError``, a bad type a ``TypeError``). Each message
names the argument, what was given and what is accepted."""

from kerntune._kerntune import KerntuneError, SpecError


class ArgumentError(SpecError, ValueError):
    """An argument with a value kerntune cannot use."""


class ArgumentTypeError(SpecError, TypeError):
    """An argument of a type kerntune cannot use."""


class ReferenceDisagreementError(KerntuneError):
    """Without ``answer``, the first configurations that run through Triton give
    different outputs, so none of them can be trusted as the reference."""


class UncheckedOutputsWarning(UserWarning):
    """A tuning whose outputs are not checked: any configuration, right or wrong, can win."""


class KeyNameWarning(UserWarning):
    """``@kerntune.autotune(key=...)`` names something that is not an argument of the
    kernel: ignored, as Triton's autotuner ignores it."""


class LongSearchWarning(UserWarning):
    """A brute force so large that it runs for hours or days: said once, early, with its
    pace and the options that bound it."""


def warn_unchecked(kernel_name: str, why: str, remedy: str, stacklevel: int) -> None:
    """Says that ``kernel_name``'s outputs will not be checked, why, and how to check them
    (``stacklevel`` counts from the caller of this function)."""
    import warnings

    warnings.warn(f"{kernel_name}: {why}, so outputs will not be checked; {remedy}", UncheckedOutputsWarning,
                  stacklevel=stacklevel + 1)


def check_device(device) -> None:
    """``device``: None (the current GPU) or a GPU's number."""
    if device is None:
        return
    if isinstance(device, bool) or not isinstance(device, int):
        raise ArgumentTypeError(f"device: give a GPU's number (an int), not {device!r}")
    if device < 0:
        raise ArgumentError(f"device: give a GPU's number (0 or more), not {device}")


def check_devices(devices):
    """``devices``: None, ``"all"``, or distinct GPU numbers; returned as the text the
    tuner reads (``"all"`` or ``"0,1"``), or None."""
    if devices is None or devices == "all":
        return devices
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
        raise ArgumentTypeError(f"devices: give \"all\" or a list of GPU numbers, not {devices!r}")
    devices = list(devices)
    for device in devices:
        if isinstance(device, bool) or not isinstance(device, int) or device < 0:
            raise ArgumentError(f"devices: give GPU numbers (ints, 0 or more), not {device!r}")
    if not devices or len(set(devices)) != len(devices):
        raise ArgumentError(f"devices: give distinct GPU numbers, at least one, not {devices!r}")
    return ",".join(str(d) for d in devices)


def check_strategy(strategy, default: str) -> str:
    """``strategy``: a strategy's name (see ``kerntune strategies``); None means ``default``."""
    if strategy is None:
        return default
    if not isinstance(strategy, str):
        raise ArgumentTypeError(f"strategy: give a strategy's name (see `kerntune strategies`), not {strategy!r}")
    return strategy


def check_search(strategy, strategy_options, default: str, kernel_tuner: bool = False, **limits) -> None:
    """Checks the search settings as the tuning will read them (the rules are Rust's): the
    strategy's name and options, ``max_fevals``, ``time_limit``, ``target``. Called before
    anything is compiled or a GPU probed. ``kernel_tuner``: Kernel Tuner's
    ``strategy_options`` also hold ``max_fevals`` and ``time_limit``."""
    import json

    from kerntune import _kerntune

    if strategy_options is not None and not isinstance(strategy_options, dict):
        raise ArgumentTypeError("strategy_options: give a dict such as {'max_fevals': 100}")
    options = dict(strategy_options or {})
    if kernel_tuner:
        for name in ("max_fevals", "time_limit"):
            if name in options:
                limits[name] = options.pop(name)
    target = limits.pop("target", None)
    search = {"strategy": check_strategy(strategy, default), "strategy_options": options,
              **{name: value for name, value in limits.items() if value is not None}}
    try:
        _kerntune.check_search(json.dumps(search, default=str), default, target)
    except KerntuneError as error:
        raise ArgumentError(str(error)) from None


def compile_target(arch) -> dict:
    """The device a compile for ``arch`` targets: an NVIDIA architecture, ``sm_90`` (or
    ``sm_90a``, ``90``), with that architecture's limits, as the CLI's ``--arch`` reads it
    (the rule is Rust's); ``arch`` holds its name."""
    import json

    from kerntune import _kerntune

    text = str(arch).strip()
    name = f"sm_{text}" if text.isdigit() else text
    try:
        target = json.loads(_kerntune.compile_target(name))
    except SpecError:
        raise ArgumentError(f"arch {arch!r} is not an NVIDIA architecture; give one like 'sm_90'") from None
    return {**target, "arch": name}


def check_arch(arch) -> int:
    """``arch``: an NVIDIA architecture (see ``compile_target``); its number (90 for sm_90)."""
    return arch_number(compile_target(arch))


def arch_number(target: dict) -> int:
    """The number of ``compile_target``'s architecture (90 for sm_90)."""
    major, minor = target["compute_capability"]
    return major * 10 + minor

"""Search spaces as Python callers give them: ``params=`` (every combination of the listed
values, under restrictions) or ``configs=`` (Triton's list of ``triton.Config``, or of plain
dicts: exactly those configurations).

Both become one table ``{name: [values]}``; a listed space also keeps its rows, which Rust
turns into a space of exactly those configurations.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

from kerntune import _dispatch, _kerntune
from kerntune._errors import ArgumentError, ArgumentTypeError

_OPTIONS = json.loads(_kerntune.triton_options())  # declared once, in Rust

#: Compile options of a Triton launch that are tuned like constexprs.
OPTION_NAMES = tuple(_OPTIONS["names"])

#: What a ``triton.Config`` that does not set an option means by it.
OPTION_DEFAULTS = _OPTIONS["defaults"]

#: Option values that mean "the compiler's choice" (``maxnreg`` 0, ``ptx_options`` ""),
#: which a launch spells by leaving the option out.
COMPILERS_CHOICE = _OPTIONS["compilers_choice"]


def values_of(name: str, values, argument: str = "params") -> list:
    """One parameter's values: a sequence, or a single value (a string is one value, never
    its characters)."""
    if isinstance(values, (str, bytes, int, float, bool)) or values is None:
        values = [values]
    elif isinstance(values, Mapping) or not hasattr(values, "__iter__"):
        raise ArgumentTypeError(f"{argument}['{name}'] must be a list of values, got {type(values).__name__}")
    values = list(values)
    if not values:
        raise ArgumentError(f"{argument}['{name}'] has no values")
    for value in values:
        if value is None or not isinstance(value, (int, float, bool, str)):
            raise ArgumentTypeError(
                f"{argument}['{name}'] holds {value!r} ({type(value).__name__}); values are ints, floats, bools or strings"
            )
    return values


def check_params(params) -> dict:
    if not isinstance(params, Mapping):
        raise ArgumentTypeError(f"params must be a dict of parameter name to a list of values, got {type(params).__name__}")
    if not params:
        raise ArgumentError("params is empty: give at least one parameter to tune")
    return {str(name): values_of(str(name), values) for name, values in params.items()}


def names_of(value, argument: str) -> list[str]:
    """A list of names; a single string is one name."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        names = list(value)
    except TypeError:
        raise ArgumentTypeError(f"{argument} must be a list of argument names, got {type(value).__name__}") from None
    for name in names:
        if not isinstance(name, str):
            raise ArgumentTypeError(f"{argument} must hold argument names (strings), got {name!r}")
    return names


def config_dict(config, index: int) -> tuple[dict, Any]:
    """A ``triton.Config`` (or dict) as ``{name: value}``, and its pre_hook."""
    if isinstance(config, Mapping):
        return dict(config), None
    kwargs = getattr(config, "kwargs", None)
    if kwargs is None or not hasattr(config, "num_warps"):
        raise ArgumentTypeError(f"configs[{index}] is {type(config).__name__}; give triton.Config objects or dicts")
    if getattr(config, "ir_override", None) is not None:
        raise ArgumentError(f"configs[{index}]: ir_override is not supported by kerntune (it replaces the compiled IR)")
    row = dict(kwargs)
    row["num_warps"] = config.num_warps
    row["num_stages"] = config.num_stages
    row["num_ctas"] = config.num_ctas
    row["maxnreg"] = config.maxnreg
    return row, getattr(config, "pre_hook", None)


class Listed:
    """A listed space: the parameter table, the rows (one dict per configuration, in the
    caller's order) and each row's ``pre_hook``."""

    def __init__(self, params: dict, rows: list, hooks: list):
        self.params = params
        self.rows = rows
        self.hooks = hooks

    def config_hooks(self) -> dict:
        """Each row's ``pre_hook``, under the row's ``config_key``."""
        return {config_key(row): hook for row, hook in zip(self.rows, self.hooks) if hook}


def listed(configs, defaults: Mapping[str, Any]) -> Listed:
    """The space of exactly ``configs``. A configuration that leaves out a constexpr the
    others set gets the kernel's default for it; ``maxnreg=None`` becomes 0 (the
    compiler's choice)."""
    if isinstance(configs, (str, bytes, Mapping)) or not hasattr(configs, "__iter__"):
        raise ArgumentTypeError(f"configs must be a list of triton.Config, got {type(configs).__name__}")
    pairs = [config_dict(config, i) for i, config in enumerate(configs)]
    if not pairs:
        raise ArgumentError("configs is empty: give at least one triton.Config")
    rows = [row for row, _ in pairs]
    names: list[str] = []
    for row in rows:
        names += [name for name in row if name not in names]
    if all(row.get("maxnreg") is None for row in rows):
        names = [n for n in names if n != "maxnreg"]
    table: dict[str, list] = {name: [] for name in names}
    seen: dict[str, set] = {name: set() for name in names}  # typed: True and 1 are two values
    filled = []
    for index, row in enumerate(rows):
        full = {}
        for name in names:
            if name in row:
                value = row[name]
            elif name in defaults:
                value = defaults[name]
            elif name in OPTION_DEFAULTS:
                value = OPTION_DEFAULTS[name]
            else:
                raise ArgumentError(f"configs[{index}] has no value for '{name}', which other configs set and the kernel has no default for")
            if name == "maxnreg" and value is None:
                value = 0
            values_of(name, [value], f"configs[{index}]")
            full[name] = value
            if (type(value), value) not in seen[name]:
                seen[name].add((type(value), value))
                table[name].append(value)
        filled.append(full)
    return Listed(table, filled, [hook for _, hook in pairs])


#: Compile options that are compiler controls: kerntune hands them to the chosen ptxas
#: (through ``ptx_options``); a Triton launch has no such keyword.
CONTROL_NAMES = ("acf", "opt_level")


def without_compilers_choice(config: Mapping[str, Any]) -> dict:
    """A configuration without the options at "the compiler's choice" (``maxnreg = 0``, an
    empty ``ptx_options``, ``acf = "none"``...), which a launch spells by leaving them out."""
    return {k: v for k, v in config.items() if not (k in COMPILERS_CHOICE and v == COMPILERS_CHOICE[k])}


def config_key(config: Mapping[str, Any]) -> tuple:
    """A configuration as a key that launches of it share, whatever its values' types."""
    return tuple(sorted((k, repr(v)) for k, v in launch_options(config).items()))


def launch_options(config: Mapping[str, Any]) -> dict:
    """A configuration as a Triton launch's keyword arguments: without the options at the
    compiler's choice, and without compiler controls (a launch through Triton uses Triton's
    ptxas, which takes no ``acf`` keyword)."""
    return {k: v for k, v in without_compilers_choice(config).items() if k not in CONTROL_NAMES}


def space_of(params: Optional[Mapping[str, Sequence]], configs, defaults: Mapping[str, Any]):
    """``(table, listed or None)`` from the caller's ``params`` or ``configs``."""
    if params is not None and configs is not None:
        raise ArgumentTypeError("give params (a product of values) or configs (a list of triton.Config), not both")
    if params is None and configs is None:
        raise ArgumentTypeError("give the search space: params={name: [values]} or configs=[triton.Config(...), ...]")
    if configs is not None:
        space = listed(configs, defaults)
        return space.params, space
    if not isinstance(params, Mapping) and hasattr(params, "__iter__") and not isinstance(params, (str, bytes)):
        space = listed(params, defaults)  # a list of Configs passed where params go
        return space.params, space
    return check_params(params), None


def as_config(config: Mapping[str, Any]):
    """A configuration as a ``triton.Config``: constexprs as its kwargs, the compile options
    as its fields (those at "the compiler's choice" left out; ``triton.Config`` has no
    ``ptx_options``, which Triton takes at launch)."""
    import triton

    values = launch_options(config)
    options = {name: values.pop(name) for name in OPTION_NAMES if name in values}
    options.pop("ptx_options", None)
    return triton.Config(values, **options)


def load_configs(path):
    """The configurations in a file, as ``triton.Config`` objects.

    - A dispatch table (``kernel.save_table()`` or a many-shape run wrote it) gives
      ``{key: triton.Config}``, each key as the tuple the kernel's ``key=`` makes;
    - the file ``kerntune export DB --format triton -o FILE`` wrote gives a list, best
      first: ``@triton.autotune(configs=kerntune.load_configs(FILE), ...)`` or
      ``@kerntune.autotune(...)`` start from what an earlier tuning found."""
    with open(path) as f:
        document = json.load(f)
    if isinstance(document, Mapping) and "entries" in document:
        return {key: as_config(config) for key, config in _dispatch.read(path).items()}
    entries = document.get("configs") if isinstance(document, Mapping) else None
    if not isinstance(entries, list):
        raise ArgumentError(f"{path}: not a file of `kerntune export --format triton` (no list of configs) "
                            f"nor a dispatch table (kernel.save_table() writes one)")
    return [as_config(entry["config"]) for entry in entries]

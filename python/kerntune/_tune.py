"""``kerntune.tune``: tune a ``@triton.jit`` kernel on the GPU.

The kernel is compiled by worker processes on the CPU (one per core), each specializing a
configuration exactly as Triton's JIT would specialize this call; the benchmark worker
owns copies of the call's tensors and launches the cubins from Rust with Triton's ABI.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import shutil
import tempfile
import time
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from kerntune import _kerntune
from kerntune._errors import (ArgumentError, ArgumentTypeError, ReferenceDisagreementError, check_arch, check_device,
                              check_strategy, warn_unchecked)
from kerntune._kernel_source import capture
from kerntune._results import NoValidConfigError, TuneResult
from kerntune._space import OPTION_NAMES, launch_options, names_of, space_of

# Element types the benchmark worker knows, by torch dtype name.
_DTYPES = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "u8",
}

# How Triton's launcher packs a scalar of each type.
_SCALAR_FORMATS = {
    "i1": "<b", "i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q",
    "u1": "<B", "u8": "<B", "u16": "<H", "u32": "<I", "u64": "<Q",
    "fp16": "<e", "fp32": "<f", "f32": "<f", "fp64": "<d",
}


def jit_function(kernel):
    """The ``JITFunction`` inside decorators (``triton.autotune``, ``kerntune.autotune``)."""
    from triton.runtime.jit import JITFunction

    fn = kernel
    while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    if not isinstance(fn, JITFunction):
        raise ArgumentTypeError(f"{kernel!r} is not a @triton.jit function")
    return fn


def _is_tensor(value) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "dtype") and hasattr(value, "element_size")


def _dtype_name(tensor) -> str:
    return str(tensor.dtype).split(".")[-1]


def _storage_span(tensor) -> int:
    """Elements of storage the tensor reaches, from its first element."""
    if tensor.numel() == 0:
        return 0
    if any(s < 0 for s in tensor.stride()):
        raise ArgumentError("tensors with negative strides are not supported")
    return 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))


def _write_tensor(tensor, path: str) -> None:
    import torch

    span = _storage_span(tensor)
    flat = torch.as_strided(tensor, (span,), (1,))
    flat.detach().contiguous().cpu().view(torch.uint8).numpy().tofile(path)


def _pack_scalar(kind: str, value) -> str:
    import base64

    if kind == "bf16":
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        data = struct.pack("<H", ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF)
    else:
        fmt = _SCALAR_FORMATS.get(kind)
        if fmt is None:
            raise ArgumentTypeError(f"scalar arguments of Triton type {kind} are not supported")
        data = struct.pack(fmt, value)
    return base64.b64encode(data).decode()


def worker_env() -> dict:
    """The environment workers need on top of ours: this interpreter's import path, so that
    they import kerntune and the user's modules as this process does."""
    return {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))}


def worker_command(extra: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "kerntune._worker", *extra]


def _grid_function(grid, call_args: Mapping[str, Any], names: Sequence[str]):
    """Turns the user's grid (a callable of META, a tuple, or an expression string) into a
    function of a configuration's values."""
    def meta(values):
        m = dict(call_args)
        m.update(zip(names, values))
        return m

    if callable(grid):
        def fn(values):
            g = grid(meta(values))
            return [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
    elif isinstance(grid, str):
        def cdiv(a, b):
            return -(-a // b)

        def fn(values):
            g = eval(grid, {"__builtins__": {}, "cdiv": cdiv, "min": min, "max": max}, meta(values))
            return [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
    else:
        fixed = [int(x) for x in (grid if isinstance(grid, (tuple, list)) else (grid,))]

        def fn(values):
            return fixed
    return fn


def _specialization(fn, call: Mapping[str, Any], config: Mapping[str, Any], arch: int):
    """Triton's specialization of this call (types and constants), from its own binder."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    backend = make_backend(GPUTarget("cuda", arch, 32))
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = dict(call)
    kwargs.update({k: v for k, v in config.items() if k in fn.arg_names})
    options = {k: v for k, v in config.items() if k not in fn.arg_names and not (k == "maxnreg" and v == 0)}
    _, specialization, _ = binder(**kwargs, **options)
    return specialization


def _first_valid_config(params: Mapping[str, Sequence], restrictions: Sequence[str], limit: int = 64) -> list[dict]:
    return json.loads(_kerntune.valid_configs(json.dumps(params), list(restrictions), limit))


#: Configurations that run through Triton and must agree before their outputs are the
#: reference (without ``answer``): one wrong configuration cannot then set the standard
#: every other is held to. Each costs one compile in this process (1.5 s for the tutorial
#: matmul) and one launch, once per tuning; two detect a wrong one, a third would not say
#: more than "pass answer=".
AGREEING_CONFIGS = 2


def _reference_outputs(fn, grid, call, configs, reset_to_zero, hooks, atol, rtol):
    """Runs the first configurations that run (up to ``AGREEING_CONFIGS``) through Triton
    itself, each on copies of the tensors: the tensors a run changes are the outputs. Their
    outputs must agree within the tolerances; the first configuration's are the reference.
    Returns that configuration and its outputs."""
    import torch

    runs, errors = [], []
    for config in configs:
        if len(runs) == AGREEING_CONFIGS:
            break
        copies = {k: (v.clone() if _is_tensor(v) else v) for k, v in call.items()}
        for name in reset_to_zero:
            copies[name].zero_()
        launch = launch_options(config)
        try:
            hooks.around(lambda: fn[lambda meta: tuple(grid(list(config.values())))](**copies, **launch), {**copies, **launch}, config)
            torch.cuda.synchronize()
        except Exception as error:  # try the next configuration
            errors.append(f"{config}: {type(error).__name__}: {error}")
            continue
        changed = {k: copies[k] for k, v in call.items() if _is_tensor(v) and k not in reset_to_zero and not _same_bytes(copies[k], v)}
        changed.update({k: copies[k] for k in reset_to_zero if copies[k].count_nonzero().item() > 0})
        runs.append((config, changed))
    if not runs:
        raise RuntimeError("no configuration ran through Triton to give a reference:\n" + "\n".join(errors[:5]))

    def unchanged(name):
        return torch.zeros_like(call[name]) if name in reset_to_zero else call[name]

    def difference(name, actual, expected):
        tolerance = _default_tolerance(expected)
        return _difference(actual, expected, tolerance if atol is None else atol, tolerance if rtol is None else rtol)

    problem = _disagreement(runs, unchanged, difference)
    if problem is not None:
        raise ReferenceDisagreementError(
            f"{fn.__name__}: without answer=, the reference is the outputs of the first configurations that run "
            f"through Triton, and they disagree: {problem}. One of them is wrong (or the kernel is not "
            f"deterministic beyond atol/rtol); give answer= (the expected outputs) to check against")
    return runs[0]


def _disagreement(runs, unchanged, difference) -> Optional[str]:
    """How the runs' outputs differ, or None when they agree. ``runs`` holds
    ``(config, {name: output})`` of each run, the first being the reference; a tensor one
    run leaves alone is ``unchanged(name)`` there; ``difference(name, actual, expected)``
    says how two outputs differ beyond the tolerances, or None."""
    (first, expected), others = runs[0], runs[1:]
    for config, outputs in others:
        for name in sorted(set(expected) | set(outputs)):
            actual = outputs[name] if name in outputs else unchanged(name)
            found = difference(name, actual, expected[name] if name in expected else unchanged(name))
            if found is not None:
                return f"{name} of {_describe_config(config)} differs from that of {_describe_config(first)}: {found}"
    return None


def _describe_config(config: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in config.items()) + "}"


def _difference(actual, expected, atol: float, rtol: float) -> Optional[str]:
    """How ``actual`` differs from ``expected`` (torch tensors), by the rule the benchmark
    worker applies: an element passes when ``|actual - expected| <= atol + rtol * |expected|``,
    and NaN never passes. None when every element passes."""
    a, e = actual.reshape(-1), expected.reshape(-1)
    if expected.is_floating_point():
        a, e = a.double(), e.double()
        bad = ~((a - e).abs() <= atol + rtol * e.abs())
    else:
        bad = a != e
    count = int(bad.sum().item())
    if count == 0:
        return None
    first = int(bad.nonzero()[0].item())
    return (f"{count} of {bad.numel()} elements differ beyond atol {atol}, rtol {rtol} "
            f"(first at index {first}: {a[first].item()!r} against {e[first].item()!r})")


def _same_bytes(a, b) -> bool:
    import torch

    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _default_tolerance(tensor) -> float:
    return 1e-2 if tensor.is_floating_point() else 0.0


class Tensor:
    """A stand-in for a tensor argument when compiling without a GPU
    (``kerntune.compile``): its element type, shape and address (for alignment)."""

    def __init__(self, dtype: str, shape: Sequence[int], data_ptr: int = 1 << 20):
        self.dtype = dtype
        self.shape = tuple(shape)
        self._data_ptr = data_ptr

    def data_ptr(self) -> int:
        return self._data_ptr

    def element_size(self) -> int:
        return {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4, "int64": 8}.get(self.dtype, 1)


def kernel_defaults(fn) -> dict:
    """The kernel's parameters that have default values, with them."""
    return {p.name: p.default for p in fn.params if p.has_default}


def _bind(fn, args: Mapping[str, Any], params: Mapping[str, Sequence]) -> dict:
    """The call's arguments in the kernel's order (defaults filled in), tuned ones left out."""
    if not isinstance(args, Mapping):
        raise ArgumentTypeError(f"args must be a dict of {fn.__name__}'s argument names to values, got {type(args).__name__}")
    unknown = [k for k in args if k not in fn.arg_names]
    if unknown:
        raise ArgumentTypeError(f"{fn.__name__} has no argument named {', '.join(unknown)}")
    for name in params:
        if name not in fn.arg_names and name not in OPTION_NAMES:
            raise ArgumentError(f"parameter '{name}' is neither an argument of {fn.__name__} nor a compile option ({', '.join(OPTION_NAMES)})")
        if name in fn.arg_names and not fn.params[fn.arg_names.index(name)].is_constexpr:
            raise ArgumentError(f"parameter '{name}' must be a tl.constexpr argument of {fn.__name__} to be tuned")
    call = {}
    for p in fn.params:
        if p.name in params:
            continue
        if p.name in args:
            call[p.name] = args[p.name]
        elif p.has_default:
            call[p.name] = p.default
        else:
            raise ArgumentTypeError(f"missing argument '{p.name}' of {fn.__name__} (give it in args or tune it in params)")
    return call


def _describe(fn, call, params, specialization):
    """Per kernel parameter: the job's argument entry (buffer, scalar or constant) and the
    compile worker's stand-in description."""
    job_args, describe = [], []
    for index, p in enumerate(fn.params):
        kind = specialization[index][0]
        if p.name in params:
            job_args.append({"kind": "constant", "name": p.name})
            describe.append({"name": p.name, "kind": "tuned"})
            continue
        value = call[p.name]
        if kind == "constexpr":
            job_args.append({"kind": "constant", "name": p.name})
            describe.append({"name": p.name, "kind": "value", "value": value})
        elif _is_tensor(value):
            dtype = _DTYPES.get(_dtype_name(value), "u8" if value.element_size() == 1 else None)
            if dtype is None:
                raise ArgumentTypeError(f"argument {p.name}: tensors of {value.dtype} are not supported yet")
            job_args.append({"kind": "buffer", "name": p.name, "dtype": dtype, "len": 0, "file": "", "output": False})
            describe.append({"name": p.name, "kind": "tensor", "dtype": _dtype_name(value), "data_ptr": value.data_ptr()})
        else:
            job_args.append({"kind": "scalar", "name": p.name, "bytes": _pack_scalar(kind, value)})
            describe.append({"name": p.name, "kind": "value", "value": value})
    return job_args, describe


def check_ptx_options(values) -> None:
    """ACF files (``--apply-controls``) need ptxas 13.3 or newer: a clear error otherwise."""
    if not any("apply-controls" in str(v) for v in values):
        return
    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(90)
    found = tuple(int(x) for x in str(ptxas.version).split(".")[:2])
    if found < (13, 3):
        raise _kerntune.SpecError(
            f"ACF files (--apply-controls) need ptxas 13.3 or newer; this Triton uses ptxas {ptxas.version} "
            f"({ptxas.path}); set TRITON_PTXAS_PATH to a newer ptxas"
        )


def _job(fn, call, params, listed, restrictions, arch, shared_limit, workdir):
    """The tuning job every call shares: arguments described, the compile worker's setup
    file written, the kernel fingerprinted."""
    import triton

    check_ptx_options(params.get("ptx_options", []))

    configs = listed.rows if listed is not None else _first_valid_config(params, restrictions)
    if not configs:
        raise _kerntune.SpaceError("no configuration satisfies the restrictions")
    specialization = _specialization(fn, call, configs[0], arch)
    job_args, describe = _describe(fn, call, params, specialization)
    setup_path = os.path.join(workdir, "triton-setup.json")
    with open(setup_path, "w") as f:
        json.dump({
            "kernel": capture(fn),
            "args": describe,
            "arch": arch,
            "shared_limit": shared_limit,
        }, f)
    problem = {
        "args": {d["name"]: (f"{d['dtype']}{list(call[d['name']].shape)}" if d["kind"] == "tensor" else d.get("value")) for d in describe if d["kind"] != "tuned"},
        "specialization": [list(s) for s in specialization if s[0] != "constexpr"],
    }
    fingerprint = hashlib.sha256(json.dumps([fn.cache_key, triton.__version__, problem["specialization"]], default=str).encode()).hexdigest()[:16]
    job = {
        "kernel_name": fn.__name__,
        "params": params,
        "restrictions": list(restrictions),
        "configs": None if listed is None else listed.rows,
        "args": job_args,
        "fingerprint": fingerprint,
        "problem": problem,
        "compile_worker": worker_command(["--triton-setup", setup_path]),
        "bench_worker": worker_command([]),
        "worker_env": worker_env(),
    }
    return job, describe, configs


def compile(
    kernel,
    args: Mapping[str, Any],
    params: Optional[Mapping[str, Sequence]] = None,
    restrictions: Optional[Sequence[str]] = None,
    *,
    configs: Optional[Sequence] = None,
    arch: str = "sm_90",
    shared_limit: int = 232448,
    db: Optional[str] = None,
    compile_workers: Optional[int] = None,
    compile_timeout: Optional[float] = None,
) -> list:
    """Compiles every configuration of a Triton kernel for ``arch`` without a GPU, with
    the specialization Triton's JIT would give this call. ``args`` may hold
    ``kerntune.Tensor`` stand-ins instead of tensors. The space is ``params`` (with
    ``restrictions``) or ``configs`` (a list of ``triton.Config``). Returns one entry per configuration
    (``config``, ``status``, ``reason``, ``launch``: the kernel's name, dynamic shared
    memory, warps, CTAs and parameters, and ``cubin``, base64); with ``db`` the cubins are
    kept in the results store. A compile that outlasts ``compile_timeout`` seconds (default
    60) fails that configuration."""
    fn = jit_function(kernel)
    params, listed = space_of(params, configs, kernel_defaults(fn))
    restrictions = names_of(restrictions, "restrictions")
    call = _bind(fn, args, params)
    number = check_arch(arch)
    with tempfile.TemporaryDirectory(prefix="kerntune-") as workdir:
        job, _, _ = _job(fn, call, params, listed, restrictions, number, shared_limit, workdir)
        if compile_timeout is not None:
            job["timing"] = {"compile_timeout": f"{compile_timeout}s"}
        text = _kerntune.compile_triton(json.dumps(job), f"sm_{number}", compile_workers, db)
    return json.loads(text)


def tune(
    kernel,
    args: Mapping[str, Any],
    grid: Union[Callable, str, Sequence[int]],
    params: Optional[Mapping[str, Sequence]] = None,
    restrictions: Optional[Sequence[str]] = None,
    answer: Optional[Mapping[str, Any]] = None,
    atol: Optional[float] = None,
    rtol: Optional[float] = None,
    strategy: str = "default",
    max_fevals: Optional[int] = None,
    time_limit: Optional[float] = None,
    db: Optional[str] = None,
    *,
    target: Optional[float] = None,
    strategy_options: Optional[Mapping[str, Any]] = None,
    objective: Optional[tuple] = None,
    timing: Optional[Mapping[str, Any]] = None,
    restore_value: Sequence[str] = (),
    reset_to_zero: Sequence[str] = (),
    configs: Optional[Sequence] = None,
    seed: int = 0,
    fresh: bool = False,
    compile_workers: Optional[int] = None,
    device: Optional[int] = None,
    progress: bool = True,
    finalists: int = 4,
    schedule: bool = False,
    schedule_options: Optional[Mapping[str, Any]] = None,
    hooks: Optional["Hooks"] = None,
) -> TuneResult:
    """Tunes a ``@triton.jit`` kernel and returns the best configuration.

    ``args`` maps the kernel's argument names to torch tensors (on the GPU), ints, floats or
    bools; ``params`` maps tuned names to their values: the kernel's ``tl.constexpr``
    parameters and the compile options ``num_warps``, ``num_stages``, ``num_ctas``,
    ``maxnreg`` (0 = compiler's choice) and ``ptx_options`` (ptxas flags, "" = none).
    ``configs`` (a list of ``triton.Config``) lists the configurations instead.
    ``grid`` is a callable of the launch's META (the arguments and the configuration, as
    for ``triton.autotune``), an expression string over the same names (``cdiv`` allowed),
    or a fixed tuple. ``restrictions`` are Python expressions over the parameters.

    Every configuration is checked before it is timed: against ``answer`` (a mapping of
    output names to expected tensors) when given, else against the outputs of the first
    configuration that runs through Triton itself, the outputs being the tensors that run
    changes; the next configuration that runs must then agree with it within the
    tolerances (``AGREEING_CONFIGS``), else ``ReferenceDisagreementError`` asks for
    ``answer``. Either reference fits the call's own tensors, so each configuration is
    checked on that one input set (``result.verified_sets`` is 1); when no tensor changes,
    nothing is checked and ``UncheckedOutputsWarning`` says so.
    ``atol``/``rtol`` default to 1e-2 for floating-point outputs and 0 for integers.
    Outputs are poisoned before the checked run; list in ``restore_value`` those the kernel
    also reads (they are restored instead, as in ``triton.autotune``), and in
    ``reset_to_zero`` the tensors the kernel expects to find at zero (zeroed before every
    launch, checked and timed, and not counted in the time).

    ``strategy`` (see ``kerntune strategies``), ``max_fevals``, ``time_limit`` (seconds) and
    ``target`` bound the search. Without any of them, ``default`` stops by itself once more
    evaluations are unlikely to pay (``result.stop == "converged"``, after at least 100),
    ``brute_force`` evaluates the whole space and the other strategies make 100.
    Results are kept in ``db`` (default ``$KERNTUNE_DB`` or ``~/.cache/kerntune/results.db``):
    a second call with the same kernel, arguments' shapes and types, and parameters answers
    from it at no cost. ``objective = (name, expression)`` replaces the time, e.g.
    ``("TFLOP/s", "2*M*N*K / (time * 1e-3) / 1e12")`` over the parameters, the call's scalar
    arguments and ``time`` in ms. Ctrl-C stops within a fraction of a second, keeping
    every recorded result (evaluations still in flight are dropped). ``fresh=True`` measures everything again instead of answering from the
    store (the new results replace the stored ones).

    After the search, the best ``finalists`` configurations (those within 5% of the best) are
    timed again, each interleaved with the best in rounds over several reloads, and the best
    against a copy of itself (an A/A control); one replaces the best only when it is faster
    beyond that control's noise. ``result.finalists`` holds the report; ``finalists=1`` takes
    the search's best as it is.

    ``schedule=True`` then tunes the native instruction schedule (SASS) of the best
    configuration: legal reorderings of its memory instructions, each checked to compute
    exactly (bit for bit) what the original computes; the search's fastest candidates are
    timed again interleaved with the original, and the best of them is checked again on 10^4
    random input sets and timed interleaved with the original once more, for its confidence
    interval. ``schedule_options`` holds ``budget`` (candidates, default 1000), ``method``
    (``hill_climb`` or ``anneal``), ``check_sets`` (10^4), ``rounds`` (200), ``blocks``
    (20: the A/B timing reloads both kernels this many times, and times a copy of the
    original the same way as a control the winner must beat), ``finalists`` (8),
    ``finalist_rounds`` (20), ``seed``. The report is ``result.schedule``; a kept schedule
    can be launched through Triton with ``kerntune.use_schedule``.
    """
    fn = jit_function(kernel)
    check_device(device)
    strategy = check_strategy(strategy, "default")
    params, listed = space_of(params, configs, kernel_defaults(fn))
    restrictions = names_of(restrictions, "restrictions")
    restore_value = names_of(restore_value, "restore_value")
    reset_to_zero = names_of(reset_to_zero, "reset_to_zero")
    call = _bind(fn, args, params)
    for argument, names in (("restore_value", restore_value), ("reset_to_zero", reset_to_zero)):
        for name in names:
            if not _is_tensor(call.get(name)):
                raise ArgumentError(f"{argument} names '{name}', which is not a tensor argument of {fn.__name__}")
    try:
        import torch
    except ImportError:
        raise _kerntune.NoGpuError("kerntune.tune runs the kernel through Triton and needs torch and a GPU; "
                                   "kerntune.compile(...) compiles without them") from None

    device = torch.cuda.current_device() if device is None else device
    info = json.loads(_kerntune.device_info(device))
    arch = info["compute_capability"][0] * 10 + info["compute_capability"][1]
    grid_fn = _grid_function(grid, call, list(params))
    workdir = tempfile.mkdtemp(prefix="kerntune-")
    try:
        return _tune_in(
            fn, call, grid_fn, params, listed, restrictions, answer, atol, rtol, restore_value, reset_to_zero,
            hooks or Hooks(), device, arch, info, workdir, dict(
                strategy=strategy, strategy_options=strategy_options, max_fevals=max_fevals, time_limit=time_limit,
                target=target, seed=seed, db=db, fresh=fresh, compile_workers=compile_workers, progress=progress,
                objective=objective, timing=timing, schedule=schedule, schedule_options=schedule_options,
                finalists=finalists,
            ),
        )
    finally:
        if os.environ.get("KERNTUNE_KEEP_TEMP") != "1":
            shutil.rmtree(workdir, ignore_errors=True)


class Hooks:
    """Python code a Triton user runs around launches (``pre_hook``, ``post_hook``,
    ``triton.Config.pre_hook``). kerntune runs them around the launches made in this
    process: the reference runs and every launch of the chosen configuration. The benchmark
    worker launches the cubins on its own copies of the tensors, where Python cannot run;
    ``reset_to_zero`` and ``restore_value`` say declaratively what such hooks usually do."""

    def __init__(self, pre_hook=None, post_hook=None, config_hooks=None):
        self.pre_hook = pre_hook
        self.post_hook = post_hook
        self.config_hooks = config_hooks or {}

    def around(self, launch, nargs: dict, config: Mapping[str, Any]):
        if not (self.config_hooks or self.pre_hook or self.post_hook):
            return launch()  # the common case, on every launch of a tuned kernel
        config_hook = self.config_hooks.get(_config_key(config))
        if config_hook is not None:
            config_hook(nargs)
        if self.pre_hook is not None:
            self.pre_hook(nargs)
        try:
            result = launch()
        except Exception as error:
            if self.post_hook is not None:
                self.post_hook(nargs, exception=error)
            raise
        if self.post_hook is not None:
            self.post_hook(nargs, exception=None)
        return result


def _config_key(config: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in launch_options(config).items()))


def _tune_in(fn, call, grid_fn, params, listed, restrictions, answer, atol, rtol, restore_value, reset_to_zero,
             hooks, device, arch, info, workdir, search) -> TuneResult:
    clock = time.perf_counter()
    phases = {}
    job, describe, configs = _job(fn, call, params, listed, restrictions, arch, info["max_shared_per_block_optin"], workdir)
    job_args = job["args"]
    for entry in job_args:
        if entry["kind"] == "buffer":
            value = call[entry["name"]]
            entry["file"] = os.path.join(workdir, f"{entry['name']}.bin")
            entry["len"] = _storage_span(value)
            _write_tensor(value, entry["file"])

    for name in reset_to_zero:
        entry = job_args[fn.arg_names.index(name)]
        entry["reset"] = True
        entry["poison"] = False

    phases["prepare_s"] = time.perf_counter() - clock
    reference = None
    if answer is None:
        _, outputs = _reference_outputs(fn, grid_fn, call, configs, reset_to_zero, hooks, atol, rtol)
    else:
        if not isinstance(answer, Mapping):
            raise ArgumentTypeError(f"answer must be a dict of output argument names to expected tensors, got {type(answer).__name__}")
        outputs = dict(answer)
        for name in outputs:
            if not _is_tensor(call.get(name)):
                raise ArgumentError(f"answer names '{name}', which is not a tensor argument of {fn.__name__}")
    if outputs:
        reference = []
        for name, expected in outputs.items():
            position = fn.arg_names.index(name)
            tensor = call[name]
            if not tensor.is_contiguous():
                raise ArgumentError(f"output {name} must be contiguous to be checked")
            job_args[position]["output"] = True
            path = os.path.join(workdir, f"{name}.expected.bin")
            _write_tensor(expected.to(tensor.dtype).reshape(tensor.shape), path)
            tolerance = _default_tolerance(tensor)
            reference.append({
                "position": position,
                "file": path,
                "atol": tolerance if atol is None else atol,
                "rtol": tolerance if rtol is None else rtol,
            })
    for name in restore_value:
        job_args[fn.arg_names.index(name)]["poison"] = False
    scalars = {d["name"]: d["value"] for d in describe if d["kind"] == "value" and isinstance(d.get("value"), (int, float))}
    phases["reference_s"] = time.perf_counter() - clock - phases["prepare_s"]
    if reference is None:
        warn_unchecked(fn.__name__, "no tensor changed when the reference configurations ran", "give answer= to check them", 3)
    job["reference"] = reference
    job["timing"] = dict(search["timing"] or {})
    objective = search["objective"]
    if objective is not None:
        job["objective"] = {"name": objective[0], "expression": objective[1], "values": scalars}
    request = {
        "search": {
            "strategy": search["strategy"],
            "strategy_options": dict(search["strategy_options"] or {}),
            "max_fevals": search["max_fevals"],
            "time_limit": search["time_limit"],
            "target": search["target"],
            "seed": search["seed"],
        },
        "db": search["db"],
        "fresh": search["fresh"],
        "device": device,
        "compile_workers": search["compile_workers"],
        "retime": {"finalists": int(search["finalists"]), "seed": search["seed"]} if search["finalists"] > 1 else None,
        "schedule": dict(search["schedule_options"] or {}) if search["schedule"] else None,
    }
    bar = _Progress() if search["progress"] else None
    try:
        text = _kerntune.tune_triton(json.dumps(job), json.dumps(request), grid_fn, bar)
    finally:
        if bar:
            bar.close()
    result = TuneResult.from_json(text)
    phases["tune_s"] = time.perf_counter() - clock - phases["prepare_s"] - phases["reference_s"]
    result.phases = phases
    if result.failure is not None:
        raise NoValidConfigError(f"{fn.__name__}: {result.failure}", result)
    return result


class _Progress:
    """A one-line progress report on standard error."""

    def __init__(self):
        self.shown = False

    def __call__(self, done, total, best):
        if not sys.stderr.isatty():
            return
        best_text = "" if best is None else f", best {best:.5g}"
        sys.stderr.write(f"\rkerntune: {done}/{total} configurations{best_text}   ")
        sys.stderr.flush()
        self.shown = True

    def close(self):
        if self.shown:
            sys.stderr.write("\n")

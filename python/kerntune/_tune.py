"""``kerntune.tune``: tune a ``@triton.jit`` kernel on the GPU.

The kernel is compiled by worker processes on the CPU (one per core), each specializing a
configuration exactly as Triton's JIT would specialize this call; the benchmark worker
owns copies of the call's tensors and launches the cubins from Rust with Triton's ABI.
"""

from __future__ import annotations

import copy
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
from kerntune._errors import (ArgumentError, ArgumentTypeError, ReferenceDisagreementError, check_arch, check_device, check_devices,
                              check_search, check_strategy, warn_unchecked)
from kerntune._kernel_source import capture
from kerntune._results import NoValidConfigError, TuneResult
from kerntune import _edges, _ptxas
from kerntune._space import CONTROL_NAMES, OPTION_NAMES, config_key, launch_options, names_of, space_of

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


def _is_descriptor(value) -> bool:
    """A host-side TMA tensor descriptor (``triton.tools.tensor_descriptor.TensorDescriptor``)."""
    return type(value).__name__ == "TensorDescriptor" and _is_tensor(getattr(value, "base", None))


def _tensor_of(value):
    """The tensor an argument holds: the tensor itself, a descriptor's base, else None."""
    if _is_tensor(value):
        return value
    return value.base if _is_descriptor(value) else None


def _with_tensor(value, tensor):
    """``value`` holding ``tensor`` instead: the tensor, or a copy of the descriptor over it
    (its block shape free to change, as a config's ``pre_hook`` changes it)."""
    if not _is_descriptor(value):
        return tensor
    desc = copy.copy(value)
    desc.base = tensor
    desc.block_shape = list(value.block_shape)
    return desc


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
    options = {k: v for k, v in config.items()
               if k not in fn.arg_names and not (k == "maxnreg" and v == 0) and k not in CONTROL_NAMES}
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


def _clones(call):
    """Copies of a call's tensors (the rest as given), and no check after a launch."""
    return {k: (_with_tensor(v, _tensor_of(v).clone()) if _tensor_of(v) is not None else v) for k, v in call.items()}, None


def _run_configs(fn, grid, call, configs, reset_to_zero, hooks, limit, copy=_clones):
    """Runs configurations through Triton itself, each on copies of the tensors, until
    ``limit`` have run. Returns ``[(config, {name: changed tensor})]`` and the errors of those
    that did not run. ``copy(call)`` makes the copies and a check called after the launch,
    whose exception fails the run (default: ``_clones``)."""
    import torch

    runs, errors = [], []
    for config in configs:
        if len(runs) == limit:
            break
        copies, after = copy(call)
        for name in reset_to_zero:
            copies[name].zero_()
        launch = launch_options(config)
        try:
            hooks.around(lambda: fn[lambda meta: tuple(grid(list(config.values())))](**copies, **launch), {**copies, **launch}, config)
            torch.cuda.synchronize()
            if after is not None:
                after()
        except Exception as error:  # try the next configuration
            errors.append(f"{config}: {type(error).__name__}: {error}")
            continue
        changed = {k: _tensor_of(copies[k]) for k, v in call.items()
                   if _tensor_of(v) is not None and k not in reset_to_zero and not _same_bytes(_tensor_of(copies[k]), _tensor_of(v))}
        changed.update({k: copies[k] for k in reset_to_zero if copies[k].count_nonzero().item() > 0})
        runs.append((config, changed))
    return runs, errors


def _agreement_check(fn, call, reset_to_zero, atol, rtol, where=""):
    """A function that raises ``ReferenceDisagreementError`` when reference runs disagree."""
    import torch

    def unchanged(name):
        return torch.zeros_like(call[name]) if name in reset_to_zero else _tensor_of(call[name])

    def difference(name, actual, expected):
        tolerance = _default_tolerance(expected)
        return _difference(actual, expected, tolerance if atol is None else atol, tolerance if rtol is None else rtol)

    def check(runs):
        problem = _disagreement(runs, unchanged, difference)
        if problem is not None:
            raise ReferenceDisagreementError(
                f"{fn.__name__}: without answer=, the reference is the outputs of the first configurations that run "
                f"through Triton, and they disagree{where}: {problem}. One of them is wrong (or the kernel is not "
                f"deterministic beyond atol/rtol); give answer= (the expected outputs) to check against")
    return check


def _reference_outputs(fn, grid, call, configs, reset_to_zero, hooks, atol, rtol):
    """Runs the first configurations that run (up to ``AGREEING_CONFIGS``) through Triton
    itself, each on copies of the tensors: the tensors a run changes are the outputs. Their
    outputs must agree within the tolerances; the first configuration's are the reference.
    Returns the runs, the first being the reference."""
    runs, errors = _run_configs(fn, grid, call, configs, reset_to_zero, hooks, AGREEING_CONFIGS)
    if not runs:
        raise RuntimeError("no configuration ran through Triton to give a reference:\n" + "\n".join(errors[:5]))
    if not any(changed for _, changed in runs):
        written = _written_outputs(fn, grid, call, runs[0][0], reset_to_zero, hooks)
        runs = [(config, {name: _tensor_of(call[name]).clone() for name in written}) for config, _ in runs]
    _agreement_check(fn, call, reset_to_zero, atol, rtol)(runs)
    return runs


def _written_outputs(fn, grid, call, config, reset_to_zero, hooks) -> list:
    """The floating-point tensors a launch of ``config`` writes, for a call whose outputs
    already held what the kernel computes (an output from ``torch.empty`` on memory where
    the same product was freed: a benchmark calling one computation after another). Each
    such tensor in turn is filled with NaN on a copy, the others left as they are, and is an
    output when the launch leaves a number in it. Index and pointer tensors keep their
    values, so no launch reads out of bounds."""
    written = []
    for name, value in call.items():
        tensor = _tensor_of(value)
        if tensor is None or not tensor.is_floating_point() or name in reset_to_zero:
            continue

        def copy(call, name=name):
            copies, _ = _clones(call)
            _tensor_of(copies[name]).fill_(float("nan"))
            return copies, lambda: None if _tensor_of(copies[name]).isnan().all().item() else written.append(name)

        _run_configs(fn, grid, call, [config], reset_to_zero, hooks, 1, copy=copy)
    return written


#: Input sets beyond the call's own on which every configuration is checked when the
#: reference configurations compute the expected outputs (``verify_sets=``): a
#: configuration right on one set of inputs by accident (a bound the data happen to respect,
#: a race the data hide) is caught on the next, as ``[verify] sets`` does for CUDA C.
VERIFY_SETS = 2


def _shuffled_inputs(call, outputs, reset_to_zero, number: int) -> dict:
    """The call's tensors with each floating-point input's elements shuffled, seeded by
    the set's ``number`` and the tensor's place: the same values in other places, so the same range and no NaN or
    infinity the call lacked. Integer tensors (indices, offsets, lengths) keep their data,
    as do outputs, zeroed tensors and tensors that are not plain contiguous blocks."""
    import torch

    shuffled = {}
    for index, (name, value) in enumerate(call.items()):
        tensor = _tensor_of(value)
        if (tensor is not None and tensor.is_floating_point() and name not in outputs and name not in reset_to_zero
                and tensor.is_contiguous() and tensor.numel() > 1):
            # Drawn on the tensor's device (no permutation built on the host and copied over),
            # each tensor its own.
            generator = torch.Generator(device=tensor.device).manual_seed(0x5EED + 1009 * number + index)
            order = torch.randperm(tensor.numel(), generator=generator, device=tensor.device)
            shuffled[name] = _with_tensor(value, tensor.reshape(-1)[order].reshape(tensor.shape))
    return shuffled


def _extra_sets(fn, grid, call, runs, reset_to_zero, hooks, atol, rtol, count, workdir, positions):
    """Input sets beyond the call's own, with the outputs the reference configurations
    (``runs``, which agreed on the call's tensors) compute on each; they must agree again.
    Returns the job's ``extra_sets``: empty when no input can be shuffled."""
    sets = []
    expected_names = list(runs[0][1])
    for number in range(1, count + 1):
        shuffled = _shuffled_inputs(call, set(expected_names), reset_to_zero, number)
        if not shuffled:
            return []
        data = {**call, **shuffled}
        configs = [config for config, _ in runs]
        again, errors = _run_configs(fn, grid, data, configs, reset_to_zero, hooks, len(configs))
        if len(again) < len(configs):
            raise RuntimeError(f"{fn.__name__}: a reference configuration failed on input set {number + 1} "
                               f"(the call's inputs shuffled): " + "; ".join(errors[:2]))
        _agreement_check(fn, data, reset_to_zero, atol, rtol,
                         f" on input set {number + 1} (the call's floating-point inputs shuffled)")(again)
        inputs = []
        for name, value in shuffled.items():
            path = os.path.join(workdir, f"{name}.set{number}.bin")
            _write_tensor(_tensor_of(value), path)
            inputs.append([positions[name], path])
        expected = []
        for name in expected_names:
            path = os.path.join(workdir, f"{name}.set{number}.expected.bin")
            output = again[0][1].get(name)
            if output is None:  # this set's run left it as the call had it (zeroed, if reset)
                output = call[name].new_zeros(call[name].shape) if name in reset_to_zero else _tensor_of(call[name])
            _write_tensor(output, path)
            expected.append(path)
        sets.append({"inputs": inputs, "expected": expected})
    return sets


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


class _DType(str):
    """A stand-in tensor's element type: its name, with the two facts a host-side
    ``TensorDescriptor`` reads of a torch dtype."""

    @property
    def itemsize(self) -> int:
        from triton._utils import BITWIDTH_DICT

        return max(BITWIDTH_DICT[str(self)] // 8, 1)

    @property
    def is_floating_point(self) -> bool:
        return str(self).startswith(("float", "bfloat"))


class Tensor:
    """A stand-in for a tensor argument when compiling without a GPU
    (``kerntune.compile``): its element type, shape and address (for alignment). It can be
    the base of a ``TensorDescriptor`` (``TensorDescriptor.from_tensor``), contiguous."""

    def __init__(self, dtype: str, shape: Sequence[int], data_ptr: int = 1 << 20):
        # Triton's own table of element types: a name it lacks would fail inside Triton
        # (a KeyError) at the first compile.
        from triton._utils import BITWIDTH_DICT

        if not isinstance(dtype, str) or BITWIDTH_DICT.get(dtype, 0) == 0:
            raise ArgumentError(f"Tensor dtype {dtype!r} is not an element type Triton knows; give a torch dtype's "
                                f"name: {', '.join(_DTYPES)}, or another of Triton's (int8, float8_e4m3fn...)")
        self.dtype = _DType(dtype)
        self.shape = tuple(shape)
        self._data_ptr = data_ptr

    def data_ptr(self) -> int:
        return self._data_ptr

    def element_size(self) -> int:
        return self.dtype.itemsize

    def stride(self) -> tuple:
        strides, step = [], 1
        for extent in reversed(self.shape):
            strides.insert(0, step)
            step *= extent
        return tuple(strides)


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
        elif _is_descriptor(value):
            base = value.base
            dtype = _DTYPES.get(_dtype_name(base), "u8" if base.element_size() == 1 else None)
            if dtype is None:
                raise ArgumentTypeError(f"argument {p.name}: tensor descriptors over {base.dtype} are not supported yet")
            job_args.append({"kind": "buffer", "name": p.name, "dtype": dtype, "len": 0, "file": "", "output": False})
            describe.append({"name": p.name, "kind": "tensordesc", "dtype": _dtype_name(base), "data_ptr": base.data_ptr(),
                             "shape": [int(n) for n in value.shape], "strides": [int(n) for n in value.strides],
                             "block_shape": [int(n) for n in value.block_shape], "padding": value.padding})
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


def check_ptx_options(params, chosen: Optional[dict] = None) -> None:
    """ACF files (``--apply-controls`` in ``ptx_options``, or an ``acf`` parameter) need
    ptxas 13.3 or newer: a clear error otherwise, naming the ptxas (``chosen``, or Triton's)."""
    acfs = [v for v in params.get("acf", []) if v not in ("", "none")]
    if not acfs and not any("apply-controls" in str(v) for v in params.get("ptx_options", [])):
        return
    if chosen is None:
        from triton.backends.nvidia.compiler import get_ptxas

        ptxas = get_ptxas(90)
        version, path = str(ptxas.version), ptxas.path
    else:
        version, path = chosen["version"], chosen["path"]
    found = tuple(int(x) for x in version.split(".")[:2])
    if found < (13, 3):
        raise _kerntune.SpecError(
            f"ACF files (--apply-controls) need ptxas 13.3 or newer; this Triton uses ptxas {version} "
            f"({path}); pass ptxas=\"pip\" (with nvidia-cuda-nvcc 13.3 installed) or a newer ptxas's path"
        )
    for acf in acfs:
        if not os.path.isfile(str(acf)):
            raise ArgumentError(f"acf = {acf!r}: no such file")


def check_ray(address: str, gpus: int = 0) -> int:
    """Checks, in a process of its own, that Ray is there, the cluster at ``address``
    answers and has ``gpus`` GPUs at least, else raises one line saying what to do.
    Returns how many GPUs the cluster has."""
    return RayCheck(address, gpus).result()


class RayCheck:
    """``check_ray`` started now and answered later: joining a cluster takes its process a
    few seconds, which a run spends preparing its reference meanwhile. ``ray_gpus`` is what
    the call asked for (None, a count, or ``"all"``)."""

    def __init__(self, address: str, ray_gpus: Union[int, str, None] = None):
        import subprocess

        from kerntune import ray_worker

        self.address, self.ray_gpus = address, ray_gpus
        asked = ray_gpus if isinstance(ray_gpus, int) else 0
        self.process = subprocess.Popen(
            [sys.executable, *ray_worker.RELAY, "--check", "--address", address, "--gpus", str(asked)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def result(self) -> int:
        """How many GPUs the cluster has, or the check's one-line error."""
        stdout, stderr = self.process.communicate()
        if self.process.returncode != 0:
            lines = [line for line in stderr.splitlines() if line.strip()]
            reason = lines[-1].removeprefix("kerntune: ") if lines else \
                f"the relay exited with {self.process.returncode}"
            raise _kerntune.BackendError(f"ray={self.address!r}: {reason}")
        answers = [line for line in stdout.splitlines() if line.startswith("{")]
        have = int(json.loads(answers[-1])["gpus"]) if answers else 0
        asked = self.ray_gpus if isinstance(self.ray_gpus, int) else 0
        if asked > have:
            raise _kerntune.BackendError(f"ray={self.address!r}: the Ray cluster at {self.address!r} has {have} GPU(s); "
                                         f"{asked} were asked for (ray_gpus=)")
        return have

    def bench_gpus(self) -> Optional[int]:
        """How many of the cluster's GPUs measure: ``ray_gpus`` as a count (``"all"``: every
        one, and a cluster without any is refused), None for this machine's."""
        have = self.result()
        if self.ray_gpus != "all":
            return self.ray_gpus
        if have == 0:
            raise _kerntune.BackendError(f"ray={self.address!r}: ray_gpus=\"all\": the Ray cluster has no GPU")
        return have


def check_ray_gpus(ray_gpus, ray, devices=None) -> Union[int, str, None]:
    """``ray_gpus``: None, ``"all"`` or a count of 1 or more, only with ``ray`` and not with
    ``devices``."""
    if ray_gpus is None:
        return None
    if ray is None:
        raise ArgumentError("ray_gpus= measures on a Ray cluster's GPUs: give ray= (the cluster's address) too")
    if devices is not None:
        raise ArgumentError("give devices= (this machine's GPUs) or ray_gpus= (the Ray cluster's), not both")
    if ray_gpus == "all" or (isinstance(ray_gpus, int) and not isinstance(ray_gpus, bool) and ray_gpus >= 1):
        return ray_gpus
    raise ArgumentError(f"ray_gpus = {ray_gpus!r}: give a number of GPUs (1 or more) or \"all\"")


def _through_ray(job: dict, address: str) -> None:
    """Runs the job's compile workers as actors of the Ray cluster at ``address`` (through
    ``kerntune.ray_worker``, which ships them their setup file); call ``check_ray`` first."""
    from kerntune import ray_worker

    argv = job["compile_worker"]
    setup = argv[argv.index("--triton-setup") + 1]
    job["compile_worker"] = ray_worker.command(sys.executable, address, argv, env=list(job["worker_env"]), ship=[setup])


def _bench_through_ray(job: dict, address: str) -> None:
    """Runs the job's benchmark workers as Ray actors holding one GPU each, shipped every
    file they read (the arguments, the expected outputs, the extra input sets): a node that
    lacks one gets it written at the same path."""
    from kerntune import ray_worker

    files = [entry["file"] for entry in job["args"] if entry.get("file")]
    files += [entry["file"] for entry in job.get("reference") or []]
    for extra in job.get("extra_sets") or []:
        files += [path for _, path in extra["inputs"]] + list(extra["expected"])
    job["bench_worker"] = ray_worker.command(sys.executable, address, job["bench_worker"], env=list(job["worker_env"]),
                                             ship=files, gpus=1)


def _job(fn, call, params, listed, restrictions, arch, shared_limit, workdir, ptxas=None):
    """The tuning job every call shares: arguments described, the compile worker's setup
    file written, the kernel fingerprinted. ``ptxas`` is the chosen one (``_ptxas.resolve``)."""
    import triton

    check_ptx_options(params, ptxas)

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
        "args": {d["name"]: (f"{d['dtype']}{list(_tensor_of(call[d['name']]).shape)}" if d["kind"] in ("tensor", "tensordesc")
                             else d.get("value")) for d in describe if d["kind"] != "tuned"},
        "specialization": [list(s) for s in specialization if s[0] != "constexpr"],
    }
    identity = [fn.cache_key, triton.__version__, problem["specialization"]]
    if ptxas is not None:
        identity.append(f"ptxas {ptxas['version']}")  # another ptxas makes other binaries
    fingerprint = hashlib.sha256(json.dumps(identity, default=str).encode()).hexdigest()[:16]
    env = worker_env()
    if ptxas is not None:
        env["TRITON_PTXAS_PATH"] = ptxas["path"]
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
        "worker_env": env,
        "ptxas": ptxas,
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
    ptxas: Optional[str] = None,
    ray: Optional[str] = None,
) -> list:
    """Compiles every configuration of a Triton kernel for ``arch`` without a GPU, with
    the specialization Triton's JIT would give this call. ``args`` may hold
    ``kerntune.Tensor`` stand-ins instead of tensors. The space is ``params`` (with
    ``restrictions``) or ``configs`` (a list of ``triton.Config``). Returns one entry per configuration
    (``config``, ``status``, ``reason``, ``launch``: the kernel's name, dynamic shared
    memory, warps, CTAs and parameters, and ``cubin``, base64); with ``db`` the cubins and
    failures are kept in the results store as each compile ends, and a second call answers
    from it what it holds (``from_store``) and compiles only the rest. Ctrl-C stops within a
    fraction of a second and raises ``KeyboardInterrupt``, keeping what was compiled. A
    compile that outlasts ``compile_timeout`` seconds fails that configuration; by default the limit is 60 s, and once 16 compiles succeeded, 4 times the
    90th percentile of the run's compile times (at least 10 s). ``ptxas`` (a path, or
    ``"pip"`` for the nvidia-cuda-nvcc wheel's) assembles instead of Triton's own; compiler
    controls (``acf``, ``opt_level`` parameters,
    ``ptx_options``) reach it. ``ray`` (a Ray cluster's address, with
    ``pip install 'kerntune[ray]'``) runs the compile workers as actors on its nodes; give
    ``compile_workers`` then (the default counts this machine's cores)."""
    fn = jit_function(kernel)
    params, listed = space_of(params, configs, kernel_defaults(fn))
    restrictions = names_of(restrictions, "restrictions")
    call = _bind(fn, args, params)
    number = check_arch(arch)
    with tempfile.TemporaryDirectory(prefix="kerntune-") as workdir:
        job, _, _ = _job(fn, call, params, listed, restrictions, number, shared_limit, workdir, _ptxas.resolve(ptxas))
        if ray is not None:
            check_ray(ray)
            _through_ray(job, ray)
        if compile_timeout is not None:
            job["timing"] = {"compile_timeout": f"{compile_timeout}s"}
        # The limit decides which configurations are refused: under another, the store's
        # answers are not this call's.
        job["problem"]["shared_limit"] = shared_limit
        hooks = Hooks.of(listed)
        text = _kerntune.compile_triton(json.dumps(job), f"sm_{number}", compile_workers, db,
                                        _descriptor_blocks(call, list(params), hooks))
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
    objective: Optional[Union[str, tuple]] = None,
    objective_higher_is_better: Optional[bool] = None,
    timing: Optional[Mapping[str, Any]] = None,
    restore_value: Sequence[str] = (),
    reset_to_zero: Sequence[str] = (),
    configs: Optional[Sequence] = None,
    seed: int = 0,
    fresh: bool = False,
    compile_workers: Optional[int] = None,
    device: Optional[int] = None,
    devices: Union[str, Sequence[int], None] = None,
    ray: Optional[str] = None,
    ray_gpus: Union[int, str, None] = None,
    progress: bool = True,
    finalists: int = 4,
    finalists_within: float = 0.05,
    schedule: bool = False,
    schedule_options: Optional[Mapping[str, Any]] = None,
    hooks: Optional["Hooks"] = None,
    verify_sets: int = VERIFY_SETS,
    edge_args: Optional[Sequence] = None,
    ptxas: Optional[str] = None,
    controls: Optional[str] = None,
    controls_budget: int = 24,
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
    ``answer``. Without ``answer``, every configuration is also checked on ``verify_sets``
    (2) further input sets: the call's floating-point inputs with their elements shuffled,
    on which the same reference configurations must agree again (``result.verified_sets``
    counts the sets, the call's own included). ``answer`` fits the call's own tensors only,
    so with it each configuration is checked on that one set; when no tensor changes,
    nothing is checked and ``UncheckedOutputsWarning`` says so.
    ``edge_args`` lists calls of the kernel at other sizes, where its blocks do not divide
    the problem and its masks matter: each a dict of the arguments that differ from
    ``args`` (``{"x": x2, "out": out2, "n": 4095}``), or an ``(args, answer)`` pair. After
    the search, the best configurations are launched there through Triton, best first,
    until ``finalists`` have passed; one that computes other outputs there than the
    reference configurations (or the pair's answer) is ``invalid_output``, its reason naming
    the size, and cannot win. ``result.verified_sizes`` names the sizes and
    ``result.edge_checked`` counts the configurations checked there.
    ``atol``/``rtol`` default to 1e-2 for floating-point outputs and 0 for integers.
    Outputs are poisoned before the checked run; list in ``restore_value`` those the kernel
    also reads (they are restored instead, as in ``triton.autotune``), and in
    ``reset_to_zero`` the tensors the kernel expects to find at zero (zeroed before every
    launch, checked and timed, and not counted in the time).

    ``devices`` (``"all"`` or a list of GPU numbers, of one model) measures on several GPUs
    at once, one benchmark worker each, instead of ``device``; the finalists and the
    schedule stage measure on the first. ``ray`` (a Ray cluster's address, with
    ``pip install 'kerntune[ray]'``) runs the compile workers as Ray actors on the cluster's
    nodes (see docs/design-notes.md); ``ray_gpus`` (a count, or ``"all"``) also runs that
    many benchmark workers as Ray actors with one GPU each, instead of this machine's (which
    still runs the reference and needs a GPU of the cluster's model); each is shipped the
    files of the call's tensors.

    ``strategy`` (see ``kerntune strategies``), ``max_fevals``, ``time_limit`` (seconds) and
    ``target`` bound the search (when ``time_limit`` runs out, configurations still compiling
    are given up; those on the GPU are measured to the end). Without any of them, ``default`` stops by itself once more
    evaluations are unlikely to pay (``result.stop == "converged"``, after at least 100),
    ``brute_force`` evaluates the whole space and the other strategies make 100.
    ``compile_workers`` defaults to one per core, but with ``max_fevals`` to no more than a
    sixth of it (never fewer than 16): on a large host, a small budget is otherwise spent on
    configurations picked before any result is back.
    Results are kept in ``db`` (default ``$KERNTUNE_DB`` or ``~/.cache/kerntune/results.db``):
    a second call with the same kernel, arguments' shapes and types, and parameters answers
    from it at no cost. ``objective = (name, expression)`` replaces the time, e.g.
    ``("TFLOP/s", "2*M*N*K / (time * 1e-3) / 1e12")`` over the parameters, the call's scalar
    arguments, ``time`` in ms and the values NVML measures (``energy`` in J per launch,
    ``power`` in W, ``clock_MHz``...); a string alone names or is the expression:
    ``objective="energy"``, ``"edp"`` (energy x time) or ``"energy*time**2"``. Energy and
    power are read from NVML's energy counter in an extra block of at least 500 ms per
    configuration; a machine without NVML refuses such an objective. Lower is better
    unless ``objective_higher_is_better=True`` (rates such as ``TFLOP/s`` go up by default).
    ``timing={"graph": True}`` times each sample as a CUDA graph of many launches, for
    kernels of a few microseconds; ``timing={"energy": True}`` measures energy and power
    with every configuration whatever the objective. Ctrl-C stops within a fraction of a second and
    raises ``KeyboardInterrupt``, keeping every recorded result (evaluations still in flight are
    dropped; the same call resumes). ``fresh=True`` measures everything again instead of answering from the
    store (the new results replace the stored ones).

    ``progress`` (default True) shows the count and the best so far while the run goes: on a
    terminal, a line on standard error redrawn in place; in a Jupyter notebook, a line in the
    cell's output; elsewhere (output to a pipe or a file) only one summary line at the end.
    ``result.report("report.html")`` writes an HTML report of the tuning.

    After the search, the best ``finalists`` configurations (those within 5% of the best) are
    timed again, each interleaved with the best in rounds over several reloads, and the best
    against a copy of itself (an A/A control); one replaces the best only when it is faster
    beyond that control's noise (``finalists_within`` sets the 5%). ``result.finalists`` holds
    the report; ``finalists=1`` takes the search's best as it is.

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

    ``ptxas`` (a path, or ``"pip"`` for the nvidia-cuda-nvcc wheel's) assembles the kernels
    instead of Triton's own ptxas; its version shows in ``result.compiler`` and is part of
    the results' identity. Compiler controls are parameters like the rest: ``acf`` (ACF
    files, ``"none"``), ``opt_level`` (0-3),
    ``maxnreg`` and ``ptx_options``. ``controls="compileiq"`` then searches the ACF files of
    the best configuration with CompileIQ (installed separately: ``pip install compileiq``),
    ``controls_budget`` candidates in generations, each compiled and timed like any
    configuration; the fastest is timed against the configuration without an ACF,
    interleaved with an A/A control, and kept only when faster beyond the control's noise.
    The report is ``result.controls``; a kept ACF is in ``result.best_config["acf"]``.
    """
    fn = jit_function(kernel)
    check_device(device)
    devices = check_devices(devices)
    ray_gpus = check_ray_gpus(ray_gpus, ray, devices)
    if devices is not None and device is not None:
        raise ArgumentError("give device= or devices=, not both")
    strategy = check_strategy(strategy, "default")
    check_search(strategy, strategy_options, "default", max_fevals=max_fevals, time_limit=time_limit, target=target)
    params, listed = space_of(params, configs, kernel_defaults(fn))
    restrictions = names_of(restrictions, "restrictions")
    restore_value = names_of(restore_value, "restore_value")
    reset_to_zero = names_of(reset_to_zero, "reset_to_zero")
    call = _bind(fn, args, params)
    for argument, names in (("restore_value", restore_value), ("reset_to_zero", reset_to_zero)):
        for name in names:
            if not _is_tensor(call.get(name)):
                raise ArgumentError(f"{argument} names '{name}', which is not a tensor argument of {fn.__name__}")
    edges = _edges.bind(fn, call, edge_args, params, grid)
    try:
        import torch
    except ImportError:
        raise _kerntune.NoGpuError("kerntune.tune runs the kernel through Triton and needs torch and a GPU; "
                                   "kerntune.compile(...) compiles without them") from None

    if devices is not None:
        device = 0 if devices == "all" else int(devices.split(",")[0])
    device = torch.cuda.current_device() if device is None else device
    info = json.loads(_kerntune.device_info(device))
    arch = info["compute_capability"][0] * 10 + info["compute_capability"][1]
    if controls not in (None, "compileiq"):
        raise ArgumentError(f"controls = {controls!r}: the controls search is \"compileiq\" (or None)")
    grid_fn = _grid_function(grid, call, list(params))
    chosen = _ptxas.resolve(ptxas)
    workdir = tempfile.mkdtemp(prefix="kerntune-")
    try:
        result = _tune_in(
            fn, call, grid_fn, params, listed, restrictions, answer, atol, rtol, restore_value, reset_to_zero,
            hooks or Hooks.of(listed), device, arch, info, workdir, dict(
                strategy=strategy, strategy_options=strategy_options, max_fevals=max_fevals, time_limit=time_limit,
                target=target, seed=seed, db=db, fresh=fresh, compile_workers=compile_workers, progress=progress,
                objective=_objective(objective, objective_higher_is_better), timing=timing, schedule=schedule,
                schedule_options=schedule_options, finalists=finalists, finalists_within=finalists_within, ptxas=chosen,
                devices=devices, ray=ray, ray_gpus=ray_gpus,
            ),
            verify_sets, edges,
        )
    finally:
        if os.environ.get("KERNTUNE_KEEP_TEMP") != "1":
            shutil.rmtree(workdir, ignore_errors=True)
    if controls == "compileiq":
        from kerntune._controls import compileiq_stage

        def retune(configs, **options):
            return tune(kernel, args, grid, restrictions=None, answer=answer, atol=atol, rtol=rtol, db=db,
                        strategy="brute_force", timing=timing, restore_value=restore_value,
                        reset_to_zero=reset_to_zero, configs=configs, seed=seed, compile_workers=compile_workers,
                        device=device, progress=False, hooks=hooks, ptxas=ptxas, objective=objective, verify_sets=verify_sets,
                        **options)

        result.controls = compileiq_stage(result, retune, controls_budget, chosen)
        if result.controls["kept"]:
            result.best_config = {**result.best_config, "acf": result.controls["best_acf"]}
    return result


def _measured_identity(job: dict, edge_sizes: Sequence[str] = ()) -> str:
    """The job's fingerprint, with what changes the measured values folded in: the
    objective, graph timing, energy measurement, the edge sizes checked. A store then never
    answers an energy objective with rows measured for time alone, nor a run without edge
    sizes with rows found wrong at one."""
    timing = job.get("timing") or {}
    measured = {key: timing[key] for key in ("graph", "energy") if timing.get(key)}
    objective = job.get("objective")
    if objective is None and not measured and not edge_sizes:
        return job["fingerprint"]
    parts = [objective, measured] + ([list(edge_sizes)] if edge_sizes else [])
    text = json.dumps(parts, sort_keys=True, default=str)
    return f"{job['fingerprint']}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _objective(objective, higher_is_better) -> Optional[dict]:
    """The job's objective from ``objective=`` (a name or expression, or a ``(name,
    expression)`` pair) and ``objective_higher_is_better=``; ``None`` for the time."""
    if higher_is_better is not None and not isinstance(higher_is_better, bool):
        raise ArgumentTypeError("objective_higher_is_better: give True or False")
    if objective is None or objective == "time":
        if higher_is_better:
            raise ArgumentError("objective_higher_is_better=True: the time is better lower; give objective= as well")
        return None
    if isinstance(objective, str):
        name, expression = objective, None
    elif isinstance(objective, tuple) and len(objective) == 2 and all(isinstance(x, str) for x in objective):
        name, expression = objective
    else:
        raise ArgumentTypeError("objective: give a name or expression ('energy', 'edp', 'energy*time**2') or a "
                                "(name, expression) pair of strings")
    if not name.strip():
        raise ArgumentError("objective: give a name (time, energy, edp) or an expression such as energy*time**2")
    return {"name": name, "expression": expression, "higher_is_better": higher_is_better}


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

    @classmethod
    def of(cls, listed, pre_hook=None, post_hook=None) -> "Hooks":
        """The call's hooks, with each listed configuration's ``pre_hook`` (``listed``: a
        ``Listed`` space, or None)."""
        return cls(pre_hook, post_hook, listed.config_hooks() if listed is not None else None)

    def before(self, nargs: dict, config: Mapping[str, Any]) -> None:
        """The hooks that run before a launch of ``config``: its own, then the call's."""
        config_hook = self.config_hooks.get(config_key(config))
        if config_hook is not None:
            config_hook(nargs)
        if self.pre_hook is not None:
            self.pre_hook(nargs)

    def around(self, launch, nargs: dict, config: Mapping[str, Any]):
        if not (self.config_hooks or self.pre_hook or self.post_hook):
            return launch()  # the common case, on every launch of a tuned kernel
        self.before(nargs, config)
        try:
            result = launch()
        except Exception as error:
            if self.post_hook is not None:
                self.post_hook(nargs, exception=error)
            raise
        if self.post_hook is not None:
            self.post_hook(nargs, exception=None)
        return result


def _descriptor_blocks(call: Mapping[str, Any], names: Sequence[str], hooks: Hooks):
    """For a call with host-side tensor descriptors, the function the run asks for each
    configuration's block shapes (values in the order of ``names``; JSON ``{name: [dims]}``
    back): the hooks that run before a launch set them, as Triton's tutorials do in a
    config's ``pre_hook``, here on copies of the descriptors. None without descriptors."""
    described = [name for name, value in call.items() if _is_descriptor(value)]
    if not described:
        return None

    def blocks(values):
        config = dict(zip(names, values))
        nargs = {**call, **{name: _with_tensor(call[name], call[name].base) for name in described}, **config}
        hooks.before(nargs, config)
        return json.dumps({name: [int(n) for n in nargs[name].block_shape] for name in described})
    return blocks


#: Integer tensors up to this many elements are read to see whether they hold addresses.
POINTER_TABLE_LIMIT = 1 << 16


def pointer_table(values: Sequence[int], segments: Sequence[tuple]) -> bool:
    """Whether ``values`` are device addresses: every nonzero one inside one of the memory
    ``segments`` (``(address, size)``) this process allocated, and at least one nonzero."""
    nonzero = [v for v in values if v]
    return bool(nonzero) and all(any(start <= v < start + size for start, size in segments) for v in nonzero)


def _refuse_pointer_tables(fn, call) -> None:
    """Refuses a call whose 64-bit integer tensors hold the addresses of other tensors
    (Triton's tutorial 08 passes its groups' matrices that way): the benchmark worker runs
    on copies in a process of its own, where those addresses mean nothing, and the
    reference runs would write through them into this process's tensors."""
    import torch

    segments = None
    for name, value in call.items():
        if not (_is_tensor(value) and value.is_cuda and value.dtype in (torch.int64, torch.uint64)
                and 0 < value.numel() <= POINTER_TABLE_LIMIT):
            continue
        if segments is None:
            segments = [(s["address"], s["total_size"]) for s in torch.cuda.memory_snapshot()]
        if pointer_table(value.flatten().tolist(), segments):
            raise ArgumentError(
                f"{fn.__name__}: argument {name} holds the device addresses of other tensors (a pointer table); "
                f"kerntune measures on copies of the arguments in a process of its own, where those addresses mean "
                f"nothing: pass the tensors as arguments of their own (or tune this kernel with triton.autotune)")


def _tune_in(fn, call, grid_fn, params, listed, restrictions, answer, atol, rtol, restore_value, reset_to_zero,
             hooks, device, arch, info, workdir, search, verify_sets, edges) -> TuneResult:
    clock = time.perf_counter()
    phases = {}
    _refuse_pointer_tables(fn, call)
    job, describe, configs = _job(fn, call, params, listed, restrictions, arch, info["max_shared_per_block_optin"], workdir,
                                  search["ptxas"])
    # The cluster's check is answered before the run starts; the reference runs meanwhile.
    # (Should this call stop first, the check's process still ends by itself.)
    checking = None
    if search["ray"] is not None:
        checking = RayCheck(search["ray"], search["ray_gpus"])
    ray_gpus = None
    job_args = job["args"]
    for entry in job_args:
        if entry["kind"] == "buffer":
            value = _tensor_of(call[entry["name"]])
            entry["file"] = os.path.join(workdir, f"{entry['name']}.bin")
            entry["len"] = _storage_span(value)
            _write_tensor(value, entry["file"])

    for name in reset_to_zero:
        entry = job_args[fn.arg_names.index(name)]
        entry["reset"] = True
        entry["poison"] = False

    phases["prepare_s"] = time.perf_counter() - clock
    reference = None
    extra_sets = []
    if answer is None:
        runs = _reference_outputs(fn, grid_fn, call, configs, reset_to_zero, hooks, atol, rtol)
        outputs = runs[0][1]
        # Of reference_s, the part the extra input sets take (shuffling, running, writing).
        phases["extra_sets_s"] = 0.0
        if outputs and verify_sets > 0:
            positions = {name: fn.arg_names.index(name) for name in call if name in fn.arg_names}
            started = time.perf_counter()
            extra_sets = _extra_sets(fn, grid_fn, call, runs, reset_to_zero, hooks, atol, rtol, verify_sets, workdir, positions)
            phases["extra_sets_s"] = time.perf_counter() - started
    else:
        if not isinstance(answer, Mapping):
            raise ArgumentTypeError(f"answer must be a dict of output argument names to expected tensors, got {type(answer).__name__}")
        outputs = dict(answer)
        for name in outputs:
            if _tensor_of(call.get(name)) is None:
                raise ArgumentError(f"answer names '{name}', which is not a tensor argument of {fn.__name__}")
    if outputs:
        reference = []
        for name, expected in outputs.items():
            position = fn.arg_names.index(name)
            tensor = _tensor_of(call[name])
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
    vet = None
    if edges and reference is not None:
        started = time.perf_counter()
        reference_configs = configs if answer is not None else [config for config, _ in runs]
        _edges.references(fn, edges, reference_configs, reset_to_zero, hooks, atol, rtol)
        vet = _edges.checker(fn, edges, list(params), restore_value, reset_to_zero, hooks, atol, rtol)
        phases["edge_sizes_s"] = time.perf_counter() - started
    if reference is None:
        warn_unchecked(fn.__name__, "no tensor changed when the reference configurations ran", "give answer= to check them", 3)
    job["reference"] = reference
    job["extra_sets"] = extra_sets if reference is not None else []
    job["timing"] = dict(search["timing"] or {})
    objective = search["objective"]
    if objective is not None:
        job["objective"] = {**objective, "values": scalars}
    job["fingerprint"] = _measured_identity(job, [edge.label for edge in edges] if vet else [])
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
        "devices": search["devices"],
        "compile_workers": search["compile_workers"],
        "retime": {"finalists": int(search["finalists"]), "within": float(search["finalists_within"]), "seed": search["seed"]}
        if search["finalists"] > 1 else None,
        "schedule": dict(search["schedule_options"] or {}) if search["schedule"] else None,
        "edge_sizes": [edge.label for edge in edges] if vet else [],
    }
    if checking is not None:
        ray_gpus = checking.bench_gpus()
        _through_ray(job, search["ray"])
    request["bench_workers"] = ray_gpus
    if ray_gpus:
        _bench_through_ray(job, search["ray"])
    bar = _Progress(fn.__name__, objective["name"] if objective else "time") if search["progress"] else None
    try:
        text = _kerntune.tune_triton(json.dumps(job), json.dumps(request), grid_fn, bar, vet,
                                     _descriptor_blocks(call, list(params), hooks))
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
    """A tuning's progress, where the caller looks: on a terminal, one line on standard error
    redrawn in place with the count and the best so far; in a Jupyter notebook, that line in
    the cell's output, updated in place; elsewhere (a pipe, a log file) nothing while the run
    goes, then one summary line. ``stream`` and ``display`` are for tests."""

    #: Seconds between two updates of a notebook's line (a redraw per evaluation is slow there).
    NOTEBOOK_INTERVAL = 0.25

    def __init__(self, kernel_name: str, objective: str, stream=None, display=None):
        self.kernel_name = kernel_name
        self.unit = "ms" if objective == "time" else objective
        self.stream = sys.stderr if stream is None else stream
        self.handle = None
        self.last = None
        self.updated = 0.0
        if self.stream.isatty():
            self.mode = "terminal"
        else:
            display = display or _notebook_display()
            self.mode = "quiet" if display is None else "notebook"
            self.display = display

    def line(self) -> str:
        done, total, best = self.last
        best_text = "no configuration has worked yet" if best is None else f"best {best:.5g} {self.unit}"
        return f"kerntune: {self.kernel_name}: {done}/{total} configurations, {best_text}"

    def __call__(self, done, total, best):
        self.last = (done, total, best)
        if self.mode == "terminal":
            self.stream.write(f"\r{self.line()}   ")
            self.stream.flush()
        elif self.mode == "notebook":
            now = time.monotonic()
            if self.handle is None:
                self.handle = self.display(self.line(), display_id=True)
                self.updated = now
            elif now - self.updated >= self.NOTEBOOK_INTERVAL:
                self.handle.update(self.line())
                self.updated = now

    def close(self):
        """Ends the line (terminal), shows the last state (notebook) or writes the summary."""
        if self.last is None:
            return
        if self.mode == "terminal":
            self.stream.write("\n")
        elif self.mode == "notebook":
            if self.handle is None:
                self.display(self.line())
            else:
                self.handle.update(self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()


def _notebook_display():
    """IPython's ``display`` when running in a Jupyter kernel (whose standard error is no
    terminal, but whose cell output can be updated in place), else None."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if getattr(shell, "kernel", None) is None:
        return None
    from IPython.display import display

    return display

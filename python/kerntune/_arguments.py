"""A Triton call's arguments as kerntune hands them to its workers: the kernel behind its
decorators, the call bound to the kernel's parameters, each argument described (a tensor's
element type and storage, a descriptor's block shape, a scalar packed as Triton's launcher
packs it), Triton's specialization of the call, stand-in tensors for compiling without a
GPU, the grid as a function of a configuration, and the refusal of pointer tables."""

from __future__ import annotations

import copy
import struct
from typing import Any, Mapping, Sequence

from kerntune._errors import ArgumentError, ArgumentTypeError
from kerntune._space import CONTROL_NAMES, OPTION_NAMES


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


def _constexpr_value(fn, name, value) -> dict:
    """A constexpr argument's value as the compile worker reads it: JSON, or a Triton dtype
    by its name (a default such as ``OUT: tl.constexpr = tl.float16``)."""
    import triton.language as tl

    if isinstance(value, tl.dtype):
        return {"value": str(value), "triton_dtype": value.name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise ArgumentTypeError(f"{fn.__name__}: constexpr argument {name} = {value!r}: kerntune sends constexpr values "
                            f"to its compile workers, which take an int, float, bool, str, None or a Triton dtype")


def _buffer_entry(name, tensor) -> dict:
    """The job's entry of a buffer argument; its file and length are filled in later."""
    dtype = _DTYPES.get(_dtype_name(tensor), "u8" if tensor.element_size() == 1 else None)
    if dtype is None:
        raise ArgumentTypeError(f"argument {name}: tensors of {tensor.dtype} are not supported yet")
    return {"kind": "buffer", "name": name, "dtype": dtype, "len": 0, "file": "", "output": False}


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
            describe.append({"name": p.name, "kind": "value", **_constexpr_value(fn, p.name, value)})
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
            job_args.append(_buffer_entry(p.name, value))
            describe.append({"name": p.name, "kind": "tensor", "dtype": _dtype_name(value), "data_ptr": value.data_ptr()})
        else:
            job_args.append({"kind": "scalar", "name": p.name, "bytes": _pack_scalar(kind, value)})
            describe.append({"name": p.name, "kind": "value", "value": value})
    return job_args, describe

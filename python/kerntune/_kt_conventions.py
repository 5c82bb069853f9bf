"""Kernel Tuner's conventions for one configuration: the source with its definitions, the
kernel's name, the thread block, the grid and the dynamic shared memory.

``kerntune.tune_kernel`` hands :meth:`Conventions.instance` to the Rust tuner, which calls
it for each configuration it compiles or launches; the conventions may call the user's
own functions (``problem_size``, ``grid_div_*``, ``defines``, ``smem_args`` and
``kernel_source`` may all be callables of the configuration), so they live here.

Definitions follow Kernel Tuner: without ``defines``, every parameter, the block and grid
dimensions and ``kernel_tuner`` are ``#define``d; a ``loop_unroll_factor*`` parameter
becomes a ``constexpr int`` and its ``#pragma unroll`` disappears when it is 0. Sizes
written as strings are Python expressions over the parameters, truncated to integers; the
grid is laid out from them in Rust (``kerntune_lang_cuda::divided_geometry``), by the rule a
spec's ``[launch]`` follows: ``ceil(problem_size / product of its divisors)`` per axis.
"""

from __future__ import annotations

import builtins
import math
import re
from typing import Any, Optional, Sequence

from kerntune import _kerntune
from kerntune._errors import ArgumentError, ArgumentTypeError

DEFAULT_BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
# A dimension whose parameter is not tuned: Kernel Tuner launches 256 threads in x.
DEFAULT_BLOCK = (256, 1, 1)
_AXES = ("x", "y", "z")
_TOKEN = re.compile(r"([A-Za-z0-9_]+)")
_SAFE_BUILTINS = {name: getattr(builtins, name) for name in ("min", "max", "abs", "int", "float", "round", "pow", "len")}


def substitute(text: str, params: dict) -> str:
    """Replaces every whole-word parameter name in ``text`` with its value."""
    return "".join(str(params[part]) if part in params else part for part in _TOKEN.split(text))


def evaluate(text: str, params: dict, what: str) -> Any:
    """A size written as a Python expression over the parameters."""
    try:
        return eval(substitute(text, params), {"__builtins__": _SAFE_BUILTINS, "math": math}, {})
    except Exception as error:
        raise ValueError(f"{what} '{text}': {error}") from None


class Conventions:
    """Kernel Tuner's rules for a kernel, checked once, applied per configuration."""

    def __init__(self, kernel_name: str, kernel_source, problem_size, grid_div: Sequence[Any],
                 block_size_names: Optional[Sequence[str]], defines: Optional[dict], smem_args: Optional[dict],
                 param_names: Sequence[str]):
        self.kernel_name = kernel_name
        self.kernel_source = kernel_source
        self.problem_size = check_size(problem_size)
        self.grid_div = [check_divisor(div, f"grid_div_{axis}") for div, axis in zip(grid_div, _AXES)]
        names = list(block_size_names or DEFAULT_BLOCK_NAMES)
        if not all(isinstance(n, str) for n in names) or not 1 <= len(names) <= 3:
            raise ArgumentTypeError("block_size_names: give 1 to 3 parameter names, e.g. ['bx', 'by']")
        self.block_names = names + list(DEFAULT_BLOCK_NAMES[len(names):])
        if defines is not None and not isinstance(defines, dict):
            raise ArgumentTypeError("defines: give a dict of name -> value (a string, number or callable), or None")
        for name in defines or {}:
            if not isinstance(name, str) or not name.isidentifier():
                raise ArgumentError(f"defines: '{name}' is not a valid C identifier")
        self.defines = defines
        self.shared = None
        if smem_args is not None:
            if not isinstance(smem_args, dict) or set(smem_args) - {"size"}:
                raise ArgumentError("smem_args: give {'size': bytes}, where bytes is an int, an expression string or a callable")
            self.shared = check_divisor(smem_args.get("size", 0), "smem_args['size']")
        self.param_names = list(param_names)

    def block(self, params: dict) -> list[int]:
        return [int(params.get(name, default)) for name, default in zip(self.block_names, DEFAULT_BLOCK)]

    def launch(self, params: dict) -> tuple:
        """``(grid, block, shared_bytes)`` of a configuration: what the conventions (the
        caller's functions and expressions among them) give for it, laid out by Kernel
        Tuner's rule as the spec's ``[launch]`` is (in Rust: a grid dimension is the problem
        size divided by the product of its divisors, rounded up); ValueError saying why it
        cannot launch."""
        size = self.problem_size(params) if callable(self.problem_size) else self.problem_size
        size = [size] if isinstance(size, (str, int)) or _is_integer(size) else list(size)
        if not 1 <= len(size) <= 3:
            raise ValueError(f"problem_size has {len(size)} dimensions; give 1 to 3")
        sizes = [1, 1, 1]
        for axis, value in enumerate(size):
            sizes[axis] = _integer(value, params, "problem_size")
        divisors = [self.factors(self.grid_div[axis], params, self.block_names[axis]) for axis in range(3)]
        return _kerntune.kernel_tuner_geometry(sizes, divisors, self.block(params), self.shared_bytes(params))

    def factors(self, div, params: dict, block_name: str) -> list:
        """The factors of a grid divisor for a configuration; the block dimension's
        parameter when none is given."""
        if div is None:
            return [params.get(block_name, 1)]
        if callable(div):
            return [div(params)]
        if isinstance(div, list):
            return [factor for part in div if part is not None for factor in self.factors(part, params, block_name)]
        return [_integer(div, params, "grid divisor")]

    def shared_bytes(self, params: dict) -> int:
        if self.shared is None:
            return 0
        if callable(self.shared):
            return int(self.shared(params))
        return _integer(self.shared, params, "smem_args['size']")

    def source(self, params: dict) -> str:
        source = self.kernel_source(params) if callable(self.kernel_source) else self.kernel_source
        if not isinstance(source, str):
            raise ValueError(f"kernel_source returned {type(source).__name__}, not the source text")
        return source

    def definitions(self, params: dict, grid: Sequence[int], block: Sequence[int]) -> dict:
        if self.defines is not None:
            return dict(self.defines)
        defines = {f"grid_size_{axis}": g for axis, g in zip(_AXES, grid)}
        defines.update(zip(self.block_names, block))
        defines.update(params)
        defines["kernel_tuner"] = 1
        return defines

    def instance(self, values: Sequence[Any]):
        """``(source, name, grid, block, shared_bytes)`` of the configuration with these
        parameter values; an exception is the reason it cannot run."""
        params = dict(zip(self.param_names, values))
        grid, block, shared_bytes = self.launch(params)
        source = self.source(params)
        prefix = []
        for name, value in self.definitions(params, grid, block).items():
            if callable(value):
                value = value(params)
            elif isinstance(value, str):
                value = substitute(value, params)
            text = str(value).replace("\n", "\\\n")
            if "loop_unroll_factor" in name:
                # `#pragma unroll N` needs a constant expression; 0 means "let the compiler
                # decide", which is no pragma at all.
                if text == "0":
                    source = re.sub(r"\n\s*#pragma\s+unroll\s+" + re.escape(name) + r"\b", "\n", "\n" + source)[1:]
                else:
                    prefix.append(f"constexpr int {name} = {text};")
            else:
                prefix.append(f"#define {name} {text}")
        if prefix:
            prefix.append("#line 1")
            source = "\n".join(prefix) + "\n" + source
        name = substitute(self.kernel_name, params)
        return source, name, grid, block, shared_bytes


def _is_integer(value) -> bool:
    return isinstance(value, int) or type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.dtype.kind in "iu"


def _integer(value, params: dict, what: str) -> int:
    if isinstance(value, str):
        return int(evaluate(value, params, what))
    if _is_integer(value) or isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"{what}: {value!r} is not an integer or an expression string")


def check_size(size):
    """problem_size as given: an int, a string, a callable, or a sequence of 1 to 3 ints
    and strings."""
    if callable(size) or isinstance(size, str) or _is_integer(size):
        return size
    if isinstance(size, (list, tuple)) and 1 <= len(size) <= 3:
        for part in size:
            if not (isinstance(part, str) or _is_integer(part)):
                raise ArgumentTypeError(
                    f"problem_size: {part!r} is not an int or a string; give an int, a string, "
                    "a callable of the configuration, or a tuple of up to 3 ints and strings")
        return tuple(int(p) if _is_integer(p) else p for p in size)
    if hasattr(size, "__len__") and not isinstance(size, (list, tuple)):
        return check_size(tuple(size))
    raise ArgumentTypeError(
        f"problem_size: {size!r}; give an int, a string, a callable of the configuration, "
        "or a tuple of up to 3 ints and strings")


def check_divisor(div, what: str):
    """A grid divisor (or a size) as given: None, an int, a string, a callable, or a list of
    them whose product is meant (``[]``: no division)."""
    if div is None or callable(div) or isinstance(div, str) or _is_integer(div):
        return div
    if isinstance(div, (list, tuple)):
        return [check_divisor(part, what) for part in div]
    raise ArgumentTypeError(
        f"{what}: {div!r}; give a parameter name or expression string, an int, a callable of "
        "the configuration, or a list of them ([] for none)")


def restriction_of_threads(block_names: Sequence[str], params: Sequence[str], max_threads: int) -> Optional[str]:
    """The restriction that keeps blocks within the device's thread limit, as Kernel Tuner
    applies before the search; None when no block dimension is tuned."""
    tuned = [name for name in block_names if name in params]
    if not tuned:
        return None
    return f"{' * '.join(tuned)} <= {int(max_threads)}"


def describe(value) -> Any:
    """A JSON-able description of a convention for the results' identity."""
    if callable(value):
        return f"<callable {getattr(value, '__qualname__', type(value).__name__)}>"
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): describe(v) for k, v in value.items()}
    if _is_integer(value):
        return int(value)
    return value

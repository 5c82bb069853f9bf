"""The arguments of ``tune_kernel`` that become parts of the kernel spec, checked one by one:
the kernel's source (text, files or a callable), the restrictions, the metrics, the
``__constant__`` symbols and the compiler options. Each error names the argument, what was
given and what is accepted."""

from __future__ import annotations

import inspect
import os

from kerntune._errors import ArgumentError, ArgumentTypeError


def source_of(kernel_source):
    """The kernel's source text (or the callable that makes it) and the folders its files
    are in, for includes."""
    if callable(kernel_source):
        return kernel_source, []
    if isinstance(kernel_source, (list, tuple)) and kernel_source:
        text, _ = source_of(kernel_source[0])
        folders = [os.path.dirname(os.path.abspath(os.fspath(f))) for f in kernel_source if _is_file(f)]
        return text, sorted(set(folders))
    if isinstance(kernel_source, os.PathLike) or _is_file(kernel_source):
        path = os.fspath(kernel_source)
        if not os.path.isfile(path):
            raise ArgumentError(f"kernel_source: no file {path}")
        with open(path) as f:
            return f.read(), [os.path.dirname(os.path.abspath(path))]
    if isinstance(kernel_source, str):
        if _looks_like_a_file_name(kernel_source):
            raise ArgumentError(f"kernel_source: no file {kernel_source} (give the source text or an existing file)")
        return kernel_source, []
    raise ArgumentTypeError("kernel_source: give the source text, a file name, a list of files (the kernel's first) "
                            "or a callable of the configuration that returns the source")


def _is_file(name) -> bool:
    return isinstance(name, (str, os.PathLike)) and len(os.fspath(name)) < 4096 and os.path.isfile(os.fspath(name))


def _looks_like_a_file_name(text: str) -> bool:
    return len(text) < 256 and "\n" not in text and not any(c in text for c in "(){};") and \
        os.path.splitext(text)[1] in (".cu", ".cuh", ".c", ".cpp", ".h", ".hpp")


def callable_text(source) -> str:
    try:
        return inspect.getsource(source)
    except (OSError, TypeError):
        return getattr(source, "__qualname__", repr(source))


def restrictions_of(restrictions) -> list:
    if restrictions is None:
        return []
    if isinstance(restrictions, str):
        return [restrictions]
    if callable(restrictions):
        raise ArgumentTypeError("restrictions: functions are not supported; write each restriction as a Python "
                                "expression string, e.g. ['block_size_x * block_size_y <= 1024']")
    if isinstance(restrictions, (list, tuple)) and all(isinstance(r, str) for r in restrictions):
        return list(restrictions)
    raise ArgumentTypeError("restrictions: give a list of Python expression strings over the parameters")


def metrics_of(metrics) -> dict:
    if metrics is None:
        return {}
    if not isinstance(metrics, dict):
        raise ArgumentTypeError("metrics: give a dict of name -> expression string or function of the result")
    for name, metric in metrics.items():
        if not (callable(metric) or isinstance(metric, str)):
            raise ArgumentTypeError(f"metrics['{name}']: give an expression string or a function of the result")
    return dict(metrics)


def constants(cmem_args) -> list:
    import numpy as np

    if cmem_args is None:
        return []
    if not isinstance(cmem_args, dict):
        raise ArgumentTypeError("cmem_args: give a dict of __constant__ symbol name -> numpy array")
    constants = []
    for name, value in cmem_args.items():
        if not isinstance(name, str) or not (isinstance(value, (np.ndarray, np.generic))):
            raise ArgumentTypeError(f"cmem_args['{name}']: give a numpy array (or numpy scalar) for each symbol name")
        constants.append((name, np.ascontiguousarray(value).tobytes()))
    return constants


def options(compiler_options) -> list:
    if compiler_options is None:
        return []
    if isinstance(compiler_options, str) or not all(isinstance(o, str) for o in compiler_options):
        raise ArgumentTypeError("compiler_options: give a list of strings, e.g. ['-use_fast_math']")
    return list(compiler_options)


def names_in(expression: str) -> set:
    import re

    # A name starts after neither a letter, digit nor dot: the "e9" of 1e9 is no name.
    return set(re.findall(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]*", expression))

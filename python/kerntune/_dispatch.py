"""Tables of the configurations a decorated kernel tuned, keyed by its ``key=`` values, the
nearest tuned key to one that was not tuned, and the files a table exports as.

A serving engine calls a kernel at sizes it cannot list ahead, and tuning on the request
path costs a user seconds. ``@kerntune.autotune(..., table=FILE, new_keys="nearest")``
launches a key it has not tuned with the configuration of the nearest key in the table (or
tuned since), and tunes nothing on the request path; the table is what
``kernel.save_table(FILE)`` wrote after tuning the sizes that matter (offline, or in a
warm-up). ``kerntune.export_table`` writes a table as vLLM's fused-MoE config file or a
C/C++ header. The table's format, the nearest rule and the exports are kerntune's Rust
ones (``kerntune table export`` uses them too); this module turns Python's keys (tuples)
into their JSON and back.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional

from kerntune._errors import ArgumentError, ArgumentTypeError
from kerntune._kerntune import SpecError, table_export, table_nearest, table_read, table_text


def _as_tuple(part: Any) -> Any:
    """A key part read back from JSON: lists as the tuples the key was made of."""
    return tuple(_as_tuple(p) for p in part) if isinstance(part, list) else part


def _json(value: Any) -> str:
    """A key, keys or a table as JSON: tuples as lists, other objects by their repr (so
    they stand for themselves only)."""
    return json.dumps(value, default=repr)


def _document(kernel: str, key_names: list, best: Mapping[tuple, Mapping[str, Any]]) -> str:
    entries = [{"key": list(key), "config": dict(config)} for key, config in best.items()]
    return _json({"kernel": kernel, "key": list(key_names), "entries": entries})


def _origin(path) -> str:
    return f"table = {os.fspath(path)!r}"


def write(path, kernel: str, key_names: list, best: Mapping[tuple, Mapping[str, Any]]) -> None:
    """Writes ``best`` (key: launch options) as the table of ``kernel`` keyed by ``key_names``."""
    with open(path, "w") as f:
        f.write(table_text(_document(kernel, key_names, best)))


def _read(path, kernel: Optional[str] = None, key_names: Optional[list] = None) -> dict:
    try:
        return json.loads(table_read(os.fspath(path), _origin(path), kernel, key_names))
    except SpecError as error:
        raise ArgumentError(str(error)) from None


def read(path, kernel: Optional[str] = None, key_names: Optional[list] = None) -> dict:
    """The table at ``path`` (key: launch options), refused in one line when it is not a
    table, or not one of ``kernel`` keyed by ``key_names`` where those are given."""
    table = _read(path, kernel, None if key_names is None else list(key_names))
    return {_as_tuple(entry["key"]): dict(entry["config"]) for entry in table["entries"]}


def nearest(key: tuple, tuned: list) -> Optional[tuple]:
    """The tuned key nearest ``key``, or None when none can stand for it: every part that
    is not a number the same, the numbers close on a log2 scale, ties to the smaller key."""
    index = table_nearest(_json(key), _json(tuned))
    return None if index is None else tuned[index]


def export_table(table, path, format: str = "vllm-moe", **options: Any) -> str:
    """Writes a dispatch table as another program's file and returns the path written.

    ``table`` is a table file (``kernel.save_table()`` or a many-shape run wrote it), a
    many-shape run's results (``kerntune.tune(..., shapes=...)``) or a
    ``@kerntune.autotune`` kernel (the keys it tuned or read). ``path`` is the file, or a
    folder where the file takes its format's name (vLLM finds its file by name).

    - ``format="vllm-moe"``: vLLM's fused-MoE config file, for a table keyed by the batch
      size alone: ``experts=`` (E) and ``intermediate=`` (N, one GPU's intermediate size
      after silu_and_mul), ``device_name=`` (default: this machine's GPU, as torch names
      it), ``dtype=`` ("fp8_w8a8", ...; none for fp16 and bf16), ``block_shape=[bn, bk]``,
      ``triton_version=`` (default: the installed Triton's);
    - ``format="c-header"``: a C/C++ header with a struct of the configuration's integer
      fields and a lookup function returning the nearest tuned entry.
    """
    if not isinstance(format, str):
        raise ArgumentTypeError(f"format: give a format's name (a string), not {format!r}")
    if hasattr(table, "dispatch_table"):
        kernel, key_names, best = table.dispatch_table()
        document, origin = _document(kernel, key_names, best), f"table of {kernel}"
    elif isinstance(table, (str, os.PathLike)):
        document, origin = json.dumps(_read(table)), _origin(table)
    else:
        raise ArgumentTypeError(f"table: give a table file, a many-shape run's results or a @kerntune.autotune kernel, "
                                f"not {type(table).__name__}")
    if format == "vllm-moe":
        options.setdefault("triton_version", _triton_version())
        if "device_name" not in options and (name := _device_name()) is not None:
            options["device_name"] = name
    try:
        written, _ = table_export(document, origin, _json({"format": format, **options}), os.fspath(path))
    except SpecError as error:
        raise ArgumentError(str(error)) from None
    return written


def _triton_version() -> Optional[str]:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def _device_name() -> Optional[str]:
    """This machine's GPU as torch names it (NVML's name), or None without one."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None

"""Kernel Tuner's cache file (``cache=``): read before tuning, so that its entries count as
measured, and written after by kerntune's Rust writer (the one ``kerntune export --format
kernel-tuner`` uses), in the layout Kernel Tuner itself appends to.

An entry is keyed by the configuration's values joined with commas (Python's ``str`` of
each, in ``tune_params`` order) and holds the parameters, the objective (a number, or the
name of the failure), ``times`` and the costs in milliseconds.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Sequence

from kerntune import _kerntune
from kerntune._errors import ArgumentError
from kerntune.util import NpEncoder


def cache_path(cache) -> str:
    path = os.fspath(cache)
    return path if path.endswith(".json") else path + ".json"


def read(path: str) -> Optional[dict]:
    """The cache document at ``path``, or None when there is none; a file Kernel Tuner left
    open for appending reads as if closed (the rule is Rust's, which ``kerntune simulate``
    and ``kerntune import`` follow too)."""
    try:
        text = _kerntune.kernel_tuner_document(path)
    except _kerntune.StoreError as error:
        raise ArgumentError(f"cache: {error}") from None
    return None if text is None else json.loads(text)


def check(document: dict, path: str, kernel_name: str, keys: list, problem_size, device_name: Optional[str]):
    """Refuses a cache of another kernel, device, problem or parameter list, as Kernel
    Tuner does."""
    def refuse(what, cached, given):
        raise ArgumentError(f"cache: {path} holds results for {what} {cached!r}, not {given!r}; use another file")

    if document.get("kernel_name") != kernel_name:
        refuse("kernel", document.get("kernel_name"), kernel_name)
    if device_name is not None and document.get("device_name") != device_name:
        refuse("device", document.get("device_name"), device_name)
    if document.get("tune_params_keys") != keys:
        refuse("parameters", document.get("tune_params_keys"), keys)
    cached = document.get("problem_size")
    if "problem_size" in document and problem_size != "callable" and _listed(cached) != _listed(problem_size):
        refuse("problem_size", cached, problem_size)


def _listed(size) -> list:
    return list(size) if isinstance(size, (list, tuple)) else [size]


def key_of(config: dict, keys: list) -> str:
    return _kerntune.kernel_tuner_key(list(keys), json.dumps({k: config[k] for k in keys}, cls=NpEncoder))


def write(path: str, document: dict, results: Sequence[dict]):
    """Writes the cache ``document`` (its header, and under ``"cache"`` the entries it
    already holds) with ``results`` (rows as ``tune_kernel`` returns them) in place of the
    entries of their configurations."""
    text = _kerntune.kernel_tuner_cache(json.dumps(document, cls=NpEncoder), json.dumps(list(results), cls=NpEncoder))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)

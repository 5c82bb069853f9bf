"""Helpers Kernel Tuner scripts import from ``kernel_tuner.util``, for results of
``kerntune.tune_kernel``.

A configuration that failed holds, in place of its objective, the name of the failure as
a string of one of the classes below (``str(row["time"]) == "CompilationFailedConfig"``),
as in Kernel Tuner.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

__all__ = [
    "CompilationFailedConfig",
    "ErrorConfig",
    "InvalidConfig",
    "NpEncoder",
    "RuntimeFailedConfig",
    "get_best_config",
    "get_config_string",
]


class ErrorConfig(str):
    """The objective of a configuration that produced no measurement."""

    def __new__(cls):
        return super().__new__(cls, cls.__name__)

    def __repr__(self):
        return type(self).__name__


class InvalidConfig(ErrorConfig):
    """The device cannot run it (too many threads, too much shared memory...)."""


class CompilationFailedConfig(ErrorConfig):
    """It did not compile."""


class RuntimeFailedConfig(ErrorConfig):
    """It compiled but failed to run, hung, or computed a wrong answer."""


def error_of(status: str) -> ErrorConfig:
    """The failure marker of a kerntune status."""
    if status == "compile_failed":
        return CompilationFailedConfig()
    if status == "invalid_config":
        return InvalidConfig()
    return RuntimeFailedConfig()


def get_config_string(params: dict, keys: Optional[Sequence[str]] = None, units: Optional[dict] = None) -> str:
    """``name=value`` pairs of a result (only ``keys`` when given), floats with 3 decimals,
    each followed by its unit from ``units`` where there is one."""
    shown = []
    for name, value in params.items():
        if keys and name not in keys:
            continue
        text = f"{value:.3f}" if isinstance(value, float) else str(value)
        unit = units.get(name, "") if isinstance(units, dict) and not isinstance(value, ErrorConfig) else ""
        shown.append(f"{name}={text}{unit}")
    return ", ".join(shown)


def get_best_config(results: Sequence[dict], objective: str = "time", objective_higher_is_better: bool = False) -> Optional[dict]:
    """The result with the best valid objective, or None when none is valid. A result marked
    ``early_stopped`` (timed fewer times than asked, clearly slower than the best then) is
    never the best."""
    valid = [r for r in results if _is_number(r.get(objective)) and not r.get("early_stopped")]
    if not valid:
        return None
    pick = max if objective_higher_is_better else min
    return pick(valid, key=lambda r: r[objective])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


class NpEncoder(json.JSONEncoder):
    """A JSON encoder that writes numpy scalars and arrays as numbers and lists."""

    def default(self, o):
        if hasattr(o, "tolist"):
            return o.tolist()
        return super().default(o)

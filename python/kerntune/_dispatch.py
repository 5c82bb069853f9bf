"""Tables of the configurations a decorated kernel tuned, keyed by its ``key=`` values, and
the nearest tuned key to one that was not tuned.

A serving engine calls a kernel at sizes it cannot list ahead, and tuning on the request
path costs a user seconds. ``@kerntune.autotune(..., table=FILE, new_keys="nearest")``
launches a key it has not tuned with the configuration of the nearest key in the table (or
tuned since), and tunes nothing on the request path; the table is what
``kernel.save_table(FILE)`` wrote after tuning the sizes that matter (offline, or in a
warm-up). Keys are near when every part that is not a number is the same (dtypes, flags)
and the numbers are close on a log scale (batch 48 is nearer 32 than 128), ties going to
the smaller key.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Mapping, Optional

from kerntune._errors import ArgumentError

#: What a table file says it is.
FORMAT = "kerntune dispatch table"


def _as_tuple(part: Any) -> Any:
    """A key part read back from JSON: lists as the tuples the key was made of."""
    return tuple(_as_tuple(p) for p in part) if isinstance(part, list) else part


def write(path, kernel: str, key_names: list, best: Mapping[tuple, Mapping[str, Any]]) -> None:
    """Writes ``best`` (key: launch options) as the table of ``kernel`` keyed by ``key_names``."""
    entries = [{"key": list(key), "config": dict(config)} for key, config in best.items()]
    with open(path, "w") as f:
        json.dump({"format": FORMAT, "kernel": kernel, "key": list(key_names), "entries": entries}, f, indent=1)
        f.write("\n")


def read(path, kernel: str, key_names: list) -> dict:
    """The table at ``path`` (key: launch options), refused in one line when it is not a
    table of ``kernel`` keyed by ``key_names``."""
    try:
        with open(path) as f:
            document = json.load(f)
    except (OSError, ValueError) as error:
        raise ArgumentError(f"table = {str(path)!r}: {error}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ArgumentError(f"table = {str(path)!r}: not a table kernel.save_table() wrote")
    if document.get("kernel") != kernel or document.get("key") != list(key_names):
        raise ArgumentError(f"table = {str(path)!r} holds {document.get('kernel')} keyed by {document.get('key')}, "
                            f"not {kernel} keyed by {list(key_names)}")
    return {_as_tuple(entry["key"]): dict(entry["config"]) for entry in document.get("entries", [])}


def _distance(a: Any, b: Any) -> Optional[float]:
    """How far two key parts are: numbers on a log scale, sequences part by part; None
    when they cannot stand for one another (a part that is not a number differs)."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return abs(math.log2(max(a, 1)) - math.log2(max(b, 1)))
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        parts = [_distance(x, y) for x, y in zip(a, b)]
        return None if None in parts else sum(parts)
    return 0.0 if a == b else None


def nearest(key: tuple, tuned: Iterable[tuple]) -> Optional[tuple]:
    """The tuned key nearest ``key``, or None when none can stand for it."""
    ranked = [(distance, other) for other in tuned if (distance := _distance(key, other)) is not None]
    if not ranked:
        return None
    return min(ranked, key=lambda pair: (pair[0], _numbers(pair[1])))[1]


def _numbers(key: Any) -> tuple:
    """The numbers of a key in order, for ties: the smaller key wins."""
    if isinstance(key, tuple):
        return tuple(n for part in key for n in _numbers(part))
    return (key,) if isinstance(key, (int, float)) and not isinstance(key, bool) else ()

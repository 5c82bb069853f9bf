"""Many-shape runs: one kernel tuned at several problem sizes, ``kerntune.tune(...,
shapes=[...])``. Each size is one tuning in the store; each learns from the size tuned
nearest to it (its best configuration is measured first, and every outcome there guides
the search). Which size lists are accepted, what a size learns from and the report per size
are the run facade's (``kerntune_run::shapes``); this module loops over the sizes, since
making each size's arguments is the caller's.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence

from kerntune import _dispatch, _kerntune
from kerntune._errors import ArgumentError, ArgumentTypeError
from kerntune._results import TuneResult


#: ``tune``'s arguments that each size of a many-shape run gives its own.
PER_SIZE = ("kernel", "args", "shapes", "share", "answer", "edge_args")


class OneShape(NamedTuple):
    """What ``tune`` passes itself for one size of a many-shape run: the size, and what it
    learns from (``kerntune_run::Transfer``)."""

    transfer: dict

    @property
    def label(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self.transfer["shape"].items())


def check(shapes: Any, args: Any, what: str = "args") -> list:
    """The sizes as a list of dicts, refused in one line when they cannot make a run, or
    when ``args`` is not a function that takes their variables."""
    if isinstance(shapes, (str, bytes)) or not isinstance(shapes, Sequence):
        raise ArgumentTypeError(f"shapes: give a list of dicts of the variables that differ, e.g. "
                                f"[{{'M': 16}}, {{'M': 64}}], not {type(shapes).__name__}")
    sizes = []
    for shape in shapes:
        if not isinstance(shape, Mapping):
            raise ArgumentTypeError(f"shapes: each size is a dict of its variables ({{'M': 64}}), not {shape!r}")
        sizes.append(dict(shape))
    try:
        text = json.dumps(sizes)
    except TypeError as error:
        raise ArgumentTypeError(f"shapes: a size's values are numbers or strings ({error})") from None
    refusal = _kerntune.shapes_refusal(text)
    if refusal is not None:
        raise ArgumentError(refusal)
    if not callable(args):
        raise ArgumentTypeError(f"with shapes=, {what} is a function of a size's variables that returns that size's "
                                f"arguments ({what}=lambda M: {{...}}), not {type(args).__name__}")
    try:
        inspect.signature(args).bind(**sizes[0])
    except TypeError as error:
        names = ", ".join(sizes[0])
        raise ArgumentError(f"shapes name {names}, which {what}{_signature(args)} does not take ({error}): "
                            f"name the sizes' variables as {what}'s parameters") from None
    except ValueError:
        pass  # a builtin without a signature: its call says what it takes
    return sizes


def _signature(function: Callable) -> str:
    try:
        return str(inspect.signature(function))
    except (TypeError, ValueError):
        return "(...)"


def run(tune: Callable, args: Callable, shapes: list, share: bool, label: str, size_options: Callable) -> "ShapeResults":
    """Tunes every size in order with ``tune`` (``kerntune.tune`` with the caller's other
    settings), ``args(**shape)`` making each size's arguments and ``size_options(shape)``
    its keyword arguments that depend on the size (``answer``, ``edge_args``)."""
    results = ShapeResults(label, list(shapes[0]))
    for shape in shapes:
        transfer = {"shape": shape, "tuned": results._tuned(), "independent": not share}
        result = tune(args(**shape), OneShape(transfer), **size_options(shape))
        results._add(shape, result)
    return results


class ShapeResults(Mapping):
    """What a many-shape run found: a ``TuneResult`` per size, by the size's values in order
    (``results[(64,)]``, or ``results[64]`` for one variable). ``summary()`` is the report, a
    line per size (evaluations, those measured now, seconds, best, the evaluation at which
    the winner was first measured and the size it learned from, the configuration);
    ``table`` the best configuration per size; ``save_table(path)`` writes it as a
    dispatch table (``@kerntune.autotune(..., table=path)``)."""

    def __init__(self, kernel: str, names: list):
        self.kernel = kernel
        #: The variables that differ between the sizes, in order.
        self.names = names
        self._results: dict = {}
        self._shapes: list = []

    def _key(self, shape: Mapping) -> tuple:
        return tuple(shape[name] for name in self.names)

    def _add(self, shape: dict, result: TuneResult) -> None:
        self._shapes.append(shape)
        self._results[self._key(shape)] = result

    def _tuned(self) -> list:
        return [{"shape": shape, "tuning": self._results[self._key(shape)].tuning} for shape in self._shapes
                if self._results[self._key(shape)].tuning is not None]

    def __getitem__(self, key) -> TuneResult:
        return self._results[key if isinstance(key, tuple) else (key,)]

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    @property
    def rows(self) -> list:
        """Each size's line of the report, as the run facade gives it."""
        return [result.shape for result in self._results.values() if result.shape is not None]

    @property
    def table(self) -> dict:
        """The best configuration of each size, by its key."""
        return {key: result.best_config for key, result in self._results.items() if result.best_config is not None}

    def summary(self) -> str:
        objective = next(iter(self._results.values())).objective if self._results else "time"
        return _kerntune.shapes_table(json.dumps(self.rows), objective)

    def save_table(self, path) -> str:
        """Writes the best configuration of every size, keyed by the sizes' variables, as a
        dispatch table; returns the path."""
        _dispatch.write(path, self.kernel, self.names, self.table)
        return str(path)

    def __repr__(self) -> str:
        return f"ShapeResults({self.kernel}, {len(self)} sizes)\n{self.summary()}"


def size_options(answer: Optional[Any], edge_args: Optional[Any]) -> Callable[[dict], dict]:
    """The keyword arguments of one size that depend on it: ``answer`` and ``edge_args``,
    each a function of the size's variables (or None)."""
    for name, value in (("answer", answer), ("edge_args", edge_args)):
        if value is not None and not callable(value):
            raise ArgumentTypeError(f"with shapes=, {name} is a function of a size's variables that returns that "
                                    f"size's {name} ({name}=lambda M: ...), or None")

    def options(shape: dict) -> dict:
        return {"answer": None if answer is None else answer(**shape),
                "edge_args": None if edge_args is None else edge_args(**shape)}

    return options

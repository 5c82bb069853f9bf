"""Many-shape runs: one kernel tuned at several problem sizes, ``kerntune.tune(...,
shapes=[...])``. Each size is one tuning in the store; each learns from the size tuned
nearest to it (its best configuration is measured first, and every outcome there guides
the search). Which size lists are accepted, what a size learns from and the report per size
are the run facade's (``kerntune_run::shapes``); this module loops over the sizes, since
making each size's arguments is the caller's, on one set of workers (``kerntune._crew``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence

from kerntune import _crew, _dispatch, _kerntune
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
        return _kerntune.shape_label(json.dumps(self.transfer["shape"]))


def check(shapes: Any, makers: Mapping[str, Any], example: str = "args=lambda M: {...}") -> list:
    """The sizes as a list of dicts, refused in one line when they cannot make a run, when
    no value of ``makers`` (the front's arguments that may depend on the size, by name) is a
    function, or when one that is does not take the sizes' variables."""
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
    functions = {name: value for name, value in makers.items() if callable(value)}
    if not functions:
        names = " or ".join(makers)
        raise ArgumentTypeError(f"with shapes=, {names} is a function of a size's variables that returns that size's "
                                f"value ({example}), not {type(next(iter(makers.values()))).__name__}")
    for name, function in functions.items():
        try:
            inspect.signature(function).bind(**sizes[0])
        except TypeError as error:
            variables = ", ".join(sizes[0])
            raise ArgumentError(f"shapes name {variables}, which {name}{_signature(function)} does not take ({error}): "
                                f"name the sizes' variables as {name}'s parameters") from None
        except ValueError:
            pass  # a builtin without a signature: its call says what it takes
    return sizes


def _signature(function: Callable) -> str:
    try:
        return str(inspect.signature(function))
    except (TypeError, ValueError):
        return "(...)"


class Found(NamedTuple):
    """What a front's run at one size gives a many-shape run: the size's line of the report
    (``kerntune_run::ShapeRow``), its best configuration and its tuning in the store."""

    row: Optional[dict]
    best: Optional[dict]
    tuning: Optional[int]


def found_by_tune(result: TuneResult) -> Found:
    return Found(result.shape, result.best_config, result.tuning)


def run(tune: Callable, args: Callable, shapes: list, share: bool, label: str, size_options: Callable,
        found: Callable[[Any], Found] = found_by_tune) -> "ShapeResults":
    """Tunes every size in order with ``tune`` (the front's call with the caller's other
    settings), ``args(**shape)`` making each size's arguments and ``size_options(shape)``
    its keyword arguments that depend on the size (``answer``, ``edge_args``); ``found``
    reads the front's result."""
    results = ShapeResults(label, list(shapes[0]))
    # The sizes are tuned one after another on the same workers.
    with _crew.kept():
        for shape in shapes:
            transfer = {"shape": shape, "tuned": results._tuned(), "independent": not share}
            result = tune(args(**shape), OneShape(transfer), **size_options(shape))
            results._add(shape, result, found(result))
    return results


class ShapeResults(Mapping):
    """What a many-shape run found: the front's result per size, by the size's values in
    order (``results[(64,)]``, or ``results[64]`` for one variable): a ``TuneResult`` from
    ``kerntune.tune``, ``(results, env)`` from ``tune_kernel``. ``summary()`` is the report,
    a line per size (evaluations, those measured now, seconds, best, the evaluation at which
    the winner was first measured and the size it learned from, the configuration);
    ``table`` the best configuration per size; ``save_table(path)`` writes it as a
    dispatch table (``@kerntune.autotune(..., table=path)``)."""

    def __init__(self, kernel: str, names: list, objective: str = "time"):
        self.kernel = kernel
        #: The variables that differ between the sizes, in order.
        self.names = names
        self.objective = objective
        self._results: dict = {}
        self._found: dict = {}

    def _key(self, shape: Mapping) -> tuple:
        return tuple(shape[name] for name in self.names)

    def _add(self, shape: dict, result: Any, found: Found) -> None:
        key = self._key(shape)
        self._results[key], self._found[key] = result, (shape, found)
        if isinstance(result, TuneResult):
            self.objective = result.objective

    def _tuned(self) -> list:
        return [{"shape": shape, "tuning": found.tuning} for shape, found in self._found.values()
                if found.tuning is not None]

    def __getitem__(self, key):
        return self._results[key if isinstance(key, tuple) else (key,)]

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    @property
    def rows(self) -> list:
        """Each size's line of the report, as the run facade gives it."""
        return [found.row for _, found in self._found.values() if found.row is not None]

    @property
    def table(self) -> dict:
        """The best configuration of each size, by its key."""
        return {key: found.best for key, (_, found) in self._found.items() if found.best is not None}

    def summary(self) -> str:
        return _kerntune.shapes_table(json.dumps(self.rows), self.objective)

    def dispatch_table(self) -> tuple:
        """The table of the run: the kernel's name, the sizes' variables, and the best
        configuration of each size by its key."""
        return self.kernel, self.names, self.table

    def save_table(self, path) -> str:
        """Writes the best configuration of every size, keyed by the sizes' variables, as a
        dispatch table; returns the path."""
        _dispatch.write(path, *self.dispatch_table())
        return str(path)

    def __repr__(self) -> str:
        return f"ShapeResults({self.kernel}, {len(self)} sizes)\n{self.summary()}"


def of_size(value: Any, shape: Mapping) -> bool:
    """Whether ``value`` is a function of a size's variables: callable with them by name (a
    grid of the launch's META takes one argument, ``META``, by position)."""
    if not callable(value):
        return False
    try:
        inspect.signature(value).bind(**shape)
    except (TypeError, ValueError):
        return False
    return True


def size_options(answer: Optional[Any], edge_args: Optional[Any], grid: Optional[Callable] = None
                 ) -> Callable[[dict], dict]:
    """The keyword arguments of one size that depend on it: ``answer`` and ``edge_args``,
    each a function of the size's variables (or None), and ``grid`` where it is one."""
    for name, value in (("answer", answer), ("edge_args", edge_args)):
        if value is not None and not callable(value):
            raise ArgumentTypeError(f"with shapes=, {name} is a function of a size's variables that returns that "
                                    f"size's {name} ({name}=lambda M: ...), or None")

    def options(shape: dict) -> dict:
        given = {"answer": None if answer is None else answer(**shape),
                 "edge_args": None if edge_args is None else edge_args(**shape)}
        return given if grid is None else {**given, "grid": grid(**shape)}

    return options

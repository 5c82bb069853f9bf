"""``@kerntune.autotune``: a drop-in for ``@triton.autotune``.

    @kerntune.autotune(configs=[triton.Config({"BLOCK_M": 64}, num_warps=4), ...], key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, ..., BLOCK_M: tl.constexpr): ...

    matmul_kernel[grid](a, b, c, M, N, K, ...)   # the call site does not change

It takes every argument of ``triton.autotune`` (Triton 3.6), and ``params=`` (a product of
values with ``restrictions=``) in place of ``configs=``. The first call for a new key tunes
with kerntune (compiles in parallel on every core, checks and times each configuration in a
crash-isolated worker, keeps every result in the store); every call then launches the best
configuration through Triton. A new process finds the stored answer and does not tune
again. The processes of one job launch one answer per key: under ``torch.distributed``
rank 0 tunes and sends its answer (or its failure) to every rank; processes sharing a store
take turns, the first tuning and the others reading its answer (see ``kerntune._ranks``). ``KERNTUNE_RETUNE=1`` forces tuning again; ``KERNTUNE_NO_TUNE=1`` skips tuning and
launches the first valid configuration.

What each of Triton's arguments means here is listed in docs/triton.md.
"""

from __future__ import annotations

import inspect
import os
import warnings
from typing import Any, Callable, Mapping, Optional, Sequence

from kerntune import _dispatch, _shapes
from kerntune._errors import ArgumentError, ArgumentTypeError, KeyNameWarning
from kerntune._ranks import agree, lock_folder
from kerntune._request import DEFAULTS
from kerntune._space import CONTROL_NAMES, as_config, launch_options, names_of, space_of
from kerntune._arguments import jit_function, kernel_defaults
from kerntune._hooks import Hooks
from kerntune._job import _first_valid_config
from kerntune._tune import tune

_TUNE_OPTIONS = (
    "answer", "atol", "rtol", "target", "strategy_options", "objective", "objective_higher_is_better", "timing",
    "seed", "compile_workers", "device", "devices", "ray", "ray_gpus", "progress", "finalists", "schedule", "schedule_options",
    "verify_sets",
)


class Autotuner:
    """What ``@kerntune.autotune`` returns: launch it as the kernel (``kernel[grid](...)``);
    ``best_config``, ``configs``, ``cache``, ``fn`` and ``run`` are there as in Triton's."""

    def __init__(self, fn, configs, params, key, prune_configs_by, reset_to_zero, restore_value,
                 pre_hook, post_hook, restrictions, search, table=None, new_keys="tune"):
        self.fn = fn
        self.jit = jit_function(fn)
        self.arg_names = self.jit.arg_names
        self.keys = names_of(key, "key")
        missing = [k for k in self.keys if k not in self.arg_names]
        if missing:
            # Triton's autotuner ignores such a name (tutorial 08 as published has one, a
            # typo); so does kerntune, but it says so.
            warnings.warn(f"key names {missing}, which are not arguments of {self.jit.__name__} "
                          f"({', '.join(self.arg_names)}): ignored, as Triton ignores them", KeyNameWarning, stacklevel=3)
            self.keys = [k for k in self.keys if k in self.arg_names]
        self.table, self.listed = space_of(params, configs, kernel_defaults(self.jit))
        self.restrictions = names_of(restrictions, "restrictions")
        self.reset_to_zero = names_of(reset_to_zero, "reset_to_zero")
        self.restore_value = names_of(restore_value, "restore_value")
        for argument, names in (("reset_to_zero", self.reset_to_zero), ("restore_value", self.restore_value)):
            unknown = [n for n in names if n not in self.arg_names]
            if unknown:
                raise ArgumentError(f"{argument} names {unknown}, which are not arguments of {self.jit.__name__}")
        prune = dict(prune_configs_by or {})
        unknown = set(prune) - {"perf_model", "top_k", "early_config_prune"}
        if unknown:
            raise ArgumentError(f"prune_configs_by takes perf_model, top_k and early_config_prune, not {', '.join(sorted(unknown))}")
        self.perf_model = prune.get("perf_model")
        self.top_k = prune.get("top_k", 1.0)
        self.early_config_prune = prune.get("early_config_prune")
        self.hooks = Hooks.of(self.listed, pre_hook, post_hook)
        # The search's settings, as attributes a caller may change before the first call.
        self.strategy = search.pop("strategy")
        self.max_fevals = search.pop("max_fevals")
        self.time_limit = search.pop("time_limit")
        self.db = search.pop("db")
        self.tune_options = search
        #: The best configuration of each key seen, as a ``triton.Config``.
        self.cache: dict[tuple, Any] = {}
        self._best: dict[tuple, dict] = {}
        #: The store's tuning of each key tuned in this process, which later keys learn from.
        self._tunings: dict[tuple, int] = {}
        #: The configuration of the last launch.
        self.best_config = None
        #: The last tuning's result (a ``kerntune.TuneResult``), with every evaluation.
        self.result = None
        self.signature = inspect.signature(self.jit.fn)
        if new_keys not in ("tune", "nearest"):
            raise ArgumentError(f"new_keys = {new_keys!r}: \"tune\" (tune a key on its first call, as Triton does) or "
                                f"\"nearest\" (launch the nearest tuned key's configuration)")
        #: What a call with a key not tuned yet does: ``"tune"`` or ``"nearest"``.
        self.new_keys = new_keys
        if table is not None:
            for known, config in _dispatch.read(table, self.jit.__name__, self.keys).items():
                self._best[known], self.cache[known] = config, as_config(config)

    def dispatch_table(self) -> tuple:
        """The table of every key tuned (or read from a table) so far: the kernel's name,
        the key's names, and each key's configuration."""
        return self.jit.__name__, self.keys, self._best

    def save_table(self, path) -> str:
        """Writes the configuration of every key tuned (or read from a table) so far, for
        ``@kerntune.autotune(..., table=path, new_keys="nearest")``; returns the path."""
        _dispatch.write(path, *self.dispatch_table())
        return str(path)

    @property
    def configs(self) -> list:
        """The search space as ``triton.Config`` objects (the first 10,000 of a params space)."""
        rows = self.listed.rows if self.listed is not None else _first_valid_config(self.table, self.restrictions, 10_000)
        return [as_config(row) for row in rows]

    def _key(self, call: Mapping[str, Any]) -> tuple:
        """Triton's key: the key arguments' values (tensors by dtype and shape), then the
        dtype of every tensor argument."""
        def part(value):
            if hasattr(value, "dtype") and hasattr(value, "shape"):
                return (str(value.dtype), tuple(value.shape))
            return value

        key = [part(call.get(k)) for k in self.keys]
        key += [str(v.dtype) for v in call.values() if hasattr(v, "dtype")]
        return tuple(key)

    def prune_configs(self, call: Mapping[str, Any], keywords: Optional[Mapping[str, Any]] = None) -> list[dict]:
        """The listed configurations after ``early_config_prune`` and ``perf_model``/``top_k``,
        as Triton prunes them: ``early_config_prune(configs, nargs, **kwargs)`` with the
        positional arguments by name and the launch's keyword arguments (``keywords``, with
        ``grid`` and ``warmup`` as Triton passes them; default: none, every argument in
        ``call`` being positional)."""
        rows = list(self.listed.rows)
        if keywords is None:
            nargs, keywords = dict(call), {}
        else:
            nargs = {name: value for name, value in call.items() if name not in keywords}
        if self.early_config_prune is not None:
            configs = [as_config(row) for row in rows]
            by_config = {id(c): row for c, row in zip(configs, rows)}
            kept = self.early_config_prune(configs, nargs, **keywords)
            if not kept:
                raise ArgumentError("early_config_prune returned no configuration; it must keep at least one")
            rows = [by_config[id(c)] if id(c) in by_config else _row_of(c) for c in kept]
        if self.perf_model is not None:
            top_k = self.top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(rows) * top_k))
            if not isinstance(top_k, int):
                raise ArgumentTypeError("prune_configs_by['top_k'] must be an int or a float <= 1.0")
            if len(rows) > top_k:
                estimate = {i: self.perf_model(**call, **as_config(row).all_kwargs()) for i, row in enumerate(rows)}
                rows = [rows[i] for i in sorted(estimate, key=estimate.get)[:top_k]]
        return rows

    def _config(self, key: tuple, call, grid, keywords=None, new_keys=None) -> dict:
        if key in self._best:
            return self._best[key]
        if (new_keys or self.new_keys) == "nearest":
            near = _dispatch.nearest(key, list(self._best))
            if near is None:
                raise ArgumentError(
                    f"{self.jit.__name__}: no tuned key can stand for key {key} (new_keys=\"nearest\" tunes nothing): "
                    f"give table= a table with a key of its kind (kernel.save_table() writes one), or new_keys=\"tune\"")
            self._best[key], self.cache[key] = self._best[near], self.cache[near]
            return self._best[key]
        if os.environ.get("KERNTUNE_NO_TUNE") == "1":
            rows = self.listed.rows if self.listed is not None else _first_valid_config(self.table, self.restrictions, 1)
            config = rows[0]
        else:
            space = {"params": self.table} if self.listed is None else {"configs": self.prune_configs(call, keywords)}

            def tune_once():
                tuned = [{"shape": self._shape(k), "tuning": t} for k, t in self._tunings.items()]
                size = _shapes.OneShape({"shape": self._shape(key), "tuned": tuned, "independent": False})
                result = tune(
                    self.jit, call, grid, shapes=size, restrictions=self.restrictions,
                    strategy=os.environ.get("KERNTUNE_STRATEGY", self.strategy), max_fevals=self.max_fevals,
                    time_limit=self.time_limit, db=self.db, restore_value=self.restore_value,
                    reset_to_zero=self.reset_to_zero, hooks=self.hooks, fresh=os.environ.get("KERNTUNE_RETUNE") == "1",
                    **space, **self.tune_options,
                )
                self.result = result  # tune raised NoValidConfigError if it found nothing
                if result.tuning is not None:
                    self._tunings[key] = result.tuning
                return result.best_config

            # Every process of a job launches one answer: see kerntune._ranks.
            what = f"{self.jit.fn.__module__}.{self.jit.fn.__qualname__} for key {key}"
            config = agree(what, lock_folder(self.db), tune_once)
        config = launch_options(config)
        self._best[key] = config
        self.cache[key] = as_config(config)
        return config

    def _shape(self, key: tuple) -> dict:
        """A key as a size of a many-shape run: the key arguments by name, then the dtypes."""
        names = self.keys + [f"dtype{i}" for i in range(len(key) - len(self.keys))]
        return dict(zip(names, key))

    def tune_shapes(self, args: Callable, shapes: Sequence[Mapping[str, Any]], grid) -> "_shapes.ShapeResults":
        """Tunes the kernel now at every size of ``shapes`` (a list of dicts of the variables
        that differ, ``[{"M": 16}, {"M": 64}]``), each learning from the key tuned nearest to
        it, so that launches at these sizes tune nothing. ``args(**shape)`` returns a size's
        arguments: a tuple in the kernel's order, or a dict by name. Returns the results per
        size (``summary()`` is the report); sizes whose key was tuned before have none.
        ``save_table(path)`` then writes every tuned key for ``table=``."""
        sizes = _shapes.check(shapes, {"args": args}, "args=lambda M: (a[:M], b, c[:M], M)")
        results = _shapes.ShapeResults(self.jit.__name__, list(sizes[0]))
        for shape in sizes:
            made = args(**shape)
            call = dict(made) if isinstance(made, Mapping) else dict(zip(self.arg_names, made))
            key = self._key(call)
            if key not in self._best:
                self.result = None
                self._config(key, call, grid, {"grid": grid, "warmup": False}, new_keys="tune")
                if self.result is not None:
                    results._add(shape, self.result, _shapes.found_by_tune(self.result))
        return results

    def run(self, *args, grid, warmup=False, **kwargs):
        # Every launch of a tuned kernel comes through here: a serving loop of microsecond
        # kernels pays for each line, so the tuned path binds, keys and launches only.
        if len(args) > len(self.arg_names):
            self.signature.bind_partial(*args, **kwargs)  # raises Python's own TypeError
        call = dict(zip(self.arg_names, args))
        if kwargs:
            call.update((name, value) for name, value in kwargs.items() if name in self.signature.parameters)
        key = self._key(call)
        config = self._best.get(key)
        if config is None:
            config = self._config(key, call, grid, {**kwargs, "grid": grid, "warmup": warmup})
        self.best_config = self.cache[key]
        if kwargs and not config.keys().isdisjoint(kwargs):
            conflicts = ", ".join(sorted(set(kwargs) & set(config)))
            raise ArgumentError(f"Conflicting meta-parameters: {conflicts} are tuned; do not pass them")
        if not self.hooks.active:
            return self.jit.run(*args, grid=grid, warmup=warmup, **kwargs, **config)
        return self.hooks.around(
            lambda: self.jit.run(*args, grid=grid, warmup=warmup, **kwargs, **config), {**call, **config}, config
        )

    def warmup(self, *args, grid, **kwargs):
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)


def _row_of(config) -> dict:
    row = dict(config.kwargs)
    row.update(num_warps=config.num_warps, num_stages=config.num_stages, num_ctas=config.num_ctas)
    if config.maxnreg is not None:
        row["maxnreg"] = config.maxnreg
    return row


def autotune(
    configs=None,
    key=None,
    prune_configs_by: Optional[Mapping[str, Any]] = None,
    reset_to_zero: Optional[Sequence[str]] = None,
    restore_value: Optional[Sequence[str]] = None,
    pre_hook=None,
    post_hook=None,
    warmup=None,
    rep=None,
    use_cuda_graph: bool = False,
    do_bench=None,
    cache_results: bool = False,
    *,
    params: Optional[Mapping[str, Sequence]] = None,
    restrictions: Optional[Sequence[str]] = None,
    strategy: str = DEFAULTS["strategy"],
    max_fevals: Optional[int] = None,
    time_limit: Optional[float] = None,
    db: Optional[str] = None,
    table: Optional[str] = None,
    new_keys: str = "tune",
    **tune_options,
):
    """Decorator: tune the kernel with kerntune the first time it is called for a key and
    launch the best configuration on every call.

    Triton's arguments: ``configs`` (a list of ``triton.Config``; a dict here is taken as
    ``params``), ``key``, ``prune_configs_by``, ``reset_to_zero``, ``restore_value``,
    ``pre_hook``, ``post_hook`` keep their meaning; ``warmup``/``rep`` (ms) bound the time
    spent measuring one configuration; ``use_cuda_graph``, ``do_bench`` and
    ``cache_results`` are accepted and not needed (kerntune launches from its own worker,
    times with CUDA events and always keeps its results). kerntune's own: ``params`` and
    ``restrictions`` (a product space instead of a list), ``strategy``, ``max_fevals``,
    ``time_limit``, ``db``, and any keyword of ``kerntune.tune`` (``answer``, ``atol``...).
    ``new_keys="nearest"`` launches a key not tuned yet with the configuration of the nearest
    tuned one instead of tuning it on the call (``"tune"``, the default, tunes it as Triton
    does); ``table`` is a file ``kernel.save_table()`` wrote, whose keys count as tuned.
    """
    if configs is not None and isinstance(configs, Mapping) and params is None:
        configs, params = None, configs
    if key is None:
        raise ArgumentTypeError("autotune() needs key=[names of the arguments whose values select a tuning]")
    unknown = set(tune_options) - set(_TUNE_OPTIONS)
    if unknown:
        raise ArgumentTypeError(
            f"autotune() got unexpected keyword arguments {', '.join(sorted(unknown))}; it takes Triton's "
            f"arguments and kerntune.tune's: {', '.join(_TUNE_OPTIONS)}"
        )
    listed = configs if isinstance(configs, (list, tuple)) else []
    names = set(params or {}) | {name for c in listed if isinstance(c, Mapping) for name in c}
    if names & set(CONTROL_NAMES):
        raise ArgumentError(
            f"autotune() launches through Triton's own ptxas, which applies no compiler controls "
            f"({', '.join(sorted(names & set(CONTROL_NAMES)))}): tune them with kerntune.tune(..., ptxas=...)")
    if do_bench is not None:
        warnings.warn("kerntune times kernels in its own worker: do_bench is not used", stacklevel=2)
    search = dict(tune_options, strategy=strategy, max_fevals=max_fevals, time_limit=time_limit, db=db)
    if warmup is not None or rep is not None:
        timing = dict(search.get("timing") or {})
        if rep is not None:
            timing.setdefault("time_cap", f"{float(rep) / 1000}s")
        search["timing"] = timing

    def decorator(fn):
        return Autotuner(fn, configs, params, key, prune_configs_by, reset_to_zero, restore_value,
                         pre_hook, post_hook, restrictions, search, table, new_keys)

    return decorator

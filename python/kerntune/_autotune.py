"""``@kerntune.autotune``: a drop-in for ``@triton.autotune``.

    @kerntune.autotune(params={"BLOCK_M": [64, 128], "num_warps": [4, 8]}, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, ..., BLOCK_M: tl.constexpr): ...

    matmul_kernel[grid](a, b, c, M, N, K, ...)   # the call site does not change

The first call for a new value of the key tunes with kerntune (its strategies, its store);
every call then launches the best configuration through Triton. A new process finds the
stored answer and does not tune again. ``KERNTUNE_RETUNE=1`` forces tuning again;
``KERNTUNE_NO_TUNE=1`` skips tuning and launches the first valid configuration.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Mapping, Optional, Sequence

from kerntune._tune import jit_function, tune


class Autotuner:
    def __init__(self, fn, params, key, restrictions, strategy, max_fevals, time_limit, db, tune_options):
        self.fn = fn
        self.jit = jit_function(fn)
        self.params = {k: list(v) for k, v in params.items()}
        self.key = list(key)
        self.restrictions = list(restrictions or [])
        self.strategy = strategy
        self.max_fevals = max_fevals
        self.time_limit = time_limit
        self.db = db
        self.tune_options = dict(tune_options)
        self.best: dict[tuple, dict] = {}
        self.signature = inspect.signature(self.jit.fn)
        missing = [k for k in self.key if k not in self.jit.arg_names]
        if missing:
            raise ValueError(f"key names {missing} are not arguments of {self.jit.__name__}")

    def _bind(self, args, kwargs) -> dict:
        bound = self.signature.bind_partial(*args, **kwargs)
        return dict(bound.arguments)

    def _key(self, call: Mapping[str, Any]) -> tuple:
        def part(value):
            if hasattr(value, "dtype") and hasattr(value, "shape"):
                return (str(value.dtype), tuple(value.shape))
            return value

        return tuple(part(call.get(k)) for k in self.key)

    def _config(self, call, grid) -> dict:
        key = self._key(call)
        if key in self.best:
            return self.best[key]
        if os.environ.get("KERNTUNE_NO_TUNE") == "1":
            from kerntune._tune import _first_valid_config

            config = _first_valid_config(self.params, self.restrictions, 1)[0]
        else:
            result = tune(
                self.fn, call, grid, self.params, self.restrictions,
                strategy=os.environ.get("KERNTUNE_STRATEGY", self.strategy),
                max_fevals=self.max_fevals, time_limit=self.time_limit, db=self.db,
                fresh=os.environ.get("KERNTUNE_RETUNE") == "1", **self.tune_options,
            )
            if result.best_config is None:
                raise RuntimeError(f"kerntune found no configuration of {self.jit.__name__} that runs and passes its check")
            config = result.best_config
        config = {k: v for k, v in config.items() if not (k == "maxnreg" and v == 0) and not (k == "ptx_options" and v == "")}
        self.best[key] = config
        return config

    def run(self, *args, grid, warmup=False, **kwargs):
        call = self._bind(args, kwargs)
        config = self._config(call, grid)
        return self.jit.run(*args, grid=grid, warmup=warmup, **kwargs, **config)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)


def autotune(
    params: Mapping[str, Sequence],
    key: Sequence[str],
    restrictions: Optional[Sequence[str]] = None,
    strategy: str = "default",
    max_fevals: Optional[int] = None,
    time_limit: Optional[float] = None,
    db: Optional[str] = None,
    **tune_options,
):
    """Decorator: tune the kernel with kerntune the first time it is called for a key (the
    values of the ``key`` arguments; tensors by dtype and shape) and launch the best
    configuration on every call. Other keyword arguments go to ``kerntune.tune``."""

    def decorator(fn):
        return Autotuner(fn, params, key, restrictions, strategy, max_fevals, time_limit, db, tune_options)

    return decorator

"""kerntune: find the fastest correct build of a GPU kernel.

- ``kerntune.tune(kernel, args, grid, params, ...)`` tunes a ``@triton.jit`` kernel;
- ``@kerntune.autotune(params=..., key=[...])`` replaces ``@triton.autotune``;
- ``kerntune.tune_kernel(...)`` and ``kerntune.run_kernel(...)`` take Kernel Tuner's arguments for CUDA C
  kernels (``kerntune.util`` and ``kerntune.file_utils`` hold the helpers its scripts import);
- ``kerntune.compile(...)`` compiles a Triton kernel's whole space without a GPU;
- ``kerntune.use_schedule(...)`` launches a tuned native schedule through Triton;
- ``kerntune.report(db, path)`` (or ``result.report(path)``) writes an HTML report of a results store,
  ``kerntune.export(db, path)`` its tuning as a T4 or Kernel Tuner cache file;
- ``kerntune.export_table(table, path, format=...)`` writes a dispatch table as vLLM's fused-MoE
  config file or a C/C++ header, and ``kerntune.load_configs(table)`` reads it as ``triton.Config``s;
- ``kerntune.torch.compile(model)`` (``import kerntune.torch``; needs torch) is ``torch.compile`` with
  TorchInductor's GEMMs chosen by kerntune.

Results are kept in a SQLite store, so tuning the same thing again costs nothing.
"""

from kerntune._kerntune import (
    BackendError,
    KerntuneError,
    NoGpuError,
    SpaceError,
    SpecError,
    StoreError,
    StrategyError,
    __version__,
    default_db,
)
from kerntune._errors import (ArgumentError, ArgumentTypeError, KeyNameWarning, LongSearchWarning,
                              ReferenceDisagreementError, UncheckedOutputsWarning)
from kerntune._ranks import RankTuningError
from kerntune._results import NoValidConfigError, TuneResult, export, report
from kerntune._shapes import ShapeResults
from kerntune._arguments import Tensor
from kerntune._tune import compile, tune
from kerntune._autotune import autotune
from kerntune._kernel_tuner import run_kernel, tune_kernel
from kerntune._schedule import use_schedule
from kerntune._space import load_configs
from kerntune._dispatch import export_table
from kerntune._kernel_source import remember_main_source

remember_main_source()

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "BackendError",
    "KerntuneError",
    "LongSearchWarning",
    "NoGpuError",
    "NoValidConfigError",
    "RankTuningError",
    "ReferenceDisagreementError",
    "SpaceError",
    "SpecError",
    "StoreError",
    "StrategyError",
    "Tensor",
    "TuneResult",
    "ShapeResults",
    "UncheckedOutputsWarning",
    "KeyNameWarning",
    "autotune",
    "compile",
    "default_db",
    "export",
    "export_table",
    "load_configs",
    "report",
    "run_kernel",
    "tune",
    "tune_kernel",
    "use_schedule",
    "__version__",
]

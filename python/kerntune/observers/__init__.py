"""Kernel Tuner's observers that kerntune honours: ``NVMLObserver``, whose observables
(energy, power, clocks, temperature) the benchmark worker reads through NVML around its
timed launches. Import it as Kernel Tuner users do, with ``kerntune`` in place of
``kernel_tuner``: ``from kerntune.observers.nvml import NVMLObserver``."""

from kerntune.observers.nvml import NVMLObserver

__all__ = ["NVMLObserver"]

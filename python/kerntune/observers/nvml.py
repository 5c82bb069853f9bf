"""``NVMLObserver`` with Kernel Tuner's arguments. kerntune measures what it names in its
own benchmark worker, so the observer only says what to report: each configuration's
result then holds Kernel Tuner's keys, from kerntune's measurements:

- ``nvml_energy``: joules per launch, the energy counter's difference over a block of
  launches of at least 200 ms (Kernel Tuner multiplies a median power reading by the
  time instead);
- ``nvml_power``: watts, the mean power over that block;
- ``core_freq``, ``mem_freq``: SM and memory clock in MHz at the end of the block;
- ``temperature``: the GPU's temperature in °C then.

kerntune reads clocks and power limits but never sets them: ``use_locked_clocks=True``
and the tunable parameters ``nvml_gr_clock``, ``nvml_mem_clock`` and ``nvml_pwr_limit``
are refused. ``power_readings`` and ``gr_voltage`` are not measured and are refused.
"""

from __future__ import annotations

from kerntune._errors import ArgumentError, ArgumentTypeError

# Kernel Tuner's observable -> the metric key kerntune measures it under.
OBSERVABLES = {
    "nvml_energy": "energy_J",
    "nvml_power": "power_W",
    "core_freq": "clock_MHz",
    "mem_freq": "memory_clock_MHz",
    "temperature": "temperature_C",
}
# What Kernel Tuner's NVMLObserver also offers, and why kerntune does not.
_NOT_MEASURED = {
    "power_readings": "kerntune keeps no trace of individual power readings; nvml_power is the block's mean power",
    "gr_voltage": "kerntune does not read the graphics voltage",
}
# Kernel Tuner's tunable parameters that set the GPU's clocks or power limit.
SETTING_PARAMS = ("nvml_gr_clock", "nvml_mem_clock", "nvml_pwr_limit")


class NVMLObserver:
    """Kernel Tuner's ``NVMLObserver(observables, device=0, save_all=False,
    nvidia_smi_fallback=None, use_locked_clocks=False, continous_duration=1)``.
    ``device`` must be the GPU tuned on (NVML and CUDA name the same GPU by its PCI
    address in kerntune); ``save_all``, ``nvidia_smi_fallback`` and
    ``continous_duration`` are accepted and have no effect (kerntune's energy block is as
    long as the counter's updates need, see the module's text)."""

    def __init__(self, observables, device=0, save_all=False, nvidia_smi_fallback=None, use_locked_clocks=False,
                 continous_duration=1):
        if isinstance(observables, str) or not isinstance(observables, (list, tuple)):
            raise ArgumentTypeError("NVMLObserver: give the observables as a list, such as ['nvml_energy', 'nvml_power']")
        for name in observables:
            if name in _NOT_MEASURED:
                raise ArgumentError(f"NVMLObserver: '{name}' is not available in kerntune: {_NOT_MEASURED[name]}")
            if name not in OBSERVABLES:
                raise ArgumentError(f"NVMLObserver: unknown observable {name!r}; kerntune measures "
                                    f"{', '.join(OBSERVABLES)}")
        if use_locked_clocks:
            raise ArgumentError("NVMLObserver: use_locked_clocks=True sets the GPU's clocks; kerntune reads clocks "
                                "and power limits but never changes them")
        if not isinstance(device, int) or isinstance(device, bool):
            raise ArgumentTypeError("NVMLObserver: device must be an int (the GPU tuned on)")
        self.observables = list(observables)
        self.device = device


def observed_keys(observers) -> dict:
    """Kernel Tuner's result key -> kerntune's metric key, for every observable of
    ``observers`` (Kernel Tuner's ``observers=``); an observer kerntune cannot honour is
    a clear error."""
    if observers is None:
        return {}
    if not isinstance(observers, (list, tuple)):
        observers = [observers]
    keys = {}
    for observer in observers:
        if not isinstance(observer, NVMLObserver):
            kind = type(observer).__name__
            raise ArgumentError(f"observers: {kind} is not available in kerntune; NVMLObserver is "
                                "(from kerntune.observers.nvml import NVMLObserver)")
        keys.update({name: OBSERVABLES[name] for name in observer.observables})
    return keys


def check_tunables(params) -> None:
    """Refuses Kernel Tuner's tunable parameters that would set clocks or power limits."""
    for name in SETTING_PARAMS:
        if name in params:
            raise ArgumentError(f"tune_params['{name}']: kerntune reads the GPU's clocks and power limit but never "
                                "sets them; remove it (lock clocks with nvidia-smi beforehand if you must)")

"""Energy and power without a GPU: Kernel Tuner's NVMLObserver and its names, the
objectives ``tune_kernel`` and ``kerntune.tune`` accept, the errors for what kerntune
cannot honour, and a simulation that replays recorded energy. The GPU run is in
test_kernel_tuner_gpu.py (an energy-objective tune end to end)."""

import numpy as np
import pytest

import kerntune
from kerntune import _kt_cache
from kerntune._kt_call import Call, direction
from kerntune._job import _objective
from kerntune.observers import NVMLObserver
from kerntune.observers.nvml import observed_keys

from test_kernel_tuner import VECTOR_ADD, compile_only, vector_args


def test_kernel_tuners_import_path_works_with_kerntune_in_its_place():
    from kerntune.observers.nvml import NVMLObserver as FromModule

    assert FromModule is NVMLObserver


def test_observer_names_map_to_what_kerntune_measures():
    observer = NVMLObserver(["nvml_energy", "nvml_power", "core_freq", "mem_freq", "temperature"])
    assert observed_keys([observer]) == {"nvml_energy": "energy_J", "nvml_power": "power_W", "core_freq": "clock_MHz",
                                         "mem_freq": "memory_clock_MHz", "temperature": "temperature_C"}
    assert observed_keys(None) == {}


@pytest.mark.parametrize("make, match", [
    (lambda: NVMLObserver(["gr_voltage"]), "gr_voltage.*not available"),
    (lambda: NVMLObserver(["power_readings"]), "power_readings.*not available"),
    (lambda: NVMLObserver(["nvml_energi"]), "unknown observable 'nvml_energi'"),
    (lambda: NVMLObserver("nvml_energy"), "as a list"),
    (lambda: NVMLObserver(["nvml_energy"], use_locked_clocks=True), "never changes them"),
    (lambda: observed_keys([object()]), "object is not available"),
])
def test_what_kerntune_cannot_honour_is_a_one_line_error(make, match):
    with pytest.raises((ValueError, TypeError), match=match) as caught:
        make()
    assert isinstance(caught.value, kerntune.KerntuneError) and "\n" not in str(caught.value)


@pytest.mark.parametrize("tunable", ["nvml_gr_clock", "nvml_mem_clock", "nvml_pwr_limit"])
def test_tunables_that_set_clocks_or_power_limits_are_refused(db, tunable):
    with pytest.raises(ValueError, match=f"{tunable}.*never sets them"):
        compile_only(db, "vector_add", VECTOR_ADD, 4096, vector_args(),
                     {"block_size_x": [128], tunable: [1000, 1500]})


def test_energy_objectives_are_lower_is_better_and_metrics_may_use_observables():
    assert direction("nvml_energy", None, None) is False
    assert direction("energy", None, None) is False
    assert direction("GFLOPS/W", None, {"GFLOPS/W": "1 / nvml_energy"}) is True
    with pytest.raises(ValueError, match="measured value"):
        direction("joules", None, None)


def test_an_observer_and_an_energy_objective_reach_the_spec(tmp_path):
    call = Call("vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [128]}, (None, None, None), None,
                 None, 1e-6, 1e-5, None, None, None, None, None, None, 7, None, "nvml_energy", str(tmp_path),
                 {"nvml_energy": "energy_J"})
    spec = call.spec(1024, 49152, False)
    assert spec["timing"] == {"min_samples": 7, "energy": True}
    assert spec["objective"] == {"name": "nvml_energy", "expression": "nvml_energy", "higher_is_better": False}
    row = call._row({"config": {"block_size_x": 128}, "status": "ok", "time_ms": 1.0, "samples": [1.0],
                     "objective": 2e-4, "observables": {"energy_J": 2e-4, "power_W": 200.0}}, {})
    assert row["nvml_energy"] == 2e-4 and "nvml_power" not in row, "only what the observer asked for"
    # A metric over an observable becomes the objective's expression, evaluated in Rust.
    metric = Call("vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [128]}, (None, None, None),
                   None, None, 1e-6, 1e-5, None, None, None, None, None, None, 7,
                   {"GFLOPS/W": "4096 / 1e9 / nvml_energy"}, "GFLOPS/W", str(tmp_path))
    assert metric.spec(1024, 49152, True)["objective"]["expression"] == "4096 / 1e9 / nvml_energy"
    assert "energy" not in metric.spec(1024, 49152, True)["timing"]


def test_without_nvml_readings_the_observer_keys_are_absent_not_zero(tmp_path):
    call = Call("vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [128]}, (None, None, None), None,
                 None, 1e-6, 1e-5, None, None, None, None, None, None, 7, None, "time", str(tmp_path),
                 {"nvml_power": "power_W"})
    row = call._row({"config": {"block_size_x": 128}, "status": "ok", "time_ms": 1.0, "samples": [1.0],
                     "objective": 1.0}, {})
    assert "nvml_power" not in row


@pytest.mark.parametrize("given, expected", [
    (None, None),
    ("time", None),
    ("energy", {"name": "energy", "expression": None, "higher_is_better": None}),
    (("EDP", "energy*time"), {"name": "EDP", "expression": "energy*time", "higher_is_better": None}),
])
def test_triton_objectives_are_a_name_an_expression_or_a_pair(given, expected):
    assert _objective(given, None) == expected


@pytest.mark.parametrize("given, higher, match", [
    (("a", "b", "c"), None, "pair of strings"),
    ("", None, "give a name"),
    ("energy", "yes", "True or False"),
    (None, True, "give objective="),
])
def test_bad_triton_objectives_are_errors(given, higher, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _objective(given, higher)


def test_simulation_mode_replays_recorded_energy(tmp_path):
    path = str(tmp_path / "cache.json")
    header = {"device_name": "NVIDIA H100", "kernel_name": "vector_add", "problem_size": 4096,
              "tune_params_keys": ["block_size_x"], "tune_params": {"block_size_x": [64, 128, 256]}, "objective": "time",
              "cache": {}}
    results = [{"block_size_x": 64, "time": 2.0, "nvml_energy": 0.1},
               {"block_size_x": 128, "time": 1.0, "nvml_energy": 0.3},
               {"block_size_x": 256, "time": 1.5, "nvml_energy": 0.2}]
    _kt_cache.write(path, header, results)
    _, env = kerntune.tune_kernel("vector_add", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [64, 128, 256]},
                                  simulation_mode=True, cache=path, quiet=True, objective="nvml_energy")
    assert env["best_config"]["block_size_x"] == 64


def test_an_energy_objective_or_graph_timing_is_a_different_tuning_in_the_store():
    from kerntune._job import _measured_identity

    base = {"fingerprint": "abc", "timing": {}}
    assert _measured_identity(base) == "abc", "time, measured as before, keeps its identity"
    energy = _measured_identity({**base, "objective": {"name": "energy", "expression": None, "values": {}}})
    graph = _measured_identity({**base, "timing": {"graph": True}})
    assert len({"abc", energy, graph}) == 3

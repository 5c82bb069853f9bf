"""``kerntune.tune_kernel`` on the GPU with the Kernel Tuner-style examples of
examples/kernel_tuner/ (their problems made small): each tunes every configuration,
verifies it, and returns Kernel Tuner's results and env."""

import json
import os

import numpy as np
import pytest

import kerntune
from kerntune import util

from test_kernel_tuner import VECTOR_ADD, kernel_tuner_example, vector_args

pytestmark = pytest.mark.gpu

SMALL = {
    "vector_add": dict(n=1 << 20),
    "stencil": dict(width=1024, height=512),
    "matmul": dict(n=512),
    "convolution": dict(width=512, height=512),
    "reduction": dict(n=1 << 20),
}


def tune(example, db, **overrides):
    arguments = kernel_tuner_example(example).problem(**SMALL[example])
    arguments.update(overrides)
    return kerntune.tune_kernel(**arguments, db=db, quiet=True)


def valid_count(arguments):
    params = arguments["tune_params"]
    restrictions = list(arguments.get("restrictions") or [])
    blocks = [n for n in ("block_size_x", "block_size_y", "block_size_z") if n in params]
    restrictions.append(" * ".join(blocks) + " <= 1024")
    return len(json.loads(kerntune._kerntune.valid_configs(json.dumps(params), restrictions)))


@pytest.mark.parametrize("example", sorted(SMALL))
def test_each_example_tunes_every_configuration_and_verifies_it(example, db):
    results, env = tune(example, db)
    arguments = kernel_tuner_example(example).problem(**SMALL[example])
    assert len(results) == valid_count(arguments)
    failed = [r for r in results if r["status"] not in ("ok", "early_stopped")]
    assert not failed, failed[:3]
    assert all(isinstance(r["time"], float) and r["times"] for r in results)
    assert env["best_config"]["time"] == min(r["time"] for r in results)
    assert env["device_name"]


def test_a_metric_is_computed_for_every_configuration(db):
    results, _ = tune("matmul", db)
    assert len(results) == valid_count(kernel_tuner_example("matmul").problem(**SMALL["matmul"])), results[:3]
    assert all(r["GFLOP/s"] > 0 for r in results)


def test_a_verify_that_rejects_everything_fails_loudly(db):
    with pytest.raises(kerntune.KerntuneError, match="verify"):
        tune("reduction", db, verify=lambda answer, result, atol=None: False)


def test_a_constant_symbol_missing_from_the_kernel_fails_loudly(db):
    weights = np.ones((15, 15), np.float32)
    with pytest.raises(kerntune.KerntuneError, match="cuModuleGetGlobal"):
        tune("convolution", db, cmem_args={"no_such_symbol": weights})


def test_the_constant_memory_reaches_the_kernel(db):
    # With the wrong filter in constant memory, no output matches the answer.
    arguments = kernel_tuner_example("convolution").problem(**SMALL["convolution"])
    with pytest.raises(kerntune.KerntuneError, match="elements wrong"):
        tune("convolution", db, cmem_args={"d_filter": 2 * arguments["cmem_args"]["d_filter"]})


def test_a_wrong_kernel_name_fails_loudly_with_a_hint(db):
    with pytest.raises(kerntune.KerntuneError, match="Hint"):
        kerntune.tune_kernel("vector_sum", VECTOR_ADD, 4096, vector_args(), {"block_size_x": [128]}, db=db,
                             quiet=True)


def test_blocks_larger_than_the_device_allows_are_not_evaluated(db):
    results, env = kerntune.tune_kernel("vector_add", VECTOR_ADD, 4096, vector_args(),
                                        {"block_size_x": [512, 1024, 2048]}, db=db, quiet=True)
    assert [r["block_size_x"] for r in results] == [512, 1024]
    assert env["evaluations"] == 2


def test_a_cache_file_is_written_and_resumed(db, tmp_path):
    cache = str(tmp_path / "vector_add")
    first, _ = tune("vector_add", db, cache=cache)
    document = json.loads(open(cache + ".json").read())
    assert document["kernel_name"] == "vector_add" and len(document["cache"]) == len(first)
    # A fresh store: the measurements come from the cache file.
    again, env = tune("vector_add", str(tmp_path / "other.db"), cache=cache)
    assert env["from_store"] == len(again) == len(first)
    assert [r["time"] for r in again] == [r["time"] for r in first]


def test_run_kernel_returns_the_arguments_after_one_run():
    n = 10_000
    c, a, b, size = vector_args(n)
    out = kerntune.run_kernel("vector_add", VECTOR_ADD, n, [c, a, b, size], {"block_size_x": 256})
    np.testing.assert_allclose(out[0], a + b)
    assert out[3] == size


def test_a_configuration_that_fails_holds_kernel_tuners_marker(db):
    source = "#if block_size_x == 256\n#error not this one\n#endif\n" + VECTOR_ADD
    results, env = kerntune.tune_kernel("vector_add", source, 4096, vector_args(), {"block_size_x": [128, 256]},
                                        db=db, quiet=True)
    failed = results[1]
    assert isinstance(failed["time"], util.CompilationFailedConfig) and failed["status"] == "compile_failed"
    assert "not this one" in failed["reason"]
    assert env["best_config"]["block_size_x"] == 128


def test_an_nvml_observer_and_an_energy_metric_tune_as_in_kernel_tuners_energy_examples(db):
    # Kernel Tuner's energy examples with the import changed: an NVMLObserver, and a
    # GFLOPS/W metric over what it observes as the objective.
    from kerntune.observers.nvml import NVMLObserver

    n = 1 << 24
    observer = NVMLObserver(["nvml_energy", "nvml_power", "core_freq", "mem_freq", "temperature"])
    metrics = {"GFLOPS/W": f"{n} / 1e9 / nvml_energy"}
    results, env = kerntune.tune_kernel("vector_add", VECTOR_ADD, n, vector_args(n),
                                        {"block_size_x": [128, 256, 512]}, observers=[observer], metrics=metrics,
                                        objective="GFLOPS/W", db=db, quiet=True)
    assert len(results) == 3
    for row in results:
        assert row["nvml_power"] > 20 and row["nvml_energy"] > 0, row
        assert 200 < row["core_freq"] < 4000 and row["mem_freq"] > 0 and 10 < row["temperature"] < 110, row
        assert row["GFLOPS/W"] == pytest.approx(n / 1e9 / row["nvml_energy"])
    assert env["best_config"]["GFLOPS/W"] == max(r["GFLOPS/W"] for r in results)


SLOW_OR_FAST = """
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) {
        float x = a[i];
        for (int k = 0; k < repeat; k++) x = x * 0.999f + b[i];
        c[i] = x;
    }
}
"""


@pytest.mark.filterwarnings("ignore::kerntune.UncheckedOutputsWarning")
def test_an_observers_energy_reaches_a_metric_function_on_every_row_early_stopped_ones_too(db):
    # Kernel Tuner's vector_add_observers: a function metric over nvml_energy, time the
    # objective. Configurations of 2000 dependent steps an element, far slower than one step,
    # are stopped early and keep their energy.
    from kerntune.observers.nvml import NVMLObserver

    n = 1 << 22
    metrics = {"GFLOPS/W": lambda p: (n / 1e9) / p["nvml_energy"]}
    results, _ = kerntune.tune_kernel("vector_add", SLOW_OR_FAST, n, vector_args(n),
                                      {"repeat": [1, 2000], "block_size_x": [128, 256, 512, 1024]},
                                      observers=[NVMLObserver(["nvml_energy", "temperature"])], metrics=metrics,
                                      db=db, quiet=True)
    assert len(results) == 8 and all(r["status"] in ("ok", "early_stopped") for r in results), results
    assert any(r.get("early_stopped") for r in results), "no configuration was stopped early"
    for row in results:
        assert row["nvml_energy"] > 0 and 10 < row["temperature"] < 110, row
        assert row["GFLOPS/W"] == pytest.approx(n / 1e9 / row["nvml_energy"])
    slow = [r["nvml_energy"] for r in results if r["repeat"] == 2000]
    fast = [r["nvml_energy"] for r in results if r["repeat"] == 1]
    assert min(slow) > max(fast), "the slow kernels' energy per launch is measured, not copied"


def test_a_custom_verify_without_answer_gets_none_and_every_array(db):
    n = 1 << 16
    calls = []

    def verify(answer, result, atol=None):
        calls.append(answer)
        return np.allclose(result[0], result[1] + result[2]) and result[3] is None

    results, _ = kerntune.tune_kernel("vector_add", VECTOR_ADD, n, vector_args(n), {"block_size_x": [128, 256]},
                                      verify=verify, db=db, quiet=True)
    assert [r["status"] for r in results] == ["ok", "ok"] and calls == [None, None]
    assert all(r["verified_sets"] == 1 for r in results)
    with pytest.raises(kerntune.KerntuneError, match="verify"):
        kerntune.tune_kernel("vector_add", VECTOR_ADD, n, vector_args(n), {"block_size_x": [128]},
                             verify=lambda answer, result, atol=None: np.allclose(result[0], 0), db=db, quiet=True)


def test_a_kernel_including_cub_tunes_and_verifies(db):
    from test_kernel_tuner import CUB_BLOCK_SUMS

    x = np.random.default_rng(1).random(1 << 12)
    expected = x.reshape(-1, 256).sum(axis=1)
    results, _ = kerntune.tune_kernel("block_sums", CUB_BLOCK_SUMS, x.size, [x, np.zeros(16)], {"block_size_x": [256]},
                                      answer=[None, expected], atol=1e-9, db=db, quiet=True)
    assert results[0]["status"] == "ok", results[0].get("reason")


@pytest.mark.filterwarnings("ignore::kerntune.UncheckedOutputsWarning")
def test_a_long_brute_force_is_forecast_once_with_the_options_that_bound_it(db):
    import warnings

    params = {"block_size_x": [32 * i for i in range(1, 33)], "variant": list(range(400))}  # 12,800 configurations
    with warnings.catch_warnings():
        # As an error, the warning also ends the run, so the test does not wait for 12,800.
        warnings.simplefilter("error", kerntune.LongSearchWarning)
        with pytest.raises(kerntune.LongSearchWarning) as warned:
            kerntune.tune_kernel("vector_add", VECTOR_ADD, 4096, vector_args(), params, db=db, quiet=True)
        # A bounded search is not forecast: here the warning would raise.
        results, _ = kerntune.tune_kernel("vector_add", VECTOR_ADD, 4096, vector_args(), params, db=db, quiet=True,
                                          strategy_options={"max_fevals": 40})
    line = str(warned.value)
    assert line.startswith("brute force over 12800 configurations: ") and " s each (measured over the first 32)" in line
    assert "max_fevals" in line and "time_limit" in line and "\n" not in line
    assert len(results) == 40

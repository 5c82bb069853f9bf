"""What kerntune checks outputs against, and that it says so when it cannot: the agreement
of the configurations whose outputs become the reference without ``answer`` (as a pure
function, on numpy arrays), and the warning of a Kernel Tuner call that checks nothing.
The GPU runs of the same rules are in test_gpu.py."""

import os

import numpy as np
import pytest

import kerntune
from kerntune._reference import _disagreement


def within_1e_2(name, actual, expected):
    bad = ~(np.abs(actual - expected) <= 1e-2 + 1e-2 * np.abs(expected))
    return f"{int(bad.sum())} elements differ" if bad.any() else None


def unchanged_inputs(inputs):
    return lambda name: inputs[name]


def test_runs_whose_outputs_agree_within_the_tolerances_give_no_disagreement():
    c = np.linspace(0, 1, 64)
    runs = [({"BLOCK": 16}, {"c": c}), ({"BLOCK": 32}, {"c": c + 1e-3}), ({"BLOCK": 64}, {"c": c.copy()})]
    assert _disagreement(runs, unchanged_inputs({"c": np.zeros(64)}), within_1e_2) is None


def test_a_run_that_disagrees_is_named_with_the_first_and_the_output():
    c = np.linspace(0, 1, 64)
    wrong = c.copy()
    wrong[40:] = 0.0
    runs = [({"BLOCK": 16}, {"c": c}), ({"BLOCK": 32}, {"c": c}), ({"BLOCK": 64}, {"c": wrong})]
    message = _disagreement(runs, unchanged_inputs({"c": np.zeros(64)}), within_1e_2)
    assert message == "c of {BLOCK: 64} differs from that of {BLOCK: 16}: 24 elements differ"


def test_an_output_another_run_leaves_alone_is_compared_as_its_input():
    inputs = {"c": np.zeros(8), "partial": np.zeros(8)}
    runs = [({"SPLIT": 1}, {"c": np.ones(8)}), ({"SPLIT": 2}, {"c": np.ones(8), "partial": np.full(8, 0.5)})]
    message = _disagreement(runs, unchanged_inputs(inputs), within_1e_2)
    assert message is not None and message.startswith("partial of {SPLIT: 2}")


def test_one_run_has_nothing_to_disagree_with():
    assert _disagreement([({"BLOCK": 16}, {"c": np.ones(4)})], unchanged_inputs({}), within_1e_2) is None


def test_differences_follow_the_benchmark_workers_rule_and_nan_never_passes():
    torch = pytest.importorskip("torch")
    from kerntune._reference import _difference

    expected = torch.tensor([1.0, 2.0, 100.0, 4.0])
    assert _difference(expected + torch.tensor([0.01, 0.0, 0.5, 0.0]), expected, 0.01, 0.01) is None
    nan = expected.clone()
    nan[3] = float("nan")
    assert _difference(nan, expected, 1.0, 1.0).startswith("1 of 4 elements differ beyond atol 1.0, rtol 1.0 (first at index 3")
    assert _difference(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]), 1.0, 1.0).startswith("1 of 3")


def test_tuning_a_cuda_kernel_without_answer_or_verify_warns_that_outputs_are_not_checked(db):
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has a GPU: the tuning would run")
    source = "__global__ void fill(float *c, int n) { int i = blockIdx.x * block_size_x + threadIdx.x; if (i < n) c[i] = 1; }"
    with pytest.warns(kerntune.UncheckedOutputsWarning, match="fill: neither answer nor verify is given"):
        with pytest.raises(kerntune.NoGpuError):
            kerntune.tune_kernel("fill", source, 256, [np.zeros(256, np.float32), np.int32(256)],
                                 {"block_size_x": [128]}, db=db, quiet=True)


def test_compiling_without_answer_warns_of_nothing(db):
    source = "__global__ void fill(float *c, int n) { int i = blockIdx.x * block_size_x + threadIdx.x; if (i < n) c[i] = 1; }"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", kerntune.UncheckedOutputsWarning)
        kerntune.tune_kernel("fill", source, 256, [np.zeros(256, np.float32), np.int32(256)], {"block_size_x": [128]},
                             compile_only=True, arch="sm_90", db=db)

"""The Python front's one-line messages for the bad inputs the CLI's snapshot tests pin
(crates/kerntune-cli/tests/snapshots/error_*.snap): the same words, except where a message
names a setting, which each front spells its own way (`--target` there, `target=` here).
Each is raised before any work; no GPU needed."""

import os

import numpy as np
import pytest
import triton
import triton.language as tl

import kerntune
from kerntune import Tensor

SNAPSHOTS = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "kerntune-cli", "tests", "snapshots")


@triton.jit
def _copy(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def tune(**settings):
    return kerntune.tune(_copy, {"x_ptr": Tensor("float32", (256,)), "n": 256}, (1,), {"BLOCK": [64]}, **settings)


def tune_kernel(**settings):
    source = 'extern "C" __global__ void fill(float *x) { x[threadIdx.x] = a; }'
    return kerntune.tune_kernel("fill", source, 64, [np.zeros(64, np.float32)], {"a": [1, 2]}, compile_only=True,
                                **settings)


def cli_message(snapshot: str) -> str:
    """The one line the CLI prints for a snapshot's bad input, without `error: `."""
    with open(os.path.join(SNAPSHOTS, f"{snapshot}.snap")) as f:
        return f.read().rstrip("\n").splitlines()[-1].removeprefix("error: ")


# (the CLI's snapshot, the same bad input through Python, the exception, Python's message,
# how Python's words follow from the CLI's)
CASES = [
    ("error_unknown_strategy", lambda: tune(strategy="genetik"), kerntune.ArgumentError,
     "unknown strategy 'genetik' (available: default, brute_force, random_sample, genetic_algorithm, diff_evo, pso, "
     "firefly_algorithm, simulated_annealing, basinhopping, greedy_ils, mls, bayes_opt)", lambda cli: cli),
    ("error_unknown_option", lambda: tune(strategy="genetic_algorithm", strategy_options={"popsize": 3}),
     kerntune.ArgumentError,
     "options of strategy 'genetic_algorithm': unknown field `popsize`, expected one of `population_size`, "
     "`mutation_rate`, `elites`, `tournament_size`, `distinct_attempts`", lambda cli: cli),
    ("error_option_out_of_range", lambda: tune(strategy="pso", strategy_options={"swarm_size": 0}),
     kerntune.ArgumentError, "options of strategy 'pso': swarm_size must be at least 1, got 0", lambda cli: cli),
    # The setting, as each front spells it.
    ("error_target_nan", lambda: tune(target=float("nan")), kerntune.ArgumentError,
     "target= must be a finite number, got NaN", lambda cli: cli.replace("--target", "target=")),
    # Where the restriction came from: the CLI names the file, Python the call.
    ("error_bad_restriction", lambda: tune_kernel(restrictions=["a *% 2 < 4"]), kerntune.SpecError,
     "tune_kernel: restriction in 'a *% 2 < 4' at column 4: expected a value, found '%'",
     lambda cli: cli.replace("[TEMP]/space.json", "tune_kernel")),
]
IDS = [case[0] for case in CASES]


@pytest.mark.parametrize("snapshot,call,exception,message,from_cli", CASES, ids=IDS)
def test_python_says_in_one_line_what_the_cli_says(snapshot, call, exception, message, from_cli):
    with pytest.raises(exception) as raised:
        call()
    assert str(raised.value) == message


@pytest.mark.parametrize("snapshot,call,exception,message,from_cli", CASES, ids=IDS)
def test_the_fronts_differ_only_where_each_says_it_its_own_way(snapshot, call, exception, message, from_cli):
    assert message == from_cli(cli_message(snapshot))

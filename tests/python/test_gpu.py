"""Tuning on a real GPU from Python (skipped without one; gpu/check.sh runs these on the
device machine)."""

import subprocess
import sys
import time
import warnings
from collections import Counter

import pytest

import kerntune

pytestmark = pytest.mark.gpu


def expected_best(result):
    """The row a TuneResult's best must be: the best that verified (status ok) by the
    objective's direction, or, when re-timing the finalists found another faster beyond
    noise, that one."""
    ok = [r for r in result.results if r["status"] == "ok"]
    assert ok, result.results
    sign = -1 if result.higher_is_better else 1
    fastest = min(ok, key=lambda r: sign * r["objective"])
    finalists = result.finalists
    if finalists is not None and finalists["report"]["verdict"] == "overtaken":
        assert finalists["configs"][0] == fastest["config"], (finalists, fastest)
        winner = finalists["configs"][finalists["report"]["winner"]]
        fastest = next(r for r in ok if r["config"] == winner)
    return fastest


def check_best_is_the_fastest_verified(result):
    """The counts of a TuneResult add up, and its best is the best configuration whose output
    verified (status ok), by the objective's direction, not merely some configuration of the
    space; or, when re-timing the finalists found another one faster beyond noise, that one."""
    assert len(result.results) == result.evaluations, result
    statuses = Counter(r["status"] for r in result.results)
    assert result.failed == sum(n for s, n in statuses.items() if s not in ("ok", "early_stopped")), statuses
    assert statuses["invalid_output"] == 0, [r for r in result.results if r["status"] == "invalid_output"][:3]
    fastest = expected_best(result)
    assert result.best_objective == fastest["objective"], (result.best_objective, fastest)
    assert result.best_config == {k: fastest["config"][k] for k in result.best_config}, (result.best_config, fastest)
    return statuses


def test_matmul_tunes_verifies_and_its_best_config_runs(db, tmp_path):
    import torch
    import matmul

    torch.manual_seed(0)
    a = torch.randn((1024, 1024), device="cuda", dtype=torch.float16)
    b = torch.randn((1024, 1024), device="cuda", dtype=torch.float16)
    c = torch.empty((1024, 1024), device="cuda", dtype=torch.float16)
    result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS,
                           answer={"c_ptr": torch.matmul(a, b)}, strategy="random_sample", max_fevals=24, db=db, progress=False)
    assert result.evaluations == 24 and result.verified, result
    assert 1 <= result.compile_workers <= 16, "a budget of 24 keeps no more than 16 compiles in flight"
    check_best_is_the_fastest_verified(result)
    matmul.matmul_kernel.jit[matmul.grid](**matmul.arguments(a, b, c), **result.best_config)
    torch.testing.assert_close(c, torch.matmul(a, b), atol=1e-2, rtol=1e-2)
    again = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS,
                          answer={"c_ptr": torch.matmul(a, b)}, strategy="random_sample", max_fevals=24, db=db, progress=False)
    assert again.from_store == 24 and again.best_config == result.best_config
    assert again.compile_workers is None, "the store answered every configuration"
    assert again.best_objective == result.best_objective, "the stored answer is the measured one"
    page = again.report(tmp_path / "report.html")
    html = open(page).read()
    assert "matmul_kernel on " in html and f"tuning {again.tuning}" in html
    assert html.count("<svg") >= 3 and "Best configurations" in html, "progress and parameter charts"


def test_a_wrong_configuration_is_caught_by_the_automatic_reference(db):
    """Without an answer, the first configurations run by Triton itself (which agree) give
    the reference, and a configuration that computes something else is recorded
    invalid_output; every result says on how many input sets it was checked."""
    import torch
    import triton
    import triton.language as tl

    torch.manual_seed(0)
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    result = kerntune.tune(_scale_kernel, {"x_ptr": x, "y_ptr": y, "n": x.numel()}, lambda META: (triton.cdiv(META["n"], META["BLOCK"]),),
                           {"BUGGY": [0, 1], "BLOCK": [256, 512, 1024]}, strategy="brute_force", db=db, progress=False)
    statuses = {(r["config"]["BLOCK"], r["config"]["BUGGY"]): r["status"] for r in result.results}
    assert all(statuses[(b, 1)] == "invalid_output" for b in (256, 512, 1024)), statuses
    assert all(statuses[(b, 0)] in ("ok", "early_stopped") for b in (256, 512, 1024)), statuses
    assert len(statuses) == 6 and result.failed == 3, result.results
    # The call's own inputs and 2 sets of them shuffled, computed by the agreeing configurations.
    assert result.verified and result.verified_sets == 3, result
    # A configuration stopped early (slower than the best) was checked on the call's inputs alone.
    passed = {(r["config"]["BLOCK"], r["config"]["BUGGY"]): r["verified_sets"] for r in result.results}
    sets = {"ok": 3, "early_stopped": 1}
    assert all(passed[(b, 0)] == sets[statuses[(b, 0)]] and passed[(b, 1)] == 0 for b in (256, 512, 1024)), passed
    # A kernel of a few microseconds: the finalists' interleaved re-timing may pick another
    # correct configuration than the search's fastest.
    assert result.best_objective == expected_best(result)["objective"], (result.finalists, result.results)
    assert result.best_config["BUGGY"] == 0



def test_an_output_that_already_holds_the_result_is_still_found_and_checked(db):
    """A benchmark that computes one product after another allocates each output with
    torch.empty, often on the memory the last product was freed from: the output already
    holds what the kernel writes, so no tensor changes when the reference runs. The kernel's
    outputs are then found by filling each float tensor with NaN in turn, and checked."""
    import torch
    import triton

    torch.manual_seed(0)
    x = torch.randn(1 << 20, device="cuda")
    y = x * 2  # what _scale_kernel computes, already in its output
    with warnings.catch_warnings():
        warnings.simplefilter("error", kerntune.UncheckedOutputsWarning)
        result = kerntune.tune(_scale_kernel, {"x_ptr": x, "y_ptr": y, "n": x.numel()},
                               lambda META: (triton.cdiv(META["n"], META["BLOCK"]),),
                               {"BUGGY": [0, 1], "BLOCK": [256, 1024]}, strategy="brute_force", db=db, progress=False)
    statuses = {(r["config"]["BLOCK"], r["config"]["BUGGY"]): r["status"] for r in result.results}
    assert all(statuses[(b, 1)] == "invalid_output" for b in (256, 1024)), statuses
    assert result.verified and result.best_config["BUGGY"] == 0


def test_configurations_tritons_compiler_rejects_are_skipped_as_references_and_recorded(db):
    """Without an answer, the reference comes from the first configurations that run
    through Triton; one Triton cannot compile (here a static assertion, in Triton's
    tutorial 06 its own pass manager) is skipped there, and the run goes on and records it
    failed with Triton's message."""
    import torch
    import triton

    x = torch.randn(1 << 16, device="cuda")
    y = torch.empty_like(x)
    configs = [triton.Config({"BLOCK": b}) for b in (64, 256, 512, 1024)]
    result = kerntune.tune(_picky_kernel, {"x_ptr": x, "y_ptr": y, "n": x.numel()},
                           lambda META: (triton.cdiv(META["n"], META["BLOCK"]),), configs=configs, db=db, progress=False)
    by_block = {r["config"]["BLOCK"]: r for r in result.results}
    assert by_block[64]["status"] == "compile_failed" and "BLOCK must be at least 128" in by_block[64]["reason"], by_block[64]
    assert result.verified and result.best_config["BLOCK"] != 64


def test_an_automatic_reference_from_configurations_that_disagree_is_refused(db):
    """Without an answer, a wrong configuration among the first that run through Triton
    cannot become the standard: the call raises, naming both configurations."""
    import torch
    import triton

    x = torch.randn(1 << 16, device="cuda")
    y = torch.empty_like(x)
    with pytest.raises(kerntune.ReferenceDisagreementError, match=r"y_ptr of \{BLOCK: 256, BUGGY: 1\} differs from that of \{BLOCK: 256, BUGGY: 0\}.*answer="):
        kerntune.tune(_scale_kernel, {"x_ptr": x, "y_ptr": y, "n": x.numel()}, lambda META: (triton.cdiv(META["n"], META["BLOCK"]),),
                      {"BLOCK": [256, 512], "BUGGY": [0, 1]}, strategy="brute_force", db=db, progress=False)

def test_a_configuration_right_on_the_calls_inputs_only_fails_on_a_shuffled_set(db):
    """A configuration whose output matches on the call's own tensors by accident (here it
    reads x where it should read y, and the call passes y equal to x) passes the first
    check and fails on the next input set, the call's inputs shuffled; a configuration
    given answer= is checked on the call's inputs only."""
    import torch
    import triton

    torch.manual_seed(0)
    x = torch.randn(1 << 16, device="cuda")
    y = x.clone()
    out = torch.empty_like(x)
    call = {"x_ptr": x, "y_ptr": y, "out_ptr": out, "n": x.numel()}
    grid = lambda META: (triton.cdiv(META["n"], META["BLOCK"]),)
    params = {"CHEAT": [0, 1], "BLOCK": [256, 512]}
    result = kerntune.tune(_add_kernel, call, grid, params, strategy="brute_force", db=db, progress=False)
    assert result.verified_sets == 3, result
    rows = {(r["config"]["CHEAT"], r["config"]["BLOCK"]): r for r in result.results}
    for block in (256, 512):
        cheat = rows[(1, block)]
        assert cheat["status"] == "invalid_output" and cheat["verified_sets"] == 1, cheat
        assert cheat["reason"].startswith("on input set 2 of 3"), cheat["reason"]
        right = rows[(0, block)]
        assert right["verified_sets"] == {"ok": 3, "early_stopped": 1}[right["status"]], rows
    answered = kerntune.tune(_add_kernel, call, grid, params, answer={"out_ptr": x + y}, strategy="brute_force",
                             db=db, fresh=True, progress=False)
    assert answered.verified_sets == 1 and answered.failed == 0, answered.results


try:
    import triton
    import triton.language as tl

    @triton.jit
    def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, CHEAT: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        y = tl.load((x_ptr if CHEAT else y_ptr) + offs, mask=offs < n)
        tl.store(out_ptr + offs, x + y, mask=offs < n)

    @triton.jit
    def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, BUGGY: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        y = x * 2.0 + (1.0 if BUGGY else 0.0)
        tl.store(y_ptr + offs, y, mask=offs < n)

    @triton.jit
    def _picky_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK >= 128, "BLOCK must be at least 128")
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)
except ImportError:  # collected without triton: the module's tests are skipped anyway
    pass


def test_autotune_tunes_once_then_a_new_process_reuses_the_store(db, tmp_path):
    script = f"""
import sys, time
sys.path.insert(0, {repr(str(__import__('pathlib').Path(__file__).parents[2] / 'examples' / 'triton'))})
import os
os.environ['KERNTUNE_DB'] = {db!r}
import matmul, kerntune
matmul.matmul_kernel.max_fevals = 12
start = time.time()
matmul.check_autotune(1024)
first = time.time() - start
start = time.time()
matmul.check_autotune(1024)
print('timings', first, time.time() - start)
"""
    path = tmp_path / "autotune_run.py"
    path.write_text(script)
    env = dict(__import__("os").environ, KERNTUNE_DB=db)
    first = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    second = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    print(first.stdout, second.stdout)
    import sqlite3

    rows, last = sqlite3.connect(db).execute("select count(*), max(created) from evaluations").fetchone()
    assert rows == 12, "the second process tuned nothing new"

    retuned = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=dict(env, KERNTUNE_RETUNE="1"), timeout=600)
    assert retuned.returncode == 0, retuned.stderr[-3000:]
    measured_again = sqlite3.connect(db).execute("select count(*) from evaluations where created > ?", (last,)).fetchone()[0]
    assert measured_again == 12, "KERNTUNE_RETUNE=1 measures 12 configurations again"

    untuned_db = str(tmp_path / "untuned.db")
    path.write_text(script.replace(repr(db), repr(untuned_db)))
    untuned = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                             env=dict(env, KERNTUNE_DB=untuned_db, KERNTUNE_NO_TUNE="1"), timeout=600)
    assert untuned.returncode == 0, untuned.stderr[-3000:]
    stored = sqlite3.connect(untuned_db).execute("select count(*) from sqlite_master where name = 'evaluations'").fetchone()[0]
    assert stored == 0 or sqlite3.connect(untuned_db).execute("select count(*) from evaluations").fetchone()[0] == 0


def test_tune_kernel_takes_kernel_tuners_arguments(db):
    import numpy as np

    source = """
extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}"""
    n = np.int32(1 << 22)
    a = np.random.randn(n).astype(np.float32)
    b = np.random.randn(n).astype(np.float32)
    c = np.zeros_like(a)
    results, env = kerntune.tune_kernel("vector_add", source, n, [c, a, b, n], {"block_size_x": [64, 128, 256, 512, 1024]},
                                        answer=[a + b, None, None, None], strategy="brute_force", db=db)
    assert [r["block_size_x"] for r in results] == [64, 128, 256, 512, 1024]
    assert all(r["status"] in ("ok", "early_stopped") and isinstance(r["time"], float) for r in results), results
    fastest = min(results, key=lambda r: r["time"])
    assert env["best_config"]["block_size_x"] == fastest["block_size_x"], (env["best_config"], results)
    assert env["best"]["config"]["block_size_x"] == fastest["block_size_x"], env["best"]


@pytest.mark.parametrize("example, sizes", [
    ("attention", dict(Z=1, H=4, N_CTX=512)),
    ("grouped_gemm", dict()),
    ("conv2d", dict(N=4, H=16, W=16, C=64, K=64)),
])
def test_each_triton_example_tunes_and_verifies(example, sizes, db, monkeypatch):
    monkeypatch.setenv("KERNTUNE_DB", db)
    module = __import__(example)
    result = module.main(**sizes, strategy="random_sample", max_fevals=8)
    assert result.evaluations == 8 and result.verified, result
    check_best_is_the_fastest_verified(result)


def test_num_ctas_launches_clusters_like_triton(db):
    """num_ctas > 1 runs each program on a cluster of CTAs; kerntune's launch must give the
    output Triton's own launch gives."""
    import torch
    import triton

    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    grid = lambda META: (triton.cdiv(META["n"], META["BLOCK"]),)
    _scale_kernel[grid](x, y, x.numel(), BLOCK=1024, BUGGY=0, num_ctas=2)
    if not torch.equal(y, x * 2.0):
        pytest.skip("Triton's own num_ctas=2 launch of this kernel is wrong here")
    result = kerntune.tune(_scale_kernel, {"x_ptr": x, "y_ptr": y, "n": x.numel()}, grid,
                           {"BLOCK": [1024], "BUGGY": [0], "num_ctas": [1, 2]},
                           answer={"y_ptr": x * 2.0}, strategy="brute_force", db=db, progress=False)
    statuses = {r["config"]["num_ctas"]: r["status"] for r in result.results}
    assert set(statuses) == {1, 2} and set(statuses.values()) <= {"ok", "early_stopped"}, result.results
    check_best_is_the_fastest_verified(result)


def test_ctrl_c_keeps_what_was_measured_and_the_next_run_resumes(db, tmp_path):
    import os
    import signal
    import sqlite3

    script = tmp_path / "interrupted.py"
    script.write_text(f"""
import sys
sys.path.insert(0, {os.path.join(os.path.dirname(__file__), '..', '..', 'examples', 'triton')!r})
import torch, kerntune, matmul
a = torch.randn((1024, 1024), device="cuda", dtype=torch.float16)
b = torch.randn((1024, 1024), device="cuda", dtype=torch.float16)
c = torch.empty((1024, 1024), device="cuda", dtype=torch.float16)
result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS,
                       answer={{"c_ptr": torch.matmul(a, b)}}, strategy="random_sample", seed=1,
                       max_fevals=int(sys.argv[1]), db={db!r}, progress=False)
print("from_store", result.from_store, "evaluations", result.evaluations)
""")

    def rows():
        try:
            return sqlite3.connect(db).execute("select count(*) from evaluations").fetchone()[0]
        except sqlite3.Error:
            return 0

    # Ctrl-C in a terminal signals the whole process group: the workers too.
    child = subprocess.Popen([sys.executable, str(script), "30"], start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while rows() < 6 and child.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert child.poll() is None, child.communicate()[1][-3000:]
    os.killpg(child.pid, signal.SIGINT)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode != 0 and "KeyboardInterrupt" in stderr, stderr[-3000:]
    kept = rows()
    assert kept >= 6, kept
    assert kept < 30, "the run ended before the interrupt"
    resumed = subprocess.run([sys.executable, str(script), "30"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"from_store {kept} evaluations 30" in resumed.stdout, resumed.stdout
    assert rows() == 30, "no row lost, none measured twice"


def test_the_tutorial_shaped_script_runs_as_a_file_and_tunes_once(tmp_path):
    """examples/triton/tutorial_matmul.py: top-level code, no main guard, triton.Config
    list; the second run answers from the store."""
    import os
    import pathlib

    script = pathlib.Path(__file__).parents[2] / "examples" / "triton" / "tutorial_matmul.py"
    env = dict(os.environ, KERNTUNE_DB=str(tmp_path / "results.db"))
    runs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
        assert "matches torch" in run.stdout, run.stdout
    print(runs[0].stdout, runs[1].stdout)
    first, second = (float(r.stdout.split("first call (tuning): ")[1].split(" s")[0]) for r in runs)
    assert second < first, "the second process found the answer in the store"


def test_reset_to_zero_buffers_are_zero_before_every_launch(db):
    """A kernel that accumulates with atomics is right only on a zeroed output: with
    reset_to_zero it verifies, and timed launches start from zero too."""
    import torch
    import triton

    torch.manual_seed(0)
    x = torch.randn(1 << 20, device="cuda")
    total = torch.zeros(1, device="cuda")
    tuned = kerntune.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=4) for b in (256, 1024, 4096)], key=["n"],
                              reset_to_zero=["total_ptr"], strategy="brute_force", db=db, progress=False)(_sum_kernel)
    tuned[lambda META: (triton.cdiv(META["n"], META["BLOCK"]),)](x, total, x.numel())
    assert tuned.result.evaluations == 3 and tuned.result.failed == 0, tuned.result.results
    torch.testing.assert_close(total, x.sum().reshape(1), atol=1e-2, rtol=1e-3)
    check_best_is_the_fastest_verified(tuned.result)
    assert tuned.best_config.kwargs["BLOCK"] == tuned.result.best_config["BLOCK"] and tuned.cache


def test_a_run_where_every_configuration_fails_raises_with_the_reason(db):
    import torch
    import triton

    x = torch.randn(1 << 16, device="cuda")
    y = torch.empty_like(x)
    wrong = torch.full_like(x, 7.0)
    with pytest.raises(kerntune.NoValidConfigError, match="elements wrong") as raised:
        kerntune.tune(_scale_kernel, {"x_ptr": x, "y_ptr": y, "n": x.numel()}, lambda META: (triton.cdiv(META["n"], META["BLOCK"]),),
                      {"BLOCK": [64, 128, 256, 512, 1024], "BUGGY": [0]}, answer={"y_ptr": wrong}, strategy="brute_force", db=db,
                      progress=False)
    assert raised.value.result.evaluations == 5 and raised.value.result.failed == 5


def test_hooks_run_around_the_launches_made_in_this_process(db):
    import torch
    import triton

    calls = []
    x = torch.randn(1 << 16, device="cuda")
    y = torch.empty_like(x)
    configs = [triton.Config({"BLOCK": 128, "BUGGY": 0}, pre_hook=lambda nargs: calls.append(("config", nargs["BLOCK"])))]
    tuned = kerntune.autotune(configs=configs, key=["n"], pre_hook=lambda nargs, reset_only=False: calls.append("pre"),
                              post_hook=lambda nargs, exception: calls.append("post"), db=db, progress=False)(_scale_kernel)
    tuned[lambda META: (triton.cdiv(META["n"], META["BLOCK"]),)](x, y, x.numel())
    torch.testing.assert_close(y, x * 2)
    # Around the reference run, its runs on the 2 shuffled input sets, and the launch itself.
    assert calls == [("config", 128), "pre", "post"] * 4, calls


try:
    @triton.jit
    def _sum_kernel(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.atomic_add(total_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))
except NameError:  # collected without triton
    pass

"""Compiler controls of Triton kernels without a GPU: a chosen ptxas (the nvidia-cuda-nvcc
wheel's, ``ptxas="pip"``), ptxas knobs and ACF files as parameters of the space, and
CompileIQ's ask/tell search over ACF files on the compile-only path.

CI installs nvidia-cuda-nvcc 13.3 and compileiq (scripts/test.sh); elsewhere their absence
skips these tests with the reason, and ``KERNTUNE_REQUIRE_PTXAS=1`` (set by .ci/run) makes
it a failure. CompileIQ's ptxas search space is a release asset of CompileIQ's, not on
PyPI: without it (``KERNTUNE_CIQ_SEARCH_SPACE`` names the .bin) the tests that need real
ACF files skip whatever the flag says. Select them with ``pytest -k "acf or compileiq or ptxas"``.
"""

import base64
import os

import pytest

import kerntune
from kerntune import _compileiq, _ptxas
from test_compile import matmul_args

REQUIRED = bool(os.environ.get("KERNTUNE_REQUIRE_PTXAS"))

SOURCE_CONFIG = {"BLOCK_SIZE_M": [64], "BLOCK_SIZE_N": [64], "BLOCK_SIZE_K": [32], "GROUP_SIZE_M": [8],
                 "num_stages": [3], "num_warps": [4]}


def missing(why: str):
    if REQUIRED:
        pytest.fail(f"KERNTUNE_REQUIRE_PTXAS is set: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def pip_ptxas():
    if _ptxas.pip_ptxas() is None:
        missing("the nvidia-cuda-nvcc wheel's ptxas is not installed (pip install 'nvidia-cuda-nvcc==13.3.*')")
    return _ptxas.resolve("pip")


@pytest.fixture(scope="module")
def compileiq():
    why = _compileiq.available()
    if why:
        missing(why)


def local_search_space():
    """CompileIQ's search space as a file here; without one the test skips (never required:
    it is not on PyPI), before CompileIQ would try to download it: tests open no connection."""
    if not os.environ.get(_compileiq.SEARCH_SPACE_ENV):
        pytest.skip(f"CompileIQ's ptxas search space is not on this machine: set {_compileiq.SEARCH_SPACE_ENV} to its "
                    ".bin (the tests never download it)")


@pytest.fixture(scope="module")
def acf_search(compileiq, pip_ptxas, tmp_path_factory):
    local_search_space()
    try:
        return _compileiq.AcfSearch(pip_ptxas["version"], directory=str(tmp_path_factory.mktemp("acf")))
    except _compileiq.CompileIQUnavailable as error:
        pytest.skip(str(error))  # not on PyPI: never required


def compile_matmul(params, **options):
    import matmul

    return kerntune.compile(matmul.matmul_kernel, matmul_args(), {**SOURCE_CONFIG, **params}, compile_workers=2, **options)


def test_ptxas_resolution_errors_are_one_line(tmp_path):
    with pytest.raises(kerntune.SpecError, match=r"no-such-ptxas: no such file$"):
        _ptxas.resolve(str(tmp_path / "no-such-ptxas"))
    with pytest.raises(kerntune.SpecError, match="did not answer as ptxas does"):
        _ptxas.resolve("true")
    with pytest.raises(kerntune.SpecError, match="no-such-ptxas"):
        compile_matmul({}, ptxas=str(tmp_path / "no-such-ptxas"))


def test_ptxas_knobs_reach_the_chosen_ptxas_and_change_the_cubin(pip_ptxas):
    assert pip_ptxas["version"].startswith("13.3"), pip_ptxas
    outcomes = compile_matmul({"opt_level": [3, 0]}, ptxas="pip")
    assert [o["status"] for o in outcomes] == ["compiled", "compiled"], outcomes
    optimised, unoptimised = (base64.b64decode(o["cubin"]) for o in outcomes)
    assert optimised != unoptimised, "-O0 reached ptxas"


def test_an_acf_this_ptxas_rejects_fails_its_configuration_naming_both_versions(pip_ptxas, tmp_path):
    edited = tmp_path / "edited.acf"  # an ACF whose bytes (its version field among them) were edited
    edited.write_bytes(bytes([0x13, 0x03, 0xFF, 0x00]) * 64)
    outcomes = compile_matmul({"acf": ["none", str(edited)]}, ptxas="pip")
    assert [o["status"] for o in outcomes] == ["compiled", "compile_failed"], outcomes
    reason = outcomes[1]["reason"]
    assert "Invalid compiler controls file" in reason, reason
    assert "edited.acf (its version cannot be read)" in reason and f"ptxas {pip_ptxas['version'][:4]}" in reason, reason


def test_acf_files_need_a_ptxas_that_reads_them(tmp_path):
    acf = tmp_path / "tuned.acf"
    acf.write_bytes(b"x")
    with pytest.raises(kerntune.SpecError, match="ptxas 13.3 or newer"):
        compile_matmul({"acf": [str(acf)]})


def test_compileiq_acfs_give_the_triton_kernel_different_cubins(acf_search):
    paths = [path for _, path in acf_search.ask()[:2]]
    outcomes = compile_matmul({"acf": ["none", *paths]}, ptxas="pip")
    assert [o["status"] for o in outcomes] == ["compiled"] * 3, outcomes
    assert len({o["cubin"] for o in outcomes}) == 3, "each ACF makes its own binary"


def test_the_compileiq_search_runs_its_ask_tell_loop_on_the_compile_only_path(compileiq, pip_ptxas, tmp_path):
    """Each generation is compiled for real; a fake timer stands in for the GPU: a cubin's
    time is its size, so the search has something to minimise, and it can be checked."""
    local_search_space()
    try:
        _compileiq.search_space(pip_ptxas["version"])
    except _compileiq.CompileIQUnavailable as error:
        pytest.skip(str(error))
    sizes = {}

    def evaluate(paths):
        outcomes = compile_matmul({"acf": paths}, ptxas="pip")
        by_acf = {o["config"]["acf"]: o for o in outcomes}
        times = []
        for path in paths:
            outcome = by_acf[path]
            if outcome["status"] != "compiled":
                times.append((None, outcome["reason"]))
                continue
            sizes[path] = len(base64.b64decode(outcome["cubin"]))
            times.append((float(sizes[path]), None))
        return times

    report = _compileiq.search_controls(evaluate, 8, pip_ptxas["version"], directory=str(tmp_path))
    assert report["evaluations"] == 8 and report["generations"] == 2, report
    assert report["failed"] == 8 - len(sizes), report
    assert report["best_ms"] == min(sizes.values()) and sizes[report["best_acf"]] == report["best_ms"], report


def test_an_acf_is_kept_only_when_it_beats_the_aa_control_whichever_led_the_search():
    from kerntune._controls import acf_wins, times_of

    def finalists(leader_acf, verdict):
        other = "none" if leader_acf != "none" else "a.acf"
        return {"configs": [{"acf": leader_acf}, {"acf": other}], "report": {"verdict": verdict}}

    assert acf_wins(finalists("a.acf", "lead_holds"), "a.acf")
    assert not acf_wins(finalists("a.acf", "tie"), "a.acf"), "a tie keeps the configuration without an ACF"
    assert not acf_wins(finalists("a.acf", "overtaken"), "a.acf")
    assert acf_wins(finalists("none", "overtaken"), "a.acf")
    assert not acf_wins(finalists("none", "lead_holds"), "a.acf")
    assert not acf_wins(None, "a.acf")
    rows = [{"config": {"acf": "a"}, "status": "ok", "time_ms": 0.5, "reason": None},
            {"config": {"acf": "b"}, "status": "compile_failed", "time_ms": None, "reason": "Invalid compiler controls file"}]
    assert times_of(rows, "acf", ["b", "a", "c"]) == [(None, "compile_failed: Invalid compiler controls file"), (0.5, None),
                                                       (None, "c: no result")]


def test_autotune_refuses_acf_and_ptxas_knobs_it_could_not_launch_with():
    import matmul

    with pytest.raises(kerntune.SpecError, match="applies no compiler controls \\(acf, opt_level\\)"):
        kerntune.autotune(key=["M"], params={**SOURCE_CONFIG, "acf": ["none"], "opt_level": [3, 1]})(matmul.matmul_kernel.fn)


# `python -m kerntune.controls SPEC`: CompileIQ's stage for CUDA C specs, through the CLI. A
# fake CLI (which records each spec it is given and times a candidate by its ACF's name) and
# a fake CompileIQ search stand in for the GPU and for NVIDIA's package; what is checked is
# the stage's own work: the derived specs, the generations, the A/B and the verdict.

FAKE_CLI = r'''#!/usr/bin/env python3
import json, os, sys, tomllib
spec = sys.argv[2]
with open(spec, "rb") as f:
    document = tomllib.load(f)
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps({"argv": sys.argv[3:], "spec": document}) + "\n")
acfs = document.get("compiler", {}).get("controls", {}).get("acf")
if acfs is None:  # the source search
    best = {"config": {"block_size_x": 32, "tile": 2}, "time_ms": 1.0}
    print(json.dumps({"best": best, "results": [{**best, "status": "ok"}], "finalists": None}))
    sys.exit(0)
def time_of(acf):
    return 1.0 if acf == "none" else float(os.path.basename(acf).split("-")[0]) / 100
rows = [{"config": {"block_size_x": 32, "tile": 2, "acf": a}, "status": "ok", "time_ms": time_of(a)} for a in acfs]
finalists = None
if "--finalists" in sys.argv and sys.argv[sys.argv.index("--finalists") + 1] == "2":
    leader, contender = sorted(acfs, key=time_of)
    verdict = "lead_holds" if time_of(leader) < 0.97 else "tie"
    finalists = {"configs": [{"acf": leader}, {"acf": contender}], "report": {"verdict": verdict}}
print(json.dumps({"best": rows[0], "results": rows, "finalists": finalists}))
'''

SPEC = '''restrictions = ["block_size_x * tile <= 1024"]

[kernel]
name = "scale"
source = "scale.cu"

[problem]
n = 4096

[params]
block_size_x = [32, 64]
tile = [1, 2]

[[args]]
name = "x"
dtype = "f32"
size = "n"
init = "normal"
output = true

[verify]
reference = { config = { block_size_x = 32, tile = 1 } }
atol = 1e-6

[compiler]
ptxas = "pip"
'''


@pytest.fixture()
def controls_spec(tmp_path, monkeypatch):
    """A spec, a fake CLI, and a fake CompileIQ whose candidates are named by their time
    (``96-a.acf`` takes 0.96 ms against the baseline's 1 ms)."""
    from kerntune import controls

    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "scale.cu").write_text("// the kernel\n")
    spec = tmp_path / "spec" / "spec.toml"
    spec.write_text(SPEC)
    cli = tmp_path / "kerntune"
    cli.write_text(FAKE_CLI)
    cli.chmod(0o755)
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setattr(controls._ptxas, "resolve", lambda choice: {"path": "/ptxas", "version": "13.3.73"})
    monkeypatch.setattr(controls._compileiq, "available", lambda: None)
    return controls, spec, cli, log


def fake_search(names):
    def search_controls(evaluate, budget, version):
        assert version == "13.3.73"
        times = evaluate(names)
        best = min((t, n) for n, (t, _) in zip(names, times))
        return {"evaluations": len(names), "generations": 1, "failed": 0, "best_acf": best[1], "best_ms": best[0]}
    return search_controls


def test_compileiq_for_a_spec_fixes_the_best_configuration_and_keeps_an_acf_that_wins(controls_spec, monkeypatch):
    import json
    import tomllib

    controls, spec, cli, log = controls_spec
    monkeypatch.setattr(controls._compileiq, "search_controls", fake_search(["99-a.acf", "95-b.acf"]))
    report = controls.tune_spec(str(spec), budget=2, kerntune=str(cli))
    assert report["best"]["config"] == {"block_size_x": 32, "tile": 2}
    assert report["controls"]["best_acf"] == "95-b.acf" and report["controls"]["kept"], report
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 3, calls  # the source search, one generation, the A/B
    generation, ab = calls[1], calls[2]
    # Every parameter fixed to the best configuration, the rest of the spec as written.
    assert generation["spec"]["params"] == {"block_size_x": [32], "tile": [2]}
    assert generation["spec"]["compiler"] == {"ptxas": "pip", "controls": {"acf": ["99-a.acf", "95-b.acf"]}}
    original = tomllib.loads(SPEC)
    for key in ("restrictions", "kernel", "problem", "args", "verify"):
        assert generation["spec"][key] == original[key], key
    assert ab["spec"]["compiler"]["controls"]["acf"] == ["none", "95-b.acf"]
    assert ab["argv"][ab["argv"].index("--finalists") + 1] == "2"


def test_compileiq_for_a_spec_keeps_no_acf_when_the_ab_ties(controls_spec, monkeypatch):
    controls, spec, cli, _ = controls_spec
    monkeypatch.setattr(controls._compileiq, "search_controls", fake_search(["99-a.acf"]))
    report = controls.tune_spec(str(spec), budget=1, kerntune=str(cli))
    assert report["controls"]["best_acf"] == "99-a.acf" and not report["controls"]["kept"], report


def test_compileiq_for_a_spec_without_a_chosen_ptxas_is_refused_in_one_line(controls_spec, tmp_path):
    controls, spec, cli, _ = controls_spec
    spec.write_text(SPEC.replace('[compiler]\nptxas = "pip"\n', ""))
    with pytest.raises(kerntune.ArgumentError, match=r"name it in \[compiler\] ptxas"):
        controls.tune_spec(str(spec), kerntune=str(cli))
    assert controls.main([str(spec), "--kerntune", str(cli)]) == 2


def test_compileiq_for_a_spec_needs_the_kerntune_cli(controls_spec, tmp_path, monkeypatch):
    controls, spec, _, _ = controls_spec
    monkeypatch.delenv("KERNTUNE_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(kerntune.ArgumentError, match="kerntune CLI was not found"):
        controls.tune_spec(str(spec))

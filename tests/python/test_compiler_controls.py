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


def test_compileiq_learns_from_compiled_generations_on_the_compile_only_path(acf_search):
    """Two generations compiled for real and told back; a fake timer stands in for the GPU:
    a cubin's time is its size, and a failed compile is CompileIQ's failure."""
    for _ in range(2):
        asked = acf_search.ask()
        outcomes = compile_matmul({"acf": [path for _, path in asked]}, ptxas="pip")
        by_acf = {o["config"]["acf"]: o for o in outcomes}
        times = {key: float(len(base64.b64decode(by_acf[path]["cubin"]))) if by_acf[path]["status"] == "compiled"
                 else None for key, path in asked}
        assert acf_search.tell(times) == len(asked)


def test_autotune_refuses_acf_and_ptxas_knobs_it_could_not_launch_with():
    import matmul

    with pytest.raises(kerntune.SpecError, match="applies no compiler controls \\(acf, opt_level\\)"):
        kerntune.autotune(key=["M"], params={**SOURCE_CONFIG, "acf": ["none"], "opt_level": [3, 1]})(matmul.matmul_kernel.fn)


# The CompileIQ worker that the run's compiler-controls stage starts once for a whole search
# (`python -m kerntune._worker __worker controls`), with the fake CompileIQ of
# fake_compileiq/ in place of NVIDIA's: it logs each ask and tell with its process id.

FAKE_COMPILEIQ = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_compileiq")


def controls_worker(tmp_path, search_space):
    import subprocess
    import sys

    # The fake CompileIQ first, then wherever this kerntune was found (an install on PYTHONPATH).
    path = os.pathsep.join(p for p in (FAKE_COMPILEIQ, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "FAKE_COMPILEIQ_LOG": str(tmp_path / "log"),
           _compileiq.SEARCH_SPACE_ENV: str(search_space)}
    argv = [sys.executable, "-m", "kerntune._worker", "__worker", "controls", "--ptxas-version", "13.3.73",
            "--pool-size", "6"]
    return subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_the_compileiq_worker_proposes_generations_and_passes_their_times_to_compileiq(tmp_path):
    import json

    space = tmp_path / "ptxas13.3.bin"
    space.write_bytes(b"search space")
    worker = controls_worker(tmp_path, space)

    def request(message):
        worker.stdin.write(json.dumps(message) + "\n")
        worker.stdin.flush()
        return json.loads(worker.stdout.readline())

    ready = json.loads(worker.stdout.readline())
    assert ready["type"] == "ready", ready
    first = request({"type": "ask"})
    assert [c["id"] for c in first["candidates"]] == [str(n) for n in range(6)], first
    for candidate in first["candidates"]:
        assert os.path.dirname(candidate["path"]) == ready["directory"]
        with open(candidate["path"], "rb") as f:
            assert f.read() == f"acf {candidate['id']}".encode(), "the candidate's bytes, decoded from hex"
    scores = [{"id": "0", "time_ms": 1.5}, {"id": "1", "time_ms": None}]
    assert request({"type": "tell", "scores": scores}) == {"type": "told", "count": 2}
    assert request({"type": "tell", "scores": scores})["type"] == "fatal", "a candidate is told once"
    worker.stdin.close()
    assert worker.wait(timeout=30) == 1
    log = [json.loads(line) for line in (tmp_path / "log").read_text().splitlines()]
    assert [entry["call"] for entry in log] == ["ask", "tell"]
    assert log[1]["scores"] == {"0": 1.5, "1": "*"}, "a failure is CompileIQ's \"*\""
    assert {entry["pid"] for entry in log} == {worker.pid}


def test_the_compileiq_worker_without_its_search_space_says_so_in_one_line(tmp_path):
    worker = controls_worker(tmp_path, tmp_path / "gone.bin")
    out, _ = worker.communicate(timeout=30)
    assert worker.returncode == 1
    assert out.strip() == ('{"type": "fatal", "message": "CompileIQ search space '
                           f'{tmp_path / "gone.bin"}: no such file"}}')

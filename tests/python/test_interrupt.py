"""Ctrl-C in Python (issue 34): every entry point stops within a fraction of a second,
raises ``KeyboardInterrupt`` instead of returning what it has as if it were complete, and
keeps in the store what was done, so that the same call resumes. Each test runs a real
call in a child process, as a user would, and signals it as a terminal does (its whole
process group, compile and benchmark workers included) once the store holds some rows:
compile-only calls here, tuning calls on a GPU (``kerntune.tune``'s own is in
test_gpu.py)."""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "triton")


#: Cubins and failed configurations in the store.
ROWS = "select (select count(*) from artifacts) + (select count(*) from evaluations)"

#: Configurations evaluated in the store.
EVALUATIONS = "select count(*) from evaluations"


def stored_rows(db, query=ROWS) -> int:
    """What ``query`` counts in the store (0 before there is one)."""
    try:
        with contextlib.closing(sqlite3.connect(db)) as connection:
            return connection.execute(query).fetchone()[0]
    except sqlite3.Error:
        return 0


def interrupt_once_stored(script, db, rows=2, timeout=300, query=ROWS):
    """Runs ``script DB``, sends SIGINT to its process group once the store holds ``rows``
    rows (as ``query`` counts them), and returns its exit code, its standard error, the
    seconds from the signal to its exit, and the rows the store keeps."""
    # A Triton cache of its own: compiles another run left in the user's would answer every
    # configuration at once, before the signal.
    environment = {**os.environ, "TRITON_CACHE_DIR": f"{db}.triton-cache"}
    child = subprocess.Popen([sys.executable, str(script), db], start_new_session=True, env=environment,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while stored_rows(db, query) < rows and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert child.poll() is None, f"the call ended before it was interrupted: {child.communicate()[1][-3000:]}"
    signalled = time.monotonic()
    os.killpg(child.pid, signal.SIGINT)
    _, stderr = child.communicate(timeout=120)
    return child.returncode, stderr, time.monotonic() - signalled, stored_rows(db)


def interrupted(script, db, total, rows=2) -> int:
    """Interrupts ``script DB`` once the store holds ``rows`` rows, checks that it raised
    ``KeyboardInterrupt`` at once, before it did all ``total``; returns the rows kept."""
    returncode, stderr, seconds, kept = interrupt_once_stored(script, db, rows)
    # Python ends on an uncaught KeyboardInterrupt by killing itself with SIGINT.
    assert returncode == -signal.SIGINT, (returncode, stderr[-3000:])
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr[-3000:]
    # The call itself stops within about 0.1 s; the rest is the interpreter's exit (Triton
    # and torch unloading, the CUDA context), on a loaded machine.
    assert seconds < 15, f"{seconds:.1f} s from Ctrl-C to the exit"
    assert rows <= kept < total, kept
    return kept


def run_again(script, db):
    """The same call again, to its end: what it printed, as JSON."""
    resumed = subprocess.run([sys.executable, str(script), db], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return json.loads(resumed.stdout)


def interrupt_then_resume(script, db, total) -> list:
    """Interrupts a compile-only call (see ``interrupted``), then runs it again, which must
    answer the rows kept from the store and compile the rest; returns its rows."""
    kept = interrupted(script, db, total)
    rows = run_again(script, db)
    assert len(rows) == total
    assert sum(row["from_store"] for row in rows) == kept, "what was kept is answered, not compiled again"
    assert stored_rows(db) == total, "nothing lost, nothing kept twice"
    return rows


def write_script(tmp_path, body) -> str:
    script = tmp_path / "call.py"
    script.write_text(textwrap.dedent(body))
    return script


def test_ctrl_c_in_kerntune_compile_raises_keeps_the_cubins_and_the_same_call_compiles_only_the_rest(tmp_path):
    pytest.importorskip("triton")
    script = write_script(tmp_path, f"""
        import json, sys
        sys.path.insert(0, {EXAMPLES!r})
        import kerntune, matmul
        from kerntune import Tensor

        size = 1024
        args = dict(a_ptr=Tensor("float16", (size, size)), b_ptr=Tensor("float16", (size, size)),
                    c_ptr=Tensor("float16", (size, size)), M=size, N=size, K=size, stride_am=size, stride_ak=1,
                    stride_bk=size, stride_bn=1, stride_cm=size, stride_cn=1)
        params = {{"BLOCK_SIZE_M": [32, 64, 128], "BLOCK_SIZE_N": [32, 64, 128], "BLOCK_SIZE_K": [32, 64],
                   "GROUP_SIZE_M": [8], "num_stages": [3], "num_warps": [4]}}
        rows = kerntune.compile(matmul.matmul_kernel, args, params, compile_workers=2, db=sys.argv[1])
        print(json.dumps(rows))
    """)
    rows = interrupt_then_resume(script, str(tmp_path / "cubins.db"), 18)
    assert all(row["seconds"] == 0 for row in rows if row["from_store"])
    # A cubin from the store is as usable as one compiled now.
    compiled = [row for row in rows if row["status"] == "compiled"]
    assert compiled and all(row["cubin"] and row["launch"]["name"] == "matmul_kernel" for row in compiled), rows


def test_ctrl_c_in_tune_kernel_compile_only_raises_keeps_the_cubins_and_the_same_call_compiles_only_the_rest(tmp_path):
    script = write_script(tmp_path, """
        import json, sys
        import numpy as np
        import kerntune

        SOURCE = '''
        __global__ void scale(float *x, int n) {
            int i = (blockIdx.x * block_size_x + threadIdx.x) * items;
            #pragma unroll
            for (int k = 0; k < items; k++) if (i + k < n) x[i + k] = x[i + k] * 2.0f + k;
        }
        '''
        n = 1 << 16
        params = {"block_size_x": [32, 64, 128, 256, 512, 1024], "items": list(range(1, 11))}
        rows, env = kerntune.tune_kernel("scale", SOURCE, n, [np.zeros(n, np.float32), np.int32(n)], params,
                                         grid_div_x=["block_size_x", "items"], compile_only=True, arch="sm_90",
                                         db=sys.argv[1], parallel=2)
        print(json.dumps(rows))
    """)
    rows = interrupt_then_resume(script, str(tmp_path / "cubins.db"), 60)
    assert all(row["status"] == "compiled" for row in rows), rows


@pytest.mark.gpu
def test_ctrl_c_in_the_first_call_of_an_autotuned_kernel_raises_keeps_the_measurements_and_the_next_run_resumes(tmp_path):
    script = write_script(tmp_path, f"""
        import json, sys
        sys.path.insert(0, {EXAMPLES!r})
        import torch, kerntune, matmul

        kernel = kerntune.autotune(params=matmul.PARAMS, key=["M", "N", "K"], strategy="random_sample", seed=1,
                                   max_fevals=30, db=sys.argv[1], progress=False)(matmul.matmul_kernel.jit)
        a = torch.randn((1024, 1024), device="cuda", dtype=torch.float16)
        b = torch.randn((1024, 1024), device="cuda", dtype=torch.float16)
        c = torch.empty((1024, 1024), device="cuda", dtype=torch.float16)
        kernel[matmul.grid](**matmul.arguments(a, b, c))
        torch.testing.assert_close(c, torch.matmul(a, b), atol=1e-2, rtol=1e-2)
        print(json.dumps({{"from_store": kernel.result.from_store, "evaluations": kernel.result.evaluations}}))
    """)
    db = str(tmp_path / "results.db")
    kept = interrupted(script, db, 30, rows=6)
    assert run_again(script, db) == {"from_store": kept, "evaluations": 30}


@pytest.mark.gpu
def test_ctrl_c_in_tune_kernel_raises_keeps_the_measurements_and_the_same_call_resumes(tmp_path):
    script = write_script(tmp_path, '''
        import json, sys
        import numpy as np
        import kerntune

        # Milliseconds a launch, so that measuring the 60 configurations takes a while.
        SOURCE = """
        __global__ void spin(float *x, int n, int rounds) {
            int i = blockIdx.x * block_size_x + threadIdx.x;
            if (i >= n) return;
            float v = x[i];
            for (int r = 0; r < rounds * items; r++) v = v * 0.999f + 1.0f;
            x[i] = v;
        }
        """
        n = 1 << 20
        params = {"block_size_x": [32, 64, 128, 256, 512, 1024], "items": list(range(1, 11))}
        results, env = kerntune.tune_kernel("spin", SOURCE, n, [np.zeros(n, np.float32), np.int32(n), np.int32(20000)],
                                            params, db=sys.argv[1], parallel=2, quiet=True)
        print(json.dumps({"from_store": env["from_store"], "evaluations": env["evaluations"]}))
    ''')
    db = str(tmp_path / "results.db")
    kept = interrupted(script, db, 60, rows=6)
    assert run_again(script, db) == {"from_store": kept, "evaluations": 60}


@pytest.mark.gpu
def test_ctrl_c_while_the_finalists_are_timed_again_raises_and_the_same_call_answers_from_the_store(tmp_path):
    script = write_script(tmp_path, '''
        import json, sys
        import torch, triton, triton.language as tl
        import kerntune

        @triton.jit
        def spin(x_ptr, n, rounds, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offsets < n
            v = tl.load(x_ptr + offsets, mask=mask)
            for _ in range(rounds):
                v = v * 0.999 + 1.0
            tl.store(x_ptr + offsets, v, mask=mask)

        # Equal work in every configuration, milliseconds a launch: every one is a finalist
        # and timing them again, interleaved, takes seconds.
        x = torch.zeros(1 << 20, device="cuda")
        result = kerntune.tune(spin, {"x_ptr": x, "n": x.numel(), "rounds": 20000},
                               grid=lambda c: (triton.cdiv(1 << 20, c["BLOCK"]),),
                               params={"BLOCK": [128, 256, 512, 1024], "num_warps": [4, 8]}, db=sys.argv[1],
                               restore_value=["x_ptr"], progress=False, finalists=8, finalists_within=10.0)
        print(json.dumps({"from_store": result.from_store, "evaluations": result.evaluations}))
    ''')
    db = str(tmp_path / "results.db")
    # Every configuration evaluated and the call still going: it is timing the finalists.
    returncode, stderr, _, _ = interrupt_once_stored(script, db, rows=8, query=EVALUATIONS)
    assert returncode == -signal.SIGINT and stderr.rstrip().endswith("KeyboardInterrupt"), stderr[-3000:]
    assert run_again(script, db) == {"from_store": 8, "evaluations": 8}

"""The first call of a 16-configuration tutorial-style matmul (fp16, 4096^3), tuned by
``@triton.autotune`` and by ``@kerntune.autotune`` with the same arguments (only the
decorator's module differs), on one GPU.

Each measurement is a fresh Python process with a fresh Triton cache (and, for kerntune, a
fresh store), so both pay every compile: that is a user's first run. Rounds alternate which
of the two goes first; the ratio kerntune / Triton is taken per round and its median and
range reported. Afterwards the two chosen configurations are timed in one process, through
the same launcher (Triton's, ``do_bench``), interleaved, to say whether kerntune's pick is
as fast as Triton's (target: first call under half of Triton's, same speed of the pick).

    python bench/triton_autotune.py [ROUNDS]        # default 3; prints a table last

COMPILE_WORKERS sets kerntune's compile workers (default: one per core).

Exits non-zero if a run fails or computes a wrong product.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

SIZE = int(os.environ.get("SIZE", "4096"))
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "triton")
# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_stages, num_warps), GROUP_SIZE_M = 8: the 16
# configurations of examples/triton/tutorial_matmul.py.
ROWS = [
    (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
    (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (256, 64, 128, 4, 4), (64, 256, 128, 4, 4),
    (128, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 32, 64, 4, 4),
]
# The kernel: the body of examples/triton/matmul.py's matmul_kernel, jitted anew.
KERNEL = r'''
import sys
import triton
sys.path.insert(0, EXAMPLES)
import matmul
body = matmul.matmul_kernel.jit.fn
'''

# One process: build the kernel under the named autotuner, call it once, report.
ONE_RUN = r'''
import json, time
import torch
import kerntune
CONFIGS = [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8}, num_stages=s, num_warps=w)
           for m, n, k, s, w in ROWS]

autotune = triton.autotune if WHICH == "triton" else kerntune.autotune
options = {} if WHICH == "triton" or not WORKERS else {"compile_workers": int(WORKERS)}
kernel = autotune(configs=CONFIGS, key=["M", "N", "K"], **options)(triton.jit(body))
torch.manual_seed(0)
a = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
b = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
c = torch.empty((SIZE, SIZE), device="cuda", dtype=torch.float16)
grid = lambda META: (triton.cdiv(SIZE, META["BLOCK_SIZE_M"]) * triton.cdiv(SIZE, META["BLOCK_SIZE_N"]),)
torch.cuda.synchronize()
start = time.perf_counter()
kernel[grid](a, b, c, SIZE, SIZE, SIZE, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
torch.cuda.synchronize()
first = time.perf_counter() - start
torch.testing.assert_close(c, torch.matmul(a, b), atol=1e-2, rtol=1e-2)
best = kernel.best_config
detail = {} if WHICH == "triton" else {"phases": kernel.result.phases, "costs": kernel.result.costs, "search_wall_s": kernel.result.wall_s,
                                         "first_result_s": kernel.result.trace[0]["elapsed_s"], "statuses": [r["status"] for r in kernel.result.results]}
print("RESULT " + json.dumps({"first_call_s": first, "best": {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}, **detail}))
'''

# One process: time two configurations through Triton's launcher, interleaved.
COMPARE = r'''
import json
import torch
kernel = triton.jit(body)
torch.manual_seed(0)
a = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
b = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
c = torch.empty((SIZE, SIZE), device="cuda", dtype=torch.float16)
def launcher(config):
    grid = (triton.cdiv(SIZE, config["BLOCK_SIZE_M"]) * triton.cdiv(SIZE, config["BLOCK_SIZE_N"]),)
    return lambda: kernel[grid](a, b, c, SIZE, SIZE, SIZE, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), **config)
first, second = (launcher(c) for c in CONFIGS_TO_COMPARE)
ratios = []
for round in range(12):
    pair = [first, second] if round % 2 == 0 else [second, first]
    times = [triton.testing.do_bench(f, return_mode="median") for f in pair]
    if round % 2:
        times.reverse()
    ratios.append(times[0] / times[1])
print("RESULT " + json.dumps({"ratios": ratios}))
'''


def run_python(code: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-2000:] + out.stderr[-4000:])
        raise SystemExit(f"a run failed (exit {out.returncode})")
    line = next(l for l in out.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def fresh_env() -> dict:
    cache = tempfile.mkdtemp(prefix="triton-cache-")
    return dict(os.environ, TRITON_CACHE_DIR=cache, KERNTUNE_DB=os.path.join(cache, "results.db"))


def first_call(which: str) -> dict:
    workers = os.environ.get("COMPILE_WORKERS", "")
    code = f"EXAMPLES = {EXAMPLES!r}; ROWS = {ROWS!r}; WHICH = {which!r}; SIZE = {SIZE}; WORKERS = {workers!r}\n" + KERNEL + ONE_RUN
    return run_python(code, fresh_env())


def main(rounds: int) -> None:
    runs = {"triton": [], "kerntune": []}
    ratios = []
    for round in range(rounds):
        order = ["triton", "kerntune"] if round % 2 == 0 else ["kerntune", "triton"]
        now = {which: first_call(which) for which in order}
        for which in order:
            runs[which].append(now[which])
            detail = {k: v for k, v in now[which].items() if k not in ("first_call_s", "best")}
            print(f"round {round + 1} {which}: first call {now[which]['first_call_s']:.2f} s, best {now[which]['best']} {detail or ''}", flush=True)
        ratios.append(now["kerntune"]["first_call_s"] / now["triton"]["first_call_s"])
    picks = [runs["kerntune"][-1]["best"], runs["triton"][-1]["best"]]
    same = picks[0] == picks[1]
    code = f"EXAMPLES = {EXAMPLES!r}; SIZE = {SIZE}; CONFIGS_TO_COMPARE = {picks!r}\n" + KERNEL + COMPARE
    speed = run_python(code, dict(os.environ)) if not same else {"ratios": [1.0]}
    print("\n=== triton_autotune summary")
    print(f"16 configs, fp16 {SIZE}^3, {rounds} rounds, each run a fresh process and Triton cache")
    for which in ("triton", "kerntune"):
        times = [r["first_call_s"] for r in runs[which]]
        print(f"{which:>9} first call: median {statistics.median(times):.2f} s (range {min(times):.2f}-{max(times):.2f})")
    print(f"kerntune / triton first call: median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); target < 0.5")
    r = speed["ratios"]
    verdict = "the same configuration" if same else f"kerntune's pick / Triton's pick, do_bench interleaved: median {statistics.median(r):.3f} (range {min(r):.3f}-{max(r):.3f})"
    print(f"picks: kerntune {picks[0]}, triton {picks[1]}: {verdict}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)

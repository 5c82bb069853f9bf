"""The order a first batch comes back in on the GPU, against the order the simulation tells it
back in: on the pipeline as users run it (default timing, compile workers and early stop), is
a batch's first outcome back a poor kernel, as the recorded H100 landscapes say?

For seeds 0..RUNS-1, `random_sample` evaluates 16 configurations of bench/record_landscapes.py's
2,400 at one recorded shape (default square2048, a fitting landscape), all 16 asked at once, a
fresh store and Triton cache each. `result.results` lists them in the order they were told
back. Each successful configuration is then scored by the committed landscape of that shape
(optimum / recorded time, so every run is judged by one measurement), and the mean of the
first four back is set beside that of the last four; the same 16 ordered by their recorded
cost, as `kerntune simulate --batch 16` orders them, give the simulation's figures. A table
last.

    python3 bench/first_batch_order.py           # on the GPU machine, after gpu/check.sh installs kerntune
Env: SHAPE (default square2048), RUNS (default 12), OUT.
"""

import glob
import json
import os
import tempfile
from statistics import mean

import torch

from completion_order import first_and_last, load
from record_landscapes import PARAMS, SHAPES
from triton_matmul import OUT, fresh_triton_cache, matmul  # also puts examples/triton on the path

import kerntune

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def recorded(shape):
    """The committed landscape of `shape` (bench/completion_order.py's `load`)."""
    [path] = glob.glob(os.path.join(ROOT, "data", "landscapes", "h100", "*", f"matmul_{shape}_*.json.gz"))
    return load(path)


def main():
    shape = os.environ.get("SHAPE", "square2048")
    M, N, K = SHAPES[shape][0]
    table = recorded(shape)
    best = min(t for t, _ in table.values() if t is not None)
    torch.manual_seed(0)
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((K, N), device="cuda", dtype=torch.float16)
    c = torch.empty((M, N), device="cuda", dtype=torch.float16)
    answer = torch.matmul(a, b)
    workdir = tempfile.mkdtemp(prefix="kerntune-first-batch-")
    gpu, sim = [], []
    for seed in range(int(os.environ.get("RUNS", "12"))):
        fresh_triton_cache()
        result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, PARAMS,
                               answer={"c_ptr": answer}, strategy="random_sample", max_fevals=16, seed=seed,
                               db=os.path.join(workdir, f"{seed}.db"), progress=False, finalists=1)
        keys = [",".join(str(r["config"][p]) for p in PARAMS) for r in result.results]
        quality = {k: (best / table[k][0] if table[k][0] else None) for k in keys}
        told = first_and_last([quality[k] for k in keys])
        simulated = first_and_last([quality[k] for k in sorted(keys, key=lambda k: table[k][1])])
        statuses = [r["status"] for r in result.results]
        print(f"seed {seed}: told back {told}, simulated {simulated}, statuses in order {statuses}", flush=True)
        if told and simulated:
            gpu.append(told)
            sim.append(simulated)
    rows = dict(shape=shape, runs=len(gpu), gpu_first4=mean(f for f, _ in gpu), gpu_last4=mean(l for _, l in gpu),
                sim_first4=mean(f for f, _ in sim), sim_last4=mean(l for _, l in sim))
    with open(os.path.join(OUT, "first_batch_order.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("\n=== first batch order")
    print(f"{shape}, {rows['runs']} first batches of 16 (random_sample, seeds 0..), mean optimum / recorded time of the successes:")
    print(f"  told back on the GPU: first four {rows['gpu_first4']:.3f}, last four {rows['gpu_last4']:.3f}")
    print(f"  ordered as simulated: first four {rows['sim_first4']:.3f}, last four {rows['sim_last4']:.3f}")


if __name__ == "__main__":
    main()

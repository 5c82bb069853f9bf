"""What a many-shape run saves: Triton's tutorial matmul (examples/triton/matmul.py) over the
2400 configurations of bench/record_landscapes.py, at five batch sizes of one projection
(M = 16, 64, 256, 1024, 4096; N = K = 4096; fp16), tuned three ways in one call:

- ``learning``: one ``kerntune.tune(..., shapes=...)`` run, each size learning from the
  nearest size tuned before it, ``BUDGET`` evaluations a size;
- ``alone``: the same with ``share=False``, each size on its own, ``BUDGET`` evaluations;
- ``alone_x3``: each size on its own with three times the budget.

Each way starts from an empty results store and an empty Triton cache. Then each size's
three winners are timed again, interleaved (``ROUNDS`` rounds in a rotating order, Triton's
``do_bench`` each), and the per-round ratios of their times are reported: median and range.
A ratio below 1 means the first kernel is faster.

    python3 bench/shapes.py            # BUDGET (default 20), ROUNDS (default 9), SEED (0)
    python3 bench/shapes.py scale      # on a host with several GPUs: see below

``scale`` runs one many-shape brute force (M = 64, 1024, 4096 over the 600 configurations
with BLOCK_SIZE_K in {32, 64} and GROUP_SIZE_M = 8) on one GPU, then on every GPU of the
host (``devices="all"``), each from an empty store and Triton cache, and prints the wall
times, their ratio, and per size both runs' best configurations with their times re-timed
interleaved (the same answer, up to configurations within noise of each other).

Prints one JSON line per way and size, then a table. Exits non-zero if a way found no
configuration at some size.
"""

import json
import os
import statistics
import sys
import time

import torch
import triton

from triton_matmul import fresh_triton_cache, matmul  # also puts examples/triton on the path

import kerntune
from record_landscapes import PARAMS

SIZES = [16, 64, 256, 1024, 4096]
N = K = 4096


def make(M):
    torch.manual_seed(M)
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((K, N), device="cuda", dtype=torch.float16)
    c = torch.empty((M, N), device="cuda", dtype=torch.float16)
    return a, b, c


def answer(M):
    a, b, _ = make(M)
    return {"c_ptr": torch.matmul(a, b)}


def way(name, budget, share, seed, workdir):
    fresh_triton_cache()
    start = time.perf_counter()
    results = kerntune.tune(matmul.matmul_kernel, lambda M: matmul.arguments(*make(M)), matmul.grid, PARAMS,
                            shapes=[{"M": m} for m in SIZES], share=share, answer=answer, max_fevals=budget,
                            seed=seed, db=os.path.join(workdir, f"{name}.db"), progress=False)
    wall = time.perf_counter() - start
    print(f"\n=== {name}: {wall:.1f} s\n{results.summary()}", flush=True)
    for row in results.rows:
        print(json.dumps({"way": name, **row}), flush=True)
    return results, wall


def kernel_time(config, args):
    return triton.testing.do_bench(lambda: matmul.matmul_kernel.jit[matmul.grid](**args, **config), rep=50,
                                   return_mode="median")


def main():
    budget = int(os.environ.get("BUDGET", "20"))
    rounds = int(os.environ.get("ROUNDS", "9"))
    seed = int(os.environ.get("SEED", "0"))
    workdir = os.environ.get("OUT", "/tmp")
    ways = {}
    for name, times, share in (("learning", 1, True), ("alone", 1, False), ("alone_x3", 3, False)):
        ways[name] = way(name, budget * times, share, seed, workdir)
    failed = [(n, m) for n, (r, _) in ways.items() for m in SIZES if r[m].best_config is None]
    if failed:
        raise SystemExit(f"no configuration found: {failed}")
    print("\n=== shapes: per size, the kernels' times re-timed interleaved "
          f"({rounds} rounds), ratios median [min, max]", flush=True)
    names = list(ways)
    table = []
    for M in SIZES:
        samples = {n: [] for n in names}
        args = matmul.arguments(*make(M))
        for r in range(rounds):
            for n in names[r % len(names):] + names[:r % len(names)]:
                samples[n].append(kernel_time(ways[n][0][M].best_config, args))

        def ratio(x, y):
            values = [p / q for p, q in zip(samples[x], samples[y])]
            return statistics.median(values), min(values), max(values)

        row = {"M": M, "ms": {n: statistics.median(samples[n]) for n in names},
               "learning/alone": ratio("learning", "alone"), "learning/alone_x3": ratio("learning", "alone_x3"),
               "found_at": {n: ways[n][0][M].shape["found_at"] for n in names}}
        print(json.dumps(row), flush=True)
        table.append(row)
    print(f"\n=== shapes summary (budget {budget} a size, x3 for alone_x3; seed {seed}; {torch.cuda.get_device_name()})")
    print("wall s: " + ", ".join(f"{n} {ways[n][1]:.1f}" for n in names))
    print(f"{'M':>6} {'learning ms':>12} {'alone ms':>10} {'alone_x3 ms':>12} {'learn/alone':>22} {'learn/alone_x3':>22}")
    for row in table:
        fmt = lambda r: f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"  # noqa: E731
        print(f"{row['M']:>6} {row['ms']['learning']:>12.4f} {row['ms']['alone']:>10.4f} {row['ms']['alone_x3']:>12.4f} "
              f"{fmt(row['learning/alone']):>22} {fmt(row['learning/alone_x3']):>22}")


def scale():
    rounds = int(os.environ.get("ROUNDS", "9"))
    workdir = os.environ.get("OUT", "/tmp")
    params = {**PARAMS, "BLOCK_SIZE_K": [32, 64], "GROUP_SIZE_M": [8]}
    sizes = [64, 1024, 4096]
    gpus = torch.cuda.device_count()
    runs = {}
    for name, devices in (("1 GPU", [0]), (f"{gpus} GPUs", "all")):
        fresh_triton_cache()
        start = time.perf_counter()
        results = kerntune.tune(matmul.matmul_kernel, lambda M: matmul.arguments(*make(M)), matmul.grid, params,
                                shapes=[{"M": m} for m in sizes], answer=answer, strategy="brute_force",
                                devices=devices, db=os.path.join(workdir, f"scale-{len(runs)}.db"), progress=False)
        runs[name] = (results, time.perf_counter() - start)
        print(f"\n=== {name}: {runs[name][1]:.1f} s\n{results.summary()}", flush=True)
    (one, one_s), (many, many_s) = runs.values()
    print(f"\n=== shapes scale summary ({torch.cuda.get_device_name()}, {gpus} GPUs; brute force of {len(sizes)} sizes)")
    print(f"wall: 1 GPU {one_s:.1f} s, {gpus} GPUs {many_s:.1f} s: {one_s / many_s:.2f}x")
    for M in sizes:
        a, b = one[M].best_config, many[M].best_config
        args = matmul.arguments(*make(M))
        times = {0: [], 1: []}
        for r in range(rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                times[i].append(kernel_time((a, b)[i], args))
        ratios = [y / x for x, y in zip(times[0], times[1])]
        same = "the same configuration" if a == b else f"{a} / {b}"
        print(f"M={M}: {same}; {gpus} GPUs' pick / 1 GPU's pick {statistics.median(ratios):.3f} "
              f"[{min(ratios):.3f}, {max(ratios):.3f}]")


if __name__ == "__main__":
    sys.exit(scale() if sys.argv[1:] == ["scale"] else main())

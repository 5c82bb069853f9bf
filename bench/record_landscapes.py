"""Records tuning landscapes on this machine's GPU: brute forces of Triton's tutorial matmul
(examples/triton/matmul.py) over a wider space than the benchmark's, at several problem
shapes, each exported as a Kernel Tuner cache for `kerntune simulate` and
`compare-strategies`. They are held-out landscapes of another kind than the benchmark hub's:
a Triton kernel, an H100 or H200, shapes that move the optimum.

    python3 bench/record_landscapes.py [SHAPE ...]    # default: every shape below

The space (2400 configurations): BLOCK_SIZE_M and BLOCK_SIZE_N in {16, 32, 64, 128, 256},
BLOCK_SIZE_K in {16, 32, 64, 128}, GROUP_SIZE_M in {1, 8}, num_stages in {2, 3, 4, 5},
num_warps in {2, 4, 8}. Every configuration is checked against torch.matmul. Timing stops
early only for a configuration whose first two samples are both over 1.5 times the best
median so far (its recorded time is then the faster of the two, marked `early_stopped`):
the searches compared on these landscapes are judged near the optimum, where every
configuration is timed in full. Each shape
runs with a fresh results store and a fresh Triton cache; its landscape goes to
$OUT/matmul_<shape>_<gpu>.json as soon as it is recorded, then a table is printed. Each
shape belongs to a set of bench/landscapes.py, `heldout_h100`, `fitting_h100`,
`heldout_h100b` or `fitting_h100b` (SHAPES), or to `sizes`: one product at five batch sizes,
for many-shape runs.
Needs the kerntune binary ($KERNTUNE, default .device/kerntune) for the export.
"""

import json
import os
import tempfile
import time
from collections import Counter

import torch

from triton_matmul import chosen, export_for_this_gpu, fresh_triton_cache, matmul  # also puts examples/triton on the path

import kerntune

PARAMS = {
    "BLOCK_SIZE_M": [16, 32, 64, 128, 256],
    "BLOCK_SIZE_N": [16, 32, 64, 128, 256],
    "BLOCK_SIZE_K": [16, 32, 64, 128],
    "GROUP_SIZE_M": [1, 8],
    "num_stages": [2, 3, 4, 5],
    "num_warps": [2, 4, 8],
}

# M, N, K of each shape, and the set it belongs to (bench/landscapes.py): square, large and
# small; a short, wide product (a batch of rows against a large weight); a tall, narrow one;
# a long reduction over a small output. The held-out five were recorded and reported first;
# the fitting five were recorded afterwards, for choosing changes to `default`.
SHAPES = {
    "square4096": ((4096, 4096, 4096), "heldout"),
    "wide256": ((256, 8192, 8192), "heldout"),
    "deep1024": ((1024, 1024, 16384), "heldout"),
    "square1024": ((1024, 1024, 1024), "heldout"),
    "tall16384": ((16384, 256, 4096), "heldout"),
    "square2048": ((2048, 2048, 2048), "fitting"),
    "wide128": ((128, 4096, 4096), "fitting"),
    "deep512": ((512, 512, 32768), "fitting"),
    "tall8192": ((8192, 128, 8192), "fitting"),
    "rect": ((2048, 8192, 1024), "fitting"),
    # Recorded in the tenth session, before any strategy ran on them, to check that session's
    # change to `default` on shapes nothing was chosen on: a 16-row product, sizes that are
    # not powers of two, an MLP-sized product, a mid-sized square, a very tall, narrow one.
    "skinny16": ((16, 8192, 8192), "heldout_b"),
    "odd": ((1000, 3000, 2000), "heldout_b"),
    "mlp": ((4096, 11008, 4096), "heldout_b"),
    "square3072": ((3072, 3072, 3072), "heldout_b"),
    "tall32768": ((32768, 64, 2048), "heldout_b"),
    # Recorded in the eleventh session, for choosing only: with fifty seeds, `default` stays on
    # a plateau where multi-start searches reach the optimum on two held-out landscapes (odd
    # and the hub's convolution_W6600), and no fitting landscape showed that. Sizes that are
    # not all multiples of 16, like odd's, where edge tiles can break a landscape into plateaus.
    "odd600": ((600, 1800, 1400), "fitting_b"),
    "odd1500": ((1500, 2500, 3500), "fitting_b"),
    "odd_tall": ((6000, 500, 1500), "fitting_b"),
    "ragged_k": ((2048, 2048, 1000), "fitting_b"),
    "odd_wide": ((200, 6000, 3000), "fitting_b"),
    # Recorded in the fifteenth session for many-shape runs (issue 35): one projection,
    # N = K = 4096, at the batch sizes a serving engine sends it, so that what one size's
    # search learns can be replayed against the next size's landscape.
    "m16": ((16, 4096, 4096), "sizes"),
    "m64": ((64, 4096, 4096), "sizes"),
    "m256": ((256, 4096, 4096), "sizes"),
    "m1024": ((1024, 4096, 4096), "sizes"),
    "m4096": ((4096, 4096, 4096), "sizes"),
}


def record(name, shape, workdir):
    M, N, K = shape
    torch.manual_seed(0)
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((K, N), device="cuda", dtype=torch.float16)
    c = torch.empty((M, N), device="cuda", dtype=torch.float16)
    fresh_triton_cache()
    db = os.path.join(workdir, f"{name}.db")
    start = time.perf_counter()
    result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, PARAMS,
                           answer={"c_ptr": torch.matmul(a, b)}, strategy="brute_force", db=db, progress=False,
                           timing={"early_stop": 1.5, "compile_timeout": "auto"}, finalists=1)
    wall = time.perf_counter() - start
    path = export_for_this_gpu(db, f"matmul_{name}", name)
    statuses = dict(Counter(r["status"] for r in result.results))
    row = dict(shape=name, mnk=shape, wall_s=wall, evaluations=result.evaluations, statuses=statuses,
               best_ms=result.best_time_ms, best=result.best_config, landscape=path,
               tflops=2 * M * N * K / (result.best_time_ms * 1e-3) / 1e12)
    print(name, json.dumps(row), flush=True)
    return row


def main():
    names = chosen(SHAPES, "shape")
    workdir = tempfile.mkdtemp(prefix="kerntune-landscapes-")
    rows = [record(name, SHAPES[name][0], workdir) for name in names]
    print("\n=== recorded landscapes")
    for r in rows:
        print(f"{r['shape']:<11} M,N,K {r['mnk']}: {r['wall_s']:6.1f} s, {r['evaluations']} configurations {r['statuses']}; "
              f"best {r['best_ms']:.4f} ms ({r['tflops']:.1f} TFLOP/s) {r['best']}  -> {os.path.basename(r['landscape'])}")


if __name__ == "__main__":
    main()

"""kerntune's median kernel time against an independent measurement: the same source
compiled by cupy (NVRTC), launched with the same geometry, timed with a plain loop of CUDA
events with an L2 flush before each launch (the same protocol, different code). For the
configurations stored by a kerntune run (a results database from `kerntune tune`), prints
both medians and their ratio, for kernels above 50 us.

Usage: python3 bench/timing_agreement.py SPEC_DIR RESULTS.db [COUNT]
(SPEC_DIR holds the kernel source; the spec must be the matmul_sram anchor's.)"""
import json, os, sqlite3, sys
import cupy as cp
import numpy as np

spec_source, db, count = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 8
N = 4096
rows = sqlite3.connect(db).execute("select config, samples from evaluations where status = 'ok'").fetchall()
rows = [(json.loads(c), json.loads(s)) for c, s in rows]
rows.sort(key=lambda r: np.median(r[1]))
# The fastest configurations, then some slower ones spread over the rest.
picked = rows[: count // 2] + rows[count // 2 :: max(1, len(rows) // (count - count // 2))][: count - count // 2]
source = open(spec_source).read()
rng = np.random.default_rng(1)
A = cp.asarray(rng.standard_normal((N, N), dtype=np.float32))
B = cp.asarray(rng.standard_normal((N, N), dtype=np.float32))
C = cp.zeros((N, N), dtype=cp.float32)
l2 = cp.cuda.Device().attributes["L2CacheSize"]
flush = cp.empty(2 * l2, dtype=cp.uint8)
start, stop = cp.cuda.Event(), cp.cuda.Event()
print(f"{'config':<44}{'kerntune ms':>13}{'events ms':>11}{'ratio':>8}")
worst = 0.0
for config, samples in picked:
    ours = float(np.median(samples))
    if ours < 0.05:
        continue
    defines = "".join(f"#define {k} {v}\n" for k, v in config.items())
    kernel = cp.RawModule(code=defines + source, options=("-std=c++17",)).get_function("matmul_sram")
    block = (config["block_size_x"], config["block_size_y"], 1)
    grid = (N // (config["block_size_x"] * config["V"]), N // (config["block_size_y"] * config["V"]), 1)
    args = (C, A, B, np.int32(N))
    kernel(grid, block, args)
    times = []
    for i in range(21):
        flush.fill(i % 256)
        start.record()
        kernel(grid, block, args)
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    theirs = float(np.median(times))
    ratio = ours / theirs
    worst = max(worst, abs(ratio - 1))
    label = " ".join(f"{k}={v}" for k, v in config.items())
    print(f"{label:<44}{ours:>13.4f}{theirs:>11.4f}{ratio:>8.3f}")
print(f"largest disagreement: {100 * worst:.2f}%")

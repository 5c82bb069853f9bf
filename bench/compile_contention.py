"""How parallel Triton compiles slow each other down on this machine: P processes, each
with a fresh Triton cache, compile the same three matmul configurations for sm_90 (no GPU
used); prints the median per-compile time for each P. A per-compile time that grows with P
means the machine's cores are not independent (shared, throttled or hyperthreaded), and
more compile workers stop paying off.

    python bench/compile_contention.py [P ...]     # default 1 4 8 16
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "triton")

ONE = r'''
import json, sys, time
import triton
from triton.backends.compiler import GPUTarget
sys.path.insert(0, EXAMPLES)
import matmul
fn = matmul.matmul_kernel.jit
signature = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
             "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr", "stride_cm": "i32", "stride_cn": "constexpr"}
times = []
for m, n, k, stages, warps in ((128, 256, 64, 3, 8), (64, 128, 32, 4, 4), (128, 128, 64, 4, 4)):
    constants = dict(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=8, stride_ak=1, stride_bn=1, stride_cn=1)
    start = time.perf_counter()
    triton.compile(triton.compiler.ASTSource(fn, {**signature, **{c: "constexpr" for c in constants}}, constants),
                   target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, num_stages=stages))
    times.append(time.perf_counter() - start)
print(json.dumps(times))
'''


def main(counts):
    print(f"cores: {os.cpu_count()}")
    for count in counts:
        start = time.perf_counter()
        processes = [subprocess.Popen([sys.executable, "-c", f"EXAMPLES = {EXAMPLES!r}\n" + ONE], stdout=subprocess.PIPE, text=True,
                                      env=dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="triton-cache-")))
                     for _ in range(count)]
        outputs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in processes]
        wall = time.perf_counter() - start
        per_config = [statistics.median(o[i] for o in outputs) for i in range(3)]
        print(f"P={count:>2}: wall {wall:.2f} s; median seconds per compile of the three configs: "
              + ", ".join(f"{t:.2f}" for t in per_config), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 4, 8, 16])

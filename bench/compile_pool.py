"""kerntune's compile pool alone (no GPU used): the 16 configurations of
bench/triton_autotune.py compiled for sm_90 by N workers, each run with a fresh Triton
cache; prints the wall time and each configuration's compile seconds as its worker measured
them, so that pool effects (worker start-up, contention) show apart from the GPU.

    python bench/compile_pool.py [N ...]           # default 16 8 4
"""

import os
import statistics
import sys
import tempfile
import time

import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "triton"))
import matmul  # noqa: E402
from triton_autotune import ROWS  # noqa: E402

import kerntune  # noqa: E402
from kerntune import Tensor  # noqa: E402

SIZE = 4096


def main(counts):
    configs = [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8}, num_stages=s, num_warps=w)
               for m, n, k, s, w in ROWS]
    args = dict(a_ptr=Tensor("float16", (SIZE, SIZE)), b_ptr=Tensor("float16", (SIZE, SIZE)), c_ptr=Tensor("float16", (SIZE, SIZE)),
                M=SIZE, N=SIZE, K=SIZE, stride_am=SIZE, stride_ak=1, stride_bk=SIZE, stride_bn=1, stride_cm=SIZE, stride_cn=1)
    for count in counts:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")
        start = time.perf_counter()
        outcomes = kerntune.compile(matmul.matmul_kernel, args, configs=configs, compile_workers=count)
        wall = time.perf_counter() - start
        seconds = [o.get("seconds") or 0.0 for o in outcomes]
        print(f"workers {count:>2}: wall {wall:.2f} s, compile seconds median {statistics.median(seconds):.2f} max {max(seconds):.2f} "
              f"sum {sum(seconds):.1f}: " + " ".join(f"{s:.1f}" for s in seconds), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [16, 8, 4])

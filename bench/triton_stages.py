"""Where a Triton compile's time goes, stage by stage, without a GPU: the tutorial matmul
(examples/triton/matmul.py) compiled for sm_90 at a few configurations, with the front end
(`make_ir`, the kernel's Python AST to TTIR) and each backend stage (ttir, ttgir, llir, ptx,
cubin) timed. Triton specializes the call as its JIT would for a contiguous 1024^3 fp16
call. A fresh Triton cache, so every stage runs. The first compile also pays one-off
set-up; the table leaves it out.

Usage: python3 bench/triton_stages.py   (needs triton; prints a table)"""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "triton"))
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-stages-")

import matmul  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import CUDABackend  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

CONFIGS = [(32, 32, 32, 3, 4), (128, 256, 64, 3, 8), (64, 64, 32, 3, 4), (128, 128, 64, 4, 4), (64, 128, 64, 5, 4),
           (64, 128, 64, 3, 8), (128, 64, 32, 4, 4)]
current = {}


def timed(name, function):
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            current[name] = current.get(name, 0.0) + time.perf_counter() - start
    return run


ASTSource.make_ir = timed("make_ir", ASTSource.make_ir)
original_stages = CUDABackend.add_stages


def add_stages(self, stages, options, *rest):
    original_stages(self, stages, options, *rest)
    for name in list(stages):
        stages[name] = timed(name, stages[name])


CUDABackend.add_stages = add_stages


def main():
    kernel = matmul.matmul_kernel.fn
    unit = {"stride_ak", "stride_bn", "stride_cn"}
    rows = []
    for bm, bn, bk, stages, warps in CONFIGS:
        tiles = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8}
        signature, attrs = {}, {}
        for index, name in enumerate(kernel.arg_names):
            signature[name] = "constexpr" if name in unit or name in tiles else ("*fp16" if name.endswith("_ptr") else "i32")
            if signature[name] != "constexpr":
                attrs[(index,)] = [["tt.divisibility", 16]]
        current.clear()
        start = time.perf_counter()
        triton.compile(ASTSource(kernel, signature, {**tiles, **{name: 1 for name in unit}}, attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
        rows.append(((bm, bn, bk, stages, warps), time.perf_counter() - start, dict(current)))
    names = ["make_ir", "ttir", "ttgir", "llir", "ptx", "cubin"]
    print(f"{'BM BN BK stages warps':<24}{'total s':>8}" + "".join(f"{n:>9}" for n in names) + f"{'front %':>9}")
    for config, total, spent in rows[1:]:
        front = spent.get("make_ir", 0.0) + spent.get("ttir", 0.0)
        print(f"{' '.join(map(str, config)):<24}{total:>8.3f}" + "".join(f"{spent.get(n, 0.0):>9.3f}" for n in names)
              + f"{100 * front / total:>8.1f}%")


if __name__ == "__main__":
    main()

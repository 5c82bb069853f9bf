"""Matmul C = A @ B (fp16 inputs, fp32 accumulation, fp16 output) with grouped ordering of
the output tiles for L2 reuse: the algorithm of Triton's matmul tutorial.

    python examples/triton/matmul.py            # kerntune.tune, then compare with torch.matmul
    python examples/triton/matmul.py autotune   # the kernel called as under @triton.autotune

The space is the 576 configurations of the benchmark: BLOCK_SIZE_M/N/K in {32, 64, 128,
256}, GROUP_SIZE_M = 8, num_stages in {3, 4, 5}, num_warps in {2, 4, 8}.
"""

import sys

import triton
import triton.language as tl

import kerntune


PARAMS = {
    "BLOCK_SIZE_M": [32, 64, 128, 256],
    "BLOCK_SIZE_N": [32, 64, 128, 256],
    "BLOCK_SIZE_K": [32, 64, 128, 256],
    "GROUP_SIZE_M": [8],
    "num_stages": [3, 4, 5],
    "num_warps": [2, 4, 8],
}


# Replacing @triton.autotune(configs=[...], key=["M", "N", "K"]) by this line is the only change
# kerntune needs: the call site `matmul_kernel[grid](...)` in `matmul` below stays as it was.
@kerntune.autotune(params=PARAMS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    # Walk the output tiles in groups of GROUP_SIZE_M rows, so that the tiles computed at
    # the same time share rows of A and columns of B in L2.
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def grid(META):
    return (triton.cdiv(META["M"], META["BLOCK_SIZE_M"]) * triton.cdiv(META["N"], META["BLOCK_SIZE_N"]),)


def arguments(a, b, c):
    M, K = a.shape
    _, N = b.shape
    return dict(a_ptr=a, b_ptr=b, c_ptr=c, M=M, N=N, K=K, stride_am=a.stride(0), stride_ak=a.stride(1),
                stride_bk=b.stride(0), stride_bn=b.stride(1), stride_cm=c.stride(0), stride_cn=c.stride(1))


def tflops(M, N, K, ms):
    return 2 * M * N * K / (ms * 1e-3) / 1e12


def main(size=4096, strategy="default", max_fevals=None):
    import torch

    torch.manual_seed(0)
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
    result = kerntune.tune(matmul_kernel, arguments(a, b, c), grid, PARAMS, answer={"c_ptr": torch.matmul(a, b)},
                           strategy=strategy, max_fevals=max_fevals,
                           objective=("TFLOP/s", "2 * M * N * K / (time * 1e-3) / 1e12"))
    print(result)
    matmul_kernel.jit[grid](**arguments(a, b, c), **result.best_config)
    torch.testing.assert_close(c, torch.matmul(a, b), atol=1e-2, rtol=1e-2)
    torch_ms = triton.testing.do_bench(lambda: torch.matmul(a, b), return_mode="median")
    print(f"kerntune's best: {result.best_objective:.1f} TFLOP/s; torch.matmul: {tflops(size, size, size, torch_ms):.1f} TFLOP/s")
    return result


def matmul(a, b):
    """C = A @ B through the autotuned kernel: tuned on the first call for these sizes."""
    import torch

    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c


def check_autotune(size=2048):
    import torch

    x = torch.randn((size, size), device="cuda", dtype=torch.float16)
    y = torch.randn((size, size), device="cuda", dtype=torch.float16)
    torch.testing.assert_close(matmul(x, y), torch.matmul(x, y), atol=1e-2, rtol=1e-2)
    print("autotuned matmul matches torch.matmul")


if __name__ == "__main__":
    if sys.argv[1:] == ["autotune"]:
        check_autotune()
    else:
        main()

# A script shaped like the ones Triton users copy from Triton's matrix-multiplication
# tutorial: top-level code, no main guard, a list of triton.Config and a key. The only
# kerntune-specific line is the decorator, `@kerntune.autotune` where `@triton.autotune` was.
#
#     python examples/triton/tutorial_matmul.py        # needs an NVIDIA GPU, torch and triton
#
# The first call tunes (16 configurations, compiled in parallel, each checked against the
# first one Triton runs, then timed); the answer is kept in kerntune's store, so running the
# script again launches the best configuration at once.
import time

import torch
import triton
import triton.language as tl

import kerntune


CONFIGS = [
    triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8}, num_stages=s, num_warps=w)
    for m, n, k, s, w in [
        (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
        (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (256, 64, 128, 4, 4), (64, 256, 128, 4, 4),
        (128, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 32, 64, 4, 4),
    ]
]


@kerntune.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    # Programs walk C in groups of GROUP_SIZE_M rows of tiles, so that tiles sharing rows of
    # A and columns of B run close together and find them in L2.
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_SIZE_M)
    tiles_n = tl.cdiv(N, BLOCK_SIZE_N)
    group = pid // (GROUP_SIZE_M * tiles_n)
    first_m = group * GROUP_SIZE_M
    rows_in_group = min(tiles_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % (GROUP_SIZE_M * tiles_n)) % rows_in_group
    pid_n = (pid % (GROUP_SIZE_M * tiles_n)) // rows_in_group
    rows = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    cols = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        left = K - step * BLOCK_SIZE_K
        acc = tl.dot(tl.load(a_tile, mask=ks[None, :] < left, other=0.0), tl.load(b_tile, mask=ks[:, None] < left, other=0.0), acc)
        a_tile += BLOCK_SIZE_K * stride_ak
        b_tile += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    out_rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    out_cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_tile = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    tl.store(c_tile, acc.to(tl.float16), mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


# A helper defined after the kernel that calls it, as in the tutorial.
@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


def matmul(a, b, activation=""):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        ACTIVATION=activation)
    return c


torch.manual_seed(0)
a = torch.randn((4096, 4096), device="cuda", dtype=torch.float16)
b = torch.randn((4096, 4096), device="cuda", dtype=torch.float16)
start = time.time()
c = matmul(a, b, "leaky_relu")
torch.cuda.synchronize()
print(f"first call (tuning): {time.time() - start:.1f} s; best config: {matmul_kernel.best_config}")
expected = torch.nn.functional.leaky_relu(torch.matmul(a, b), 0.01)
torch.testing.assert_close(c, expected, atol=1e-2, rtol=1e-2)
print("matches torch")

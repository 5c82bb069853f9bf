"""Grouped GEMM: one persistent launch of NUM_SM programs computes C_g = A_g @ B_g for
several problems of different sizes, each program walking the tiles of all problems with
a stride of NUM_SM (the algorithm of Triton's grouped-GEMM tutorial).

The matrices of all groups live in one buffer per operand, and the kernel takes each
group's element offsets into them: kerntune's benchmark worker owns copies of the tensors at
its own addresses, so a kernel cannot be handed device pointers stored inside a tensor.

    python examples/triton/grouped_gemm.py
"""

import triton
import triton.language as tl

import kerntune


@triton.jit
def grouped_matmul_kernel(
    a_ptr, b_ptr, c_ptr, offsets_ptr, sizes_ptr, group_count,
    NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
):
    tile = tl.program_id(0)
    first_tile = 0
    for g in range(group_count):
        m = tl.load(sizes_ptr + g * 3)
        n = tl.load(sizes_ptr + g * 3 + 1)
        k = tl.load(sizes_ptr + g * 3 + 2)
        tiles_n = tl.cdiv(n, BLOCK_SIZE_N)
        tiles = tl.cdiv(m, BLOCK_SIZE_M) * tiles_n
        while tile >= first_tile and tile < first_tile + tiles:
            a_off = tl.load(offsets_ptr + g * 3)
            b_off = tl.load(offsets_ptr + g * 3 + 1)
            c_off = tl.load(offsets_ptr + g * 3 + 2)
            tile_m = (tile - first_tile) // tiles_n
            tile_n = (tile - first_tile) % tiles_n
            offs_m = tile_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_n = tile_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + a_off + offs_m[:, None] * k + offs_k[None, :]
            b_ptrs = b_ptr + b_off + offs_k[:, None] * n + offs_n[None, :]
            acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                left = k - kk * BLOCK_SIZE_K
                a = tl.load(a_ptrs, mask=(offs_m[:, None] < m) & (offs_k[None, :] < left), other=0.0)
                b = tl.load(b_ptrs, mask=(offs_k[:, None] < left) & (offs_n[None, :] < n), other=0.0)
                acc = tl.dot(a, b, acc)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * n
            c_ptrs = c_ptr + c_off + offs_m[:, None] * n + offs_n[None, :]
            tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < m) & (offs_n[None, :] < n))
            tile += NUM_SM
        first_tile += tiles


def params(sm_count):
    return {
        "NUM_SM": [sm_count // 2, sm_count, 2 * sm_count, 4 * sm_count],
        "BLOCK_SIZE_M": [64, 128],
        "BLOCK_SIZE_N": [64, 128],
        "BLOCK_SIZE_K": [32, 64],
        "num_warps": [4, 8],
        "num_stages": [2, 3, 4],
    }


def pack(groups, device="cuda"):
    """The operands of all groups packed in one buffer each, with the offsets and sizes."""
    import torch

    a = torch.cat([x.flatten() for x, _ in groups])
    b = torch.cat([y.flatten() for _, y in groups])
    offsets, sizes, ends = [], [], [0, 0, 0]
    for x, y in groups:
        m, k = x.shape
        n = y.shape[1]
        offsets += ends
        sizes += [m, n, k]
        ends = [ends[0] + m * k, ends[1] + k * n, ends[2] + m * n]
    c = torch.empty(ends[2], device=device, dtype=torch.float16)
    return a, b, c, torch.tensor(offsets, device=device, dtype=torch.int64), torch.tensor(sizes, device=device, dtype=torch.int32)


def main(strategy="default", max_fevals=None):
    import torch

    torch.manual_seed(0)
    shapes = [(1024, 1024, 1024), (512, 2048, 1024), (2048, 512, 256), (768, 768, 3072)]
    groups = [(torch.randn((m, k), device="cuda", dtype=torch.float16), torch.randn((k, n), device="cuda", dtype=torch.float16)) for m, n, k in shapes]
    a, b, c, offsets, sizes = pack(groups)
    expected = torch.cat([torch.matmul(x, y).flatten() for x, y in groups])
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    args = dict(a_ptr=a, b_ptr=b, c_ptr=c, offsets_ptr=offsets, sizes_ptr=sizes, group_count=len(groups))
    flops = sum(2 * m * n * k for m, n, k in shapes)
    result = kerntune.tune(grouped_matmul_kernel, args, lambda META: (META["NUM_SM"],), params(sm_count),
                           answer={"c_ptr": expected}, strategy=strategy, max_fevals=max_fevals,
                           objective=("TFLOP/s", f"{flops} / (time * 1e-3) / 1e12"))
    print(result)
    return result


if __name__ == "__main__":
    main()

"""Fused attention forward (non-causal): softmax(Q K^T * scale) V computed block by block
with an online softmax, never materialising the attention matrix (the algorithm of Triton's
fused-attention tutorial). Tuned: BLOCK_M, BLOCK_N, PRE_LOAD_V (load V before the softmax
of a block rather than after), num_warps, num_stages.

    python examples/triton/attention.py
"""

import triton
import triton.language as tl

import kerntune


@triton.jit
def attention_fwd(
    Q, K, V, Out, sm_scale,
    stride_z, stride_h, stride_m, stride_d,
    H, N_CTX,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PRE_LOAD_V: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    offset = (off_hz // H) * stride_z + (off_hz % H) * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + offset + offs_m[:, None] * stride_m + offs_d[None, :] * stride_d)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # exp(x) = exp2(x * log2(e))
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + offset + cols[None, :] * stride_m + offs_d[:, None] * stride_d)
        if PRE_LOAD_V:
            v = tl.load(V + offset + cols[:, None] * stride_m + offs_d[None, :] * stride_d)
        qk = tl.dot(q, k) * qk_scale
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if not PRE_LOAD_V:
            v = tl.load(V + offset + cols[:, None] * stride_m + offs_d[None, :] * stride_d)
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + offset + offs_m[:, None] * stride_m + offs_d[None, :] * stride_d, acc.to(tl.float16))


PARAMS = {
    "BLOCK_M": [64, 128],
    "BLOCK_N": [32, 64, 128],
    "PRE_LOAD_V": [False, True],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4],
}


def grid(META):
    return (triton.cdiv(META["N_CTX"], META["BLOCK_M"]), META["H"] * META["Z"])


def arguments(q, k, v, o, sm_scale):
    Z, H, N_CTX, HEAD_DIM = q.shape
    return dict(Q=q, K=k, V=v, Out=o, sm_scale=sm_scale, stride_z=q.stride(0), stride_h=q.stride(1),
                stride_m=q.stride(2), stride_d=q.stride(3), H=H, N_CTX=N_CTX, HEAD_DIM=HEAD_DIM)


def reference(q, k, v, sm_scale):
    import torch

    p = torch.softmax(torch.matmul(q.float(), k.float().transpose(2, 3)) * sm_scale, dim=-1)
    return torch.matmul(p, v.float()).half()


def main(Z=4, H=16, N_CTX=4096, HEAD_DIM=64, strategy="default", max_fevals=None):
    import torch

    torch.manual_seed(0)
    q, k, v = (torch.randn((Z, H, N_CTX, HEAD_DIM), device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    sm_scale = HEAD_DIM ** -0.5
    args = arguments(q, k, v, o, sm_scale)
    # The grid uses Z, which is not a kernel argument: it is bound here.
    result = kerntune.tune(attention_fwd, args, lambda META: grid({**META, "Z": Z}), PARAMS,
                           restrictions=[f"{N_CTX} % BLOCK_M == 0", f"{N_CTX} % BLOCK_N == 0"],
                           answer={"Out": reference(q, k, v, sm_scale)}, strategy=strategy, max_fevals=max_fevals,
                           objective=("TFLOP/s", f"4 * {Z * H} * N_CTX * N_CTX * {HEAD_DIM} / (time * 1e-3) / 1e12"))
    print(result)
    return result


if __name__ == "__main__":
    main()

"""2D convolution as an implicit GEMM over NHWC tensors: each program computes a tile of
BLOCK_NI_HO_WO output pixels (batch, row and column flattened) by BLOCK_CO output channels,
accumulating over the filter window and BLOCK_CI input channels at a time.

    python examples/triton/conv2d.py
"""

import triton
import triton.language as tl

import kerntune


@triton.jit
def conv2d_kernel(
    x_ptr, w_ptr, y_ptr,
    N, H, W, C, K, P, Q,
    R: tl.constexpr, S: tl.constexpr, stride: tl.constexpr, pad: tl.constexpr,
    BLOCK_NI_HO_WO: tl.constexpr, BLOCK_CI: tl.constexpr, BLOCK_CO: tl.constexpr,
):
    # x: [N, H, W, C], w: [R, S, C, K], y: [N, P, Q, K], all contiguous fp16.
    pid_pixels = tl.program_id(0)
    pid_k = tl.program_id(1)
    pixels = pid_pixels * BLOCK_NI_HO_WO + tl.arange(0, BLOCK_NI_HO_WO)
    n = pixels // (P * Q)
    p = (pixels % (P * Q)) // Q
    q = pixels % Q
    offs_k = pid_k * BLOCK_CO + tl.arange(0, BLOCK_CO)
    acc = tl.zeros((BLOCK_NI_HO_WO, BLOCK_CO), dtype=tl.float32)
    for r in range(R):
        for s in range(S):
            h = p * stride - pad + r
            w = q * stride - pad + s
            inside = (pixels < N * P * Q) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            base = ((n * H + h) * W + w) * C
            for c0 in range(0, C, BLOCK_CI):
                offs_c = c0 + tl.arange(0, BLOCK_CI)
                x = tl.load(x_ptr + base[:, None] + offs_c[None, :], mask=inside[:, None] & (offs_c[None, :] < C), other=0.0)
                wt = tl.load(w_ptr + ((r * S + s) * C + offs_c)[:, None] * K + offs_k[None, :],
                             mask=(offs_c[:, None] < C) & (offs_k[None, :] < K), other=0.0)
                acc = tl.dot(x, wt, acc)
    mask = (pixels[:, None] < N * P * Q) & (offs_k[None, :] < K)
    tl.store(y_ptr + pixels[:, None] * K + offs_k[None, :], acc.to(tl.float16), mask=mask)


PARAMS = {
    "BLOCK_NI_HO_WO": [32, 64, 128, 256],
    "BLOCK_CI": [16, 32, 64],
    "BLOCK_CO": [32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [2, 3],
}


def grid(META):
    return (triton.cdiv(META["N"] * META["P"] * META["Q"], META["BLOCK_NI_HO_WO"]), triton.cdiv(META["K"], META["BLOCK_CO"]))


def arguments(x, w, y, stride, pad):
    N, H, W, C = x.shape
    R, S, _, K = w.shape
    _, P, Q, _ = y.shape
    return dict(x_ptr=x, w_ptr=w, y_ptr=y, N=N, H=H, W=W, C=C, K=K, P=P, Q=Q, R=R, S=S, stride=stride, pad=pad)


def reference(x, w, stride, pad):
    import torch

    y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(3, 2, 0, 1).float(), stride=stride, padding=pad)
    return y.permute(0, 2, 3, 1).contiguous().half()


def main(N=32, H=56, W=56, C=128, K=128, R=3, S=3, stride=1, pad=1, strategy="default", max_fevals=None):
    import torch

    torch.manual_seed(0)
    x = torch.randn((N, H, W, C), device="cuda", dtype=torch.float16)
    w = torch.randn((R, S, C, K), device="cuda", dtype=torch.float16) * 0.1
    P, Q = (H + 2 * pad - R) // stride + 1, (W + 2 * pad - S) // stride + 1
    y = torch.empty((N, P, Q, K), device="cuda", dtype=torch.float16)
    flops = 2 * N * P * Q * K * C * R * S
    result = kerntune.tune(conv2d_kernel, arguments(x, w, y, stride, pad), grid, PARAMS,
                           answer={"y_ptr": reference(x, w, stride, pad)}, strategy=strategy, max_fevals=max_fevals,
                           objective=("TFLOP/s", f"{flops} / (time * 1e-3) / 1e12"))
    print(result)
    return result


if __name__ == "__main__":
    main()

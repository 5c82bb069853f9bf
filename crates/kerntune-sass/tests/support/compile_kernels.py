"""Compile the SASS test corpus to sm_90 cubins, without a GPU.

Usage: python3 compile_kernels.py OUT_DIR

Writes one `<kernel>.cubin` per kernel into OUT_DIR and a `manifest.json`
mapping each file name to the kernel symbol inside it. The Triton kernels are
compiled with `triton.compile`; the PTX kernels (shapes Triton never emits:
an indirect branch, a relocated global address) with the `ptxas` that ships
in Triton's wheel. Any failure exits non-zero with the reason on stderr, so a
test that needs the corpus fails loudly instead of passing on nothing.
"""

import json
import os
import subprocess
import sys
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

TARGET = GPUTarget("cuda", 90, 32)


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def tiled_matmul(a_ptr, b_ptr, c_ptr, M, N, K,
                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_tile = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_tile, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = tl.load(b_tile, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def pipelined_matmul(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, stride_cm,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_tile = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a_tile), tl.load(b_tile))
        a_tile += BLOCK_K
        b_tile += BLOCK_K * stride_bk
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16))


@triton.jit
def looped_softmax(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride
    running_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=float("-inf"))
        running_max = tl.maximum(running_max, x)
    row_max = tl.max(running_max, axis=0)
    total = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=float("-inf"))
        total += tl.exp(x - row_max)
    denominator = tl.sum(total, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=float("-inf"))
        tl.store(out_ptr + row * stride + cols, tl.exp(x - row_max) / denominator, mask=cols < n_cols)


# Divisibility hints let Triton vectorise and pipeline the loads of
# `pipelined_matmul` (cp.async, that is LDGSTS, then LDSM and HMMA).
DIVISIBLE_BY_16 = {(index,): [["tt.divisibility", 16]] for index in range(7)}

TRITON_KERNELS = [
    ("vector_add", vector_add,
     {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
     {"BLOCK": 1024}, None, {"num_warps": 4}),
    ("tiled_matmul", tiled_matmul,
     {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
      "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32",
      "stride_cm": "i32", "stride_cn": "i32",
      "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"},
     {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, None, {"num_warps": 4, "num_stages": 3}),
    ("pipelined_matmul", pipelined_matmul,
     {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32",
      "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32",
      "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"},
     {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}, DIVISIBLE_BY_16, {"num_warps": 1, "num_stages": 3}),
    ("looped_softmax", looped_softmax,
     {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride": "i32", "BLOCK": "constexpr"},
     {"BLOCK": 256}, None, {"num_warps": 4}),
]

# A switch through a jump table: ptxas lowers `brx.idx` to BRX, an indirect
# branch, which the rewriter must refuse.
INDIRECT_BRANCH_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry indirect_branch(.param .u64 out, .param .u32 which)
{
    .reg .u32 %r<4>;
    .reg .u64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [which];
    cvta.to.global.u64 %rd2, %rd1;
    ts: .branchtargets L0, L1, L2;
    brx.idx %r1, ts;
L0:
    mov.u32 %r2, 10;
    bra.uni DONE;
L1:
    mov.u32 %r2, 20;
    bra.uni DONE;
L2:
    mov.u32 %r2, 30;
DONE:
    st.global.u32 [%rd2], %r2;
    ret;
}
"""

# The address of a module-scope variable, in relocatable code (`ptxas -c`),
# is patched in by the linker through relocations in `.rela.text.<kernel>`,
# which must follow a moved instruction.
GLOBAL_ADDRESS_PTX = """
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 counter_table[64];
.visible .entry global_address(.param .u64 out, .param .u64 in)
{
    .reg .u32 %r<8>;
    .reg .u64 %rd<12>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.u32 %r2, [%rd6];
    ld.global.u32 %r5, [%rd6+512];
    mov.u64 %rd7, counter_table;
    add.s64 %rd8, %rd7, %rd5;
    st.global.u32 [%rd8], %r1;
    add.s32 %r4, %r2, %r5;
    add.s64 %rd9, %rd3, %rd5;
    st.global.u32 [%rd9], %r4;
    ret;
}
"""

PTX_KERNELS = [
    ("indirect_branch", INDIRECT_BRANCH_PTX, []),
    ("global_address", GLOBAL_ADDRESS_PTX, ["-c"]),
]


def ptxas_path():
    bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    return os.path.join(bin_dir, "ptxas")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: compile_kernels.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    manifest = {}
    for name, fn, signature, constexprs, attrs, options in TRITON_KERNELS:
        source = ASTSource(fn, signature, constexprs, attrs)
        compiled = triton.compile(source, target=TARGET, options=options)
        path = os.path.join(out_dir, name + ".cubin")
        with open(path, "wb") as f:
            f.write(compiled.asm["cubin"])
        manifest[name + ".cubin"] = compiled.metadata.name
    with tempfile.TemporaryDirectory() as scratch:
        for name, ptx, flags in PTX_KERNELS:
            ptx_path = os.path.join(scratch, name + ".ptx")
            with open(ptx_path, "w") as f:
                f.write(ptx)
            cubin_path = os.path.join(out_dir, name + ".cubin")
            subprocess.run([ptxas_path(), "-arch=sm_90", *flags, ptx_path, "-o", cubin_path], check=True)
            manifest[name + ".cubin"] = name
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()

"""The GEMM kerntune tunes for TorchInductor: a Triton kernel that computes what Inductor's
``triton::mm`` template computes, the same way, so that a configuration timed here is the
configuration Inductor builds from a lookup-table entry. Which template semantics it follows
and why they matter for the timing is in docs/design-notes.md ("torch.compile's GEMMs").

Shapes and strides are compile-time constants, as Inductor bakes them into its kernels; rows
and columns past the edge wrap around instead of being masked on load; the K loop is masked
only where ``K`` is not a multiple of ``BLOCK_K``; the accumulator is fp32.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import triton
import triton.language as tl


@triton.jit
def _grouped_tile(pid, M: tl.constexpr, N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  GROUP_M: tl.constexpr):
    # One program per output tile; GROUP_M rows of tiles are walked column by column so
    # that neighbouring programs share rows of A and columns of B in L2.
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_here = min(tiles_m - first_m, GROUP_M)
    return first_m + (pid % rows_here), (pid % per_group) // rows_here


@triton.jit
def inductor_mm(A, B, C,
                M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                stride_am: tl.constexpr, stride_ak: tl.constexpr,
                stride_bk: tl.constexpr, stride_bn: tl.constexpr,
                stride_cm: tl.constexpr, stride_cn: tl.constexpr,
                PLAIN_A: tl.constexpr, PLAIN_B: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    tile_m, tile_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    a_rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    b_cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    if PLAIN_A:
        if M >= BLOCK_M:
            a_rows = tl.max_contiguous(tl.multiple_of(a_rows, BLOCK_M), BLOCK_M)
    if PLAIN_B:
        if N >= BLOCK_N:
            b_cols = tl.max_contiguous(tl.multiple_of(b_cols, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, (K + BLOCK_K - 1) // BLOCK_K):
        ks = step * BLOCK_K + offs_k
        a_at = A + a_rows[:, None] * stride_am + ks[None, :] * stride_ak
        b_at = B + ks[:, None] * stride_bk + b_cols[None, :] * stride_bn
        if K % BLOCK_K == 0:
            a = tl.load(a_at)
            b = tl.load(b_at)
        else:
            a = tl.load(a_at, mask=ks[None, :] < K, other=0.0)
            b = tl.load(b_at, mask=ks[:, None] < K, other=0.0)
        acc += tl.dot(a, b, out_dtype=tl.float32)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(C + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=inside)


@triton.jit
def inductor_bmm(A, B, C,
                 M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                 stride_aq: tl.constexpr, stride_am: tl.constexpr, stride_ak: tl.constexpr,
                 stride_bq: tl.constexpr, stride_bk: tl.constexpr, stride_bn: tl.constexpr,
                 stride_cq: tl.constexpr, stride_cm: tl.constexpr, stride_cn: tl.constexpr,
                 PLAIN_A: tl.constexpr, PLAIN_B: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # What Inductor's triton::bmm computes: inductor_mm's tiles for each matrix of the batch
    # (the grid's second axis), its pointers stepped along K instead of recomputed, and its
    # contiguity hints whatever the matrix's size.
    tile_m, tile_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    batch = tl.program_id(1)
    a_rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    b_cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    if PLAIN_A:
        a_rows = tl.max_contiguous(tl.multiple_of(a_rows, BLOCK_M), BLOCK_M)
    if PLAIN_B:
        b_cols = tl.max_contiguous(tl.multiple_of(b_cols, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_at = A + a_rows[:, None] * stride_am + offs_k[None, :] * stride_ak + batch * stride_aq
    b_at = B + offs_k[:, None] * stride_bk + b_cols[None, :] * stride_bn + batch * stride_bq
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for left in range(K, 0, -BLOCK_K):
        if K % BLOCK_K == 0:
            a = tl.load(a_at)
            b = tl.load(b_at)
        else:
            a = tl.load(a_at, mask=offs_k[None, :] < left, other=0.0)
            b = tl.load(b_at, mask=offs_k[:, None] < left, other=0.0)
        acc += tl.dot(a, b, out_dtype=tl.float32)
        a_at += BLOCK_K * stride_ak
        b_at += BLOCK_K * stride_bk
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    at = C + batch * stride_cq + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(at, acc.to(C.dtype.element_ty), mask=inside)


#: Inductor's EXHAUSTIVE space for ``triton::mm`` (torch 2.11's template heuristics): every
#: tile of 16 to 256, 1 to 5 stages, GROUP_M 8; its warp clamp (no more warps than the tile
#: has 256-element slices) and its register-spill rule (at most 255 accumulator registers
#: a thread) as restrictions, so that no two configurations build the same kernel.
EXHAUSTIVE = {
    "BLOCK_M": [16, 32, 64, 128, 256],
    "BLOCK_N": [16, 32, 64, 128, 256],
    "BLOCK_K": [16, 32, 64, 128, 256],
    "GROUP_M": [8],
    "num_stages": [1, 2, 3, 4, 5],
    "num_warps": [1, 2, 4, 8],
}
RESTRICTIONS = [
    "num_warps * 256 <= BLOCK_M * BLOCK_N",
    "num_warps > 1 or BLOCK_M * BLOCK_N < 512",
    "BLOCK_M * BLOCK_N <= 255 * 32 * num_warps",
]
#: Wider than Inductor looks: GROUP_M from 1 to 16 and up to 6 stages.
WIDE = {**EXHAUSTIVE, "GROUP_M": [1, 4, 8, 16], "num_stages": [1, 2, 3, 4, 5, 6]}
SPACES = {"exhaustive": EXHAUSTIVE, "wide": WIDE}
#: The element types whose GEMMs kerntune tunes for Inductor; others keep Inductor's own choice.
DTYPES = ("float16", "bfloat16")


def inductor_default() -> list:
    """Inductor's DEFAULT list for ``triton::mm`` as configurations of this space (its warp
    clamp applied), read from the running torch; empty where torch keeps it elsewhere. kerntune
    measures these first, so that its search starts where Inductor's ends."""
    try:
        from torch._inductor.template_heuristics.triton import CUDAConfigHeuristic
        listed = CUDAConfigHeuristic().mm_configs
    except (ImportError, AttributeError):
        return []
    return [{"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k, "GROUP_M": getattr(c, "group_m", 8),
             "num_stages": c.num_stages, "num_warps": min(c.num_warps, c.block_m * c.block_n // 256)}
            for c in listed]


#: The operations kerntune tunes, each with Inductor's template for it; the batched ones
#: run ``inductor_bmm``.
TEMPLATES = {"mm": "triton::mm", "addmm": "triton::mm", "bmm": "triton::bmm", "baddbmm": "triton::bmm"}


class Problem(NamedTuple):
    """One GEMM as Inductor lowers it: ``C (M, N) = A (M, K) @ B (K, N)``, for each of ``Q``
    matrices of a batch (``bmm``, ``baddbmm``; 1 for ``mm`` and ``addmm``), the inputs' strides as
    Inductor sees them (a batch's first; ``B`` an ``nn.Linear`` weight's transposed view:
    ``(1, K)``), the element type's name and the operation."""

    op: str
    M: int
    N: int
    K: int
    stride_a: tuple
    stride_b: tuple
    dtype: str
    Q: int = 1

    @property
    def batched(self) -> bool:
        return len(self.stride_a) == 3

    @property
    def template(self) -> str:
        return TEMPLATES[self.op]

    @property
    def kernel(self):
        return inductor_bmm if self.batched else inductor_mm

    @property
    def shape(self) -> dict:
        """The problem as one size of a many-shape run."""
        batch = {"Q": self.Q, "stride_aq": self.stride_a[0], "stride_bq": self.stride_b[0]} if self.batched else {}
        (sam, sak), (sbk, sbn) = self.stride_a[-2:], self.stride_b[-2:]
        return {**batch, "M": self.M, "N": self.N, "K": self.K, "stride_am": sam, "stride_ak": sak,
                "stride_bk": sbk, "stride_bn": sbn, "dtype": self.dtype}

    @property
    def label(self) -> str:
        batch = f"{self.Q}x" if self.batched else ""
        return f"{self.op} {batch}{self.M}x{self.N}x{self.K} {self.dtype}"


def problem_of(op: str, shapes, strides, dtypes) -> Optional[Problem]:
    """The GEMM of an Inductor ``mm``, ``addmm``, ``bmm`` or ``baddbmm`` (the last two inputs are
    the matrices), or None where kerntune leaves it to Inductor: another operation, an element
    type outside ``DTYPES``, inputs of the wrong rank or without a unit stride in their last
    two dimensions."""
    if op not in TEMPLATES or len(shapes) < 2:
        return None
    rank = 3 if TEMPLATES[op] == "triton::bmm" else 2
    a, b = (tuple(shape) for shape in shapes[-2:])
    stride_a, stride_b = (tuple(stride) for stride in strides[-2:])
    if len(a) != rank or len(b) != rank or a[:-2] != b[:-2]:
        return None
    (m, k), (k2, n) = a[-2:], b[-2:]
    names = {str(d).removeprefix("torch.") for d in dtypes[-2:]}
    if k != k2 or m * n * k == 0 or len(names) != 1 or not names <= set(DTYPES):
        return None
    if 1 not in stride_a[-2:] or 1 not in stride_b[-2:]:
        return None
    return Problem(op, m, n, k, stride_a, stride_b, names.pop(), a[0] if rank == 3 else 1)


def plain(rows: int, cols: int, stride: tuple) -> bool:
    """Whether a ``rows x cols`` matrix with these strides is plainly row- or column-major,
    where Inductor's template tells the compiler its rows are contiguous runs."""
    return stride == (cols, 1) or stride == (1, rows)


def constants(problem: Problem) -> dict:
    """The kernel's compile-time constants for a problem (the output is contiguous)."""
    (sam, sak), (sbk, sbn) = problem.stride_a[-2:], problem.stride_b[-2:]
    made = {"M": problem.M, "N": problem.N, "K": problem.K, "stride_am": sam, "stride_ak": sak,
            "stride_bk": sbk, "stride_bn": sbn, "stride_cm": problem.N, "stride_cn": 1,
            "PLAIN_A": plain(problem.M, problem.K, problem.stride_a[-2:]),
            "PLAIN_B": plain(problem.K, problem.N, problem.stride_b[-2:])}
    if problem.batched:
        made.update(stride_aq=problem.stride_a[0], stride_bq=problem.stride_b[0], stride_cq=problem.M * problem.N)
    return made


def grid(problem: Problem):
    """The launch grid of a problem as a function of a configuration (``META``)."""
    return lambda META: (triton.cdiv(problem.M, META["BLOCK_M"]) * triton.cdiv(problem.N, META["BLOCK_N"]), problem.Q)


def entry(problem: Problem, config: dict, template_hash: Optional[str]) -> dict:
    """The lookup-table entry that makes Inductor build ``config`` for this problem: the
    template's own parameter names, with what it derives (``EVEN_K``) computed here."""
    made = {"template_id": problem.template, "BLOCK_M": config["BLOCK_M"], "BLOCK_N": config["BLOCK_N"],
            "BLOCK_K": config["BLOCK_K"], "GROUP_M": config["GROUP_M"], "num_stages": config["num_stages"],
            "num_warps": config["num_warps"], "EVEN_K": problem.K % config["BLOCK_K"] == 0,
            "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32", "hint_override": None}
    if template_hash is not None:
        made["template_hash"] = template_hash
    return made


def aten_entry(problem: Problem) -> dict:
    """The lookup-table entry that keeps ATen's GEMM (cuBLAS) for this problem."""
    return {"template_id": f"aten::{problem.op}"}

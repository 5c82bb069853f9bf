"""Hopper's TMA tensor descriptors as arguments: host-side ``TensorDescriptor``s whose block
shape each configuration's ``pre_hook`` sets (Triton's tutorials 06 and 09), and descriptors
the kernel makes itself (``tl.make_tensor_descriptor``, which needs ``triton.set_allocator``).
The compile tests run without a GPU; the others tune and check on one."""

import textwrap

import pytest

pytest.importorskip("triton")

import kerntune  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402


@triton.jit
def doubled_tiles(in_desc, out_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0) * BLOCK_M
    column = tl.program_id(1) * BLOCK_N
    out_desc.store([row, column], in_desc.load([row, column]) * 2)


def set_block_shapes(nargs):
    block = [nargs["BLOCK_M"], nargs["BLOCK_N"]]
    nargs["in_desc"].block_shape = block
    nargs["out_desc"].block_shape = block


def _descriptors(rows=512, columns=256):
    placeholder = [1, 1]  # the pre_hook sets the real block shape, as the tutorials do
    source = kerntune.Tensor("float16", (rows, columns))
    target = kerntune.Tensor("float16", (rows, columns), data_ptr=1 << 24)
    return {"in_desc": TensorDescriptor.from_tensor(source, placeholder),
            "out_desc": TensorDescriptor.from_tensor(target, placeholder)}


def _tensor_maps(row):
    return [p for p in row["launch"]["params"] if p["kind"] == "tensor_map"]


def test_each_configurations_pre_hook_sets_the_block_shape_its_descriptors_are_compiled_and_encoded_with():
    blocks = [(64, 64), (128, 32), (16, 128)]
    configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, pre_hook=set_block_shapes) for m, n in blocks]
    rows = kerntune.compile(doubled_tiles, _descriptors(), configs=configs, compile_workers=2)
    assert [r["status"] for r in rows] == ["compiled"] * 3, [r.get("reason") for r in rows]
    for row, (m, n) in zip(rows, blocks):
        maps = _tensor_maps(row)
        assert [p["index"] for p in maps] == [0, 1]  # over the buffers of in_desc and out_desc
        for p in maps:
            # Triton's box: the rows as set; the columns at most one swizzle span (128 bytes).
            assert p["map"]["block"] == [m, min(n, 64)], (row["config"], p["map"])
            assert p["map"]["shape"] == [512, 256] and p["map"]["strides"] == [256, 1]
            assert p["map"]["elem_size"] == 2


def test_a_descriptor_is_followed_by_its_shape_as_i32_and_its_strides_as_i64():
    configs = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, pre_hook=set_block_shapes)]
    (row,) = kerntune.compile(doubled_tiles, _descriptors(), configs=configs)
    params = row["launch"]["params"]
    import base64
    import struct

    def value(p, fmt):
        return struct.unpack(fmt, base64.b64decode(p["bytes"]))[0]

    assert params[0]["kind"] == "tensor_map"
    assert [value(p, "<i") for p in params[1:3]] == [512, 256]
    assert [value(p, "<q") for p in params[3:5]] == [256, 1]
    assert params[5]["kind"] == "tensor_map" and params[5]["index"] == 1


def test_a_pre_hook_that_fails_fails_its_configuration_only_with_the_hooks_message():
    def picky(nargs):
        if nargs["BLOCK_M"] == 32:
            raise ValueError("no 32-row tiles here")
        set_block_shapes(nargs)

    configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": 64}, pre_hook=picky) for m in (64, 32)]
    rows = kerntune.compile(doubled_tiles, _descriptors(), configs=configs)
    assert rows[0]["status"] == "compiled"
    assert rows[1]["status"] != "compiled"
    assert "no 32-row tiles here" in rows[1]["reason"]


# The tutorials' pattern on the GPU, as a user's script: module-level tensors, descriptors
# built over them with a placeholder block shape, a config pre_hook that sets it, the
# decorator renamed; and a kernel that builds its descriptors itself, with the allocator
# Triton needs for them.
HOST_DESCRIPTORS = textwrap.dedent('''
    import torch, triton, triton.language as tl, kerntune
    from triton.tools.tensor_descriptor import TensorDescriptor

    def set_block_shapes(nargs):
        block = [nargs["BLOCK_M"], nargs["BLOCK_N"]]
        nargs["in_desc"].block_shape = block
        nargs["out_desc"].block_shape = block

    @kerntune.autotune(configs=[triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, pre_hook=set_block_shapes)
                                for m, n, w in [(64, 64, 4), (128, 64, 4), (64, 128, 8), (128, 128, 8)]],
                       key=["M", "N"])
    @triton.jit
    def scaled_tiles(in_desc, out_desc, M, N, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        row = tl.program_id(0) * BLOCK_M
        column = tl.program_id(1) * BLOCK_N
        out_desc.store([row, column], (in_desc.load([row, column]) * scale).to(tl.float16))

    M, N = 1000, 4096  # rows not a multiple of the blocks: the descriptors clip the edge tiles
    a = torch.randn(M, N, device="cuda", dtype=torch.float16)
    b = torch.empty_like(a)
    a_desc = TensorDescriptor.from_tensor(a, [1, 1])
    b_desc = TensorDescriptor.from_tensor(b, [1, 1])
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    scaled_tiles[grid](a_desc, b_desc, M, N, 3.0)
    torch.testing.assert_close(b, (a * 3).to(torch.float16))
    print("best", scaled_tiles.best_config.kwargs, "matches torch")
''')

DEVICE_DESCRIPTORS = textwrap.dedent('''
    import torch, triton, triton.language as tl, kerntune

    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))

    @kerntune.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in [(64, 4), (128, 4), (128, 8)]],
                       key=["M", "N"])
    @triton.jit
    def row_sums(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
        x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, 64])
        row = tl.program_id(0) * BLOCK
        total = tl.zeros([BLOCK], dtype=tl.float32)
        for column in range(0, N, 64):
            total += tl.sum(x_desc.load([row, column]).to(tl.float32), axis=1)
        rows = row + tl.arange(0, BLOCK)
        tl.store(out_ptr + rows, total, mask=rows < M)

    M, N = 2000, 1024
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    out = torch.empty(M, device="cuda", dtype=torch.float32)
    row_sums[lambda meta: (triton.cdiv(M, meta["BLOCK"]),)](x, out, M, N)
    torch.testing.assert_close(out, x.float().sum(1), atol=1e-2, rtol=1e-3)
    print("best", row_sums.best_config.kwargs, "matches torch")
''')


@pytest.mark.gpu
def test_host_descriptors_set_by_a_config_pre_hook_tune_and_check_like_tensors(script_runner):
    assert "matches torch" in script_runner(HOST_DESCRIPTORS)


@pytest.mark.gpu
def test_descriptors_the_kernel_makes_itself_get_their_global_scratch(script_runner):
    assert "matches torch" in script_runner(DEVICE_DESCRIPTORS)

"""Pointer tables: tensors of device addresses that a kernel loads and casts to pointers, as
Triton's grouped-GEMM tutorial passes its groups' matrices. The benchmark worker gets copies
of the tensors they point into and its own addresses in its copy of each table; what a kernel
writes through a table is checked like any other output. The scripts run as files, in the
tutorials' shape: top-level code, tensors in module globals, tables built from data_ptr()."""

import textwrap

import pytest

from kerntune._pointer_tables import pointer_table


def test_a_tensor_of_addresses_inside_this_processs_allocations_is_a_pointer_table():
    segments = [(1 << 32, 1 << 20), (1 << 40, 4096)]
    assert pointer_table([(1 << 32) + 256, (1 << 40) + 4000], segments)
    assert pointer_table([0, (1 << 32)], segments), "null entries are allowed"
    assert not pointer_table([(1 << 32) + (1 << 20)], segments), "one past the end is outside"
    assert not pointer_table([3, 4, 5], segments), "indices are not addresses"
    assert not pointer_table([0, 0], segments), "an all-zero table says nothing"


GROUPED = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl
    import kerntune

    @triton.jit
    def grouped_axpb(x_ptrs, y_ptrs, sizes, SKIP_LAST: tl.constexpr, BLOCK: tl.constexpr):
        group = tl.program_id(1)
        if SKIP_LAST and group == tl.num_programs(1) - 1:
            return
        n = tl.load(sizes + group)
        x = tl.load(x_ptrs + group).to(tl.pointer_type(tl.float32))
        y = tl.load(y_ptrs + group).to(tl.pointer_type(tl.float32))
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y + offsets, tl.load(x + offsets, mask=mask) * 2 + 1, mask=mask)

    xs = [torch.randn(n, device="cuda") for n in (1000, 3000, 517)]
    ys = [torch.full_like(x, -7.0) for x in xs]
    x_ptrs = torch.tensor([x.data_ptr() for x in xs], device="cuda")
    y_ptrs = torch.tensor([y.data_ptr() for y in ys], device="cuda")
    sizes = torch.tensor([x.numel() for x in xs], device="cuda", dtype=torch.int32)
''')

TUNED = GROUPED + textwrap.dedent('''
    # Skipping the last group does less work, so it is the fastest: only the check of what
    # the kernel writes through y_ptrs keeps it from winning.
    result = kerntune.tune(grouped_axpb, {"x_ptrs": x_ptrs, "y_ptrs": y_ptrs, "sizes": sizes},
                           grid=lambda c: (triton.cdiv(3000, c["BLOCK"]), 3),
                           configs=[triton.Config({"SKIP_LAST": False, "BLOCK": 128}),
                                    triton.Config({"SKIP_LAST": False, "BLOCK": 256}),
                                    triton.Config({"SKIP_LAST": True, "BLOCK": 128}),
                                    triton.Config({"SKIP_LAST": False, "BLOCK": 512})])
    statuses = {(r["config"]["SKIP_LAST"], r["config"]["BLOCK"]): r["status"] for r in result.results}
    assert statuses[(True, 128)] == "invalid_output", statuses
    assert all(s == "ok" for key, s in statuses.items() if not key[0]), statuses
    assert result.best_config["SKIP_LAST"] is False, result.best_config
    assert all(torch.equal(y, torch.full_like(y, -7.0)) for y in ys), "tuning wrote into the caller's tensors"
    print("checked through the table")
''')

AUTOTUNED = GROUPED.replace("@triton.jit", textwrap.dedent('''
    @kerntune.autotune(configs=[triton.Config({"SKIP_LAST": False, "BLOCK": b}, num_warps=w)
                                for b in (128, 256, 512) for w in (2, 4)], key=[])
    @triton.jit''').strip()) + textwrap.dedent('''
    grouped_axpb[lambda META: (triton.cdiv(3000, META["BLOCK"]), 3)](x_ptrs, y_ptrs, sizes)
    for x, y in zip(xs, ys):
        torch.testing.assert_close(y, x * 2 + 1)
    print("matches torch")
''')

FREED = GROUPED + textwrap.dedent('''
    stale = torch.tensor([xs[0].data_ptr(), 0], device="cuda")
    del xs[0]  # the allocator keeps the memory; no tensor holds it any more
    try:
        kerntune.tune(grouped_axpb, {"x_ptrs": stale, "y_ptrs": y_ptrs, "sizes": sizes}, grid=(1, 1),
                      configs=[triton.Config({"SKIP_LAST": False, "BLOCK": 128})])
    except kerntune.ArgumentError as error:
        print(error)
''')


@pytest.mark.gpu
def test_outputs_written_through_a_pointer_table_are_checked_and_the_callers_tensors_left_alone(script_runner):
    assert "checked through the table" in script_runner(TUNED)


@pytest.mark.gpu
def test_autotune_over_pointer_tables_runs_as_a_script_and_the_call_computes(script_runner):
    assert "matches torch" in script_runner(AUTOTUNED)


@pytest.mark.gpu
def test_a_table_entry_in_no_live_tensor_is_refused_in_one_line(script_runner):
    out = script_runner(FREED)
    assert "argument x_ptrs holds device addresses" in out and "entry 0" in out, out

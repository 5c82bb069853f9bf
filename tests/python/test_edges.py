"""Edge sizes for Triton kernels (``tune(..., edge_args=...)``): a configuration right only
where its blocks divide the size is caught at another size, on the GPU. The bad-input
cases are in test_bad_input.py."""

import pytest
import triton
import triton.language as tl

import kerntune

pytestmark = pytest.mark.gpu

N = 1 << 16
EDGE = 60_001  # no multiple of any block, nor of 16 (another specialization)


@triton.jit
def _scale(out_ptr, x_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    # MODE 0: right at every size. MODE 1: masks as if n were a multiple of BLOCK, so the
    # last partial block is dropped: right at N, wrong at EDGE. MODE 2: stores without a
    # mask, so at EDGE it writes past the end of out_ptr.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    limit = n if MODE != 1 else (n // BLOCK) * BLOCK
    mask = offsets < limit
    value = 2.0 * tl.load(x_ptr + offsets, mask=mask, other=0.0)
    if MODE == 2:
        tl.store(out_ptr + offsets, value)
    else:
        tl.store(out_ptr + offsets, value, mask=mask)


def _call(n):
    import torch

    x = torch.randn(n, device="cuda")
    return {"out_ptr": torch.empty_like(x), "x_ptr": x, "n": n}


def _grid(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


# The reference configurations come first in this order (MODE 0), so they agree everywhere.
PARAMS = {"MODE": [0, 1], "BLOCK": [256, 1024]}


def test_a_configuration_that_drops_the_tail_is_wrong_at_an_edge_size_and_cannot_win(db):
    result = kerntune.tune(_scale, _call(N), _grid, PARAMS, edge_args=[_call(EDGE)], strategy="brute_force", db=db,
                           progress=False, finalists=4, finalists_within=1e9)
    assert result.verified_sizes == [f"n = {EDGE}"], result.verified_sizes
    assert result.edge_checked == 4, "with every configuration a finalist, each is checked there"
    for row in result.results:
        if row["config"]["MODE"] == 1:
            assert row["status"] == "invalid_output", row
            assert row["reason"].startswith(f"at the edge size n = {EDGE} (the call's size passed): out_ptr:"), row
        else:
            assert row["status"] == "ok", row
    assert result.best_config["MODE"] == 0
    assert result.phases["edge_sizes_s"] > 0


def test_reference_configurations_that_disagree_at_an_edge_size_ask_for_an_answer(db):
    import torch

    params = {"MODE": [1, 0], "BLOCK": [256]}  # the first reference drops the tail there
    with pytest.raises(kerntune.ReferenceDisagreementError, match=f"at the edge size n = {EDGE}"):
        kerntune.tune(_scale, _call(N), _grid, params, edge_args=[_call(EDGE)], db=db, progress=False)
    edge = _call(EDGE)
    answer = {"out_ptr": 2.0 * edge["x_ptr"]}
    result = kerntune.tune(_scale, _call(N), _grid, params, edge_args=[(edge, answer)], strategy="brute_force", db=db,
                           progress=False, finalists=2, finalists_within=1e9)
    assert [r["config"]["MODE"] for r in result.results if r["status"] == "invalid_output"] == [1], result.results
    assert result.best_config["MODE"] == 0
    assert torch.equal(edge["x_ptr"] * 2.0, answer["out_ptr"]), "the checks ran on copies: the caller's inputs are as given"


def test_a_configuration_that_stores_past_the_end_at_an_edge_size_is_caught_in_the_guard(db):
    """The edge checks run in the caller's process: each tensor is a copy between guard
    zones, so a store past its end is seen there and the caller's tensors are untouched."""
    import torch

    edge = _call(EDGE)
    before = {name: edge[name].clone() for name in ("x_ptr", "out_ptr")}
    result = kerntune.tune(_scale, _call(N), _grid, {"MODE": [0, 2], "BLOCK": [256, 1024]}, edge_args=[edge],
                           strategy="brute_force", db=db, progress=False, finalists=4, finalists_within=1e9)
    for row in result.results:
        if row["config"]["MODE"] == 2:
            assert row["status"] == "invalid_output", row
            assert row["reason"].startswith(f"at the edge size n = {EDGE} (the call's size passed): it writes outside "
                                            "out_ptr (0 bytes changed before it, "), row
        else:
            assert row["status"] == "ok", row
    assert result.best_config["MODE"] == 0
    same = [torch.equal(edge[name].view(torch.uint8), before[name].view(torch.uint8)) for name in before]
    assert all(same), "the caller's tensors are as they were, byte for byte"

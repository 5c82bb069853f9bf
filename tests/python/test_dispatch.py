"""Dispatch tables: ``@kerntune.autotune(..., table=FILE, new_keys="nearest")`` launches a
key it has not tuned with the nearest tuned key's configuration and tunes nothing on the
call; ``kernel.save_table(FILE)`` writes the table. Without a GPU: the nearest rule, the
table's round trip, and what a decorated kernel answers for a key (never tuning)."""

import pytest

triton = pytest.importorskip("triton")

import kerntune  # noqa: E402
import kerntune._autotune as autotune_module  # noqa: E402
import triton.language as tl  # noqa: E402
from kerntune._dispatch import nearest  # noqa: E402


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 256, 1024) for w in (2, 4)]


def test_the_nearest_key_is_close_on_a_log_scale_and_the_same_in_every_part_that_is_not_a_number():
    tuned = [(16, "torch.float16"), (256, "torch.float16"), (64, "torch.bfloat16")]
    assert nearest((48, "torch.float16"), tuned) == (16, "torch.float16"), "48 is nearer 16 than 256 on a log scale"
    assert nearest((100, "torch.float16"), tuned) == (256, "torch.float16")
    assert nearest((64, "torch.float16"), tuned) == (16, "torch.float16"), "a tie goes to the smaller key"
    assert nearest((64, "torch.float32"), tuned) is None, "no key of that dtype"
    shapes = [(("torch.float16", (16, 4096)),), (("torch.float16", (1024, 4096)),)]
    assert nearest((("torch.float16", (100, 4096)),), shapes) == shapes[0], "tensors in key= compare by shape"


def test_a_saved_table_answers_keys_it_never_tuned_from_the_nearest_without_tuning(tmp_path, monkeypatch):
    def no_tuning(*args, **kwargs):
        raise AssertionError("tuned on the call")

    monkeypatch.setattr(autotune_module, "tune", no_tuning)
    first = kerntune.autotune(configs=CONFIGS, key=["n"])(scale)
    first._best = {(1024,): {"BLOCK": 64, "num_warps": 2}, (1 << 20,): {"BLOCK": 1024, "num_warps": 4}}
    path = first.save_table(tmp_path / "scale.json")
    served = kerntune.autotune(configs=CONFIGS, key=["n"], table=path, new_keys="nearest")(scale)
    assert served._config((2000,), {}, None) == {"BLOCK": 64, "num_warps": 2}
    assert served._config((1 << 19,), {}, None) == {"BLOCK": 1024, "num_warps": 4}
    assert served.cache[(2000,)].kwargs == {"BLOCK": 64} and served.cache[(2000,)].num_warps == 2


def test_a_key_with_no_tuned_neighbour_is_a_one_line_error_that_says_what_to_do(tmp_path):
    served = kerntune.autotune(configs=CONFIGS, key=["n"], new_keys="nearest")(scale)
    with pytest.raises(kerntune.ArgumentError, match="no tuned key can stand for key \\(4096,\\).*give table="):
        served._config((4096,), {}, None)


def test_bad_dispatch_settings_are_refused_when_the_kernel_is_decorated(tmp_path):
    with pytest.raises(kerntune.ArgumentError, match="new_keys = 'closest'"):
        kerntune.autotune(configs=CONFIGS, key=["n"], new_keys="closest")(scale)
    other = tmp_path / "other.json"
    kerntune.autotune(configs=CONFIGS, key=["n"])(scale).save_table(other)
    with pytest.raises(kerntune.ArgumentError, match='keyed by \\["n"\\], not scale keyed by \\["x_ptr"\\]'):
        kerntune.autotune(configs=CONFIGS, key=["x_ptr"], table=other)(scale)
    (tmp_path / "junk.json").write_text("[1, 2]")
    with pytest.raises(kerntune.ArgumentError, match="junk.json': not a dispatch table \\(kernel.save_table\\(\\)"):
        kerntune.autotune(configs=CONFIGS, key=["n"], table=tmp_path / "junk.json")(scale)


def test_a_table_that_the_earlier_python_writer_wrote_is_still_read(tmp_path):
    path = tmp_path / "old.json"
    path.write_text('{\n "format": "kerntune dispatch table",\n "kernel": "scale",\n "key": [\n  "n"\n ],\n "entries": [\n'
                    '  {\n   "key": [\n    1024,\n    "torch.float32"\n   ],\n   "config": {\n    "BLOCK": 64,\n'
                    '    "num_warps": 2\n   }\n  }\n ]\n}\n')
    served = kerntune.autotune(configs=CONFIGS, key=["n"], table=path, new_keys="nearest")(scale)
    assert served._config((4000, "torch.float32"), {}, None) == {"BLOCK": 64, "num_warps": 2}


@pytest.mark.gpu
def test_a_served_kernel_launches_untuned_sizes_from_the_saved_table_and_computes_right(tmp_path, script_runner):
    table = tmp_path / "table.json"
    assert "served" in script_runner(f'''
import torch, triton, triton.language as tl, kerntune

@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)

configs = [triton.Config({{"BLOCK": b}}, num_warps=w) for b in (64, 256, 1024) for w in (2, 4)]
grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
tuner = kerntune.autotune(configs=configs, key=["n"], progress=False, restore_value=["x_ptr"])(scale)
for n in (1000, 1 << 20):
    x = torch.ones(n, device="cuda")
    tuner[grid](x, n)
tuner.save_table({str(table)!r})
served = kerntune.autotune(configs=configs, key=["n"], table={str(table)!r}, new_keys="nearest")(scale)
for n in (3000, 700_000):
    x = torch.ones(n, device="cuda")
    served[grid](x, n)
    torch.testing.assert_close(x, torch.full_like(x, 2.0))
assert served.result is None, "nothing was tuned"
assert served.cache[(3000, "torch.float32")] == served.cache[(1000, "torch.float32")]
print("served")
''')

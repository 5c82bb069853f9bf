"""bench/moe_real.py without a GPU: its arguments and its errors, the checks of vLLM's files
(sha256, and every import against the shim), the brute force's chunks adding up, the
pure-torch replacements of vLLM's CUDA ops against plain loops (with torch), and vLLM's own
files imported through the shim with the table written and read back by vLLM's own loader
(with vLLM's files: `MOE_VLLM_DIR` or `.device/vllm/src`, never committed)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
sys.path.insert(0, BENCH)

import moe_real  # noqa: E402
import moe_vllm  # noqa: E402

VLLM_DIR = os.environ.get("MOE_VLLM_DIR") or os.path.join(BENCH, "..", ".device", "vllm", "src")


def refusal(argv) -> str:
    with pytest.raises(SystemExit) as stopped:
        moe_real.parse(argv)
    message = str(stopped.value.code)
    assert "\n" not in message
    return message


def test_bad_arguments_get_one_line_that_says_what_to_give():
    assert "give each batch size once" in refusal(["d", "--kerntune", "--batch-sizes", "1,2,1"])
    assert "positive" in refusal(["d", "--kerntune", "--batch-sizes", "0,2"])
    assert "START:END" in refusal(["d", "--brute-force", "--configs", "480:0"])
    assert "START:END" in refusal(["d", "--brute-force", "--configs", "12"])
    assert "give at least one of --calibrate" in refusal(["d"])
    assert "number of GPUs or all" in refusal(["d", "--brute-force", "--gpus", "two"])
    assert "no such file" in refusal(["d", "--compare", "--brute", "missing.jsonl"])


def test_arguments_parse_into_sizes_and_a_slice_of_the_script_list():
    args = moe_real.parse(["d", "--brute-force", "--batch-sizes", "1,64,4096", "--configs", "480:960", "--gpus", "all"])
    assert args.batch_sizes == [1, 64, 4096]
    assert list(range(1920))[args.configs] == list(range(480, 960))
    assert moe_real.parse(["d", "--kerntune", "--configs", "960:"]).configs == slice(960, None)


def sources(**changed) -> dict:
    """Stand-ins for vLLM's files, every import a shimmed one; `changed` replaces some."""
    texts = {name: "import torch\n" for name in moe_vllm.PLACED}
    texts["fused_moe.py"] = textwrap.dedent("""\
        import vllm.envs as envs
        from vllm.platforms import current_platform

        def try_get_optimal_moe_config():
            from vllm.model_executor.layers.fused_moe import get_config
        """)
    texts["benchmark_moe.py"] = "import ray\nfrom ray.experimental.tqdm_ray import tqdm\n" \
                                "from vllm.model_executor.layers.fused_moe.fused_moe import *\n"
    texts["config.py"] = "@decorated\ndef _get_config_dtype_str(dtype):\n    return None\n"
    texts.update(changed)
    return texts


def test_imports_the_shim_provides_pass_function_level_ones_included():
    moe_vllm.check_imports(moe_vllm.scratch_modules(sources()))


def test_an_import_the_shim_lacks_is_named_with_its_file_and_line():
    changed = sources(**{"activation.py": "import torch\nfrom vllm.platforms import current_platform, new_name\n"})
    with pytest.raises(moe_vllm.VllmFilesError, match=r"activation.py, line 2, imports new_name from vllm.platforms"):
        moe_vllm.check_imports(moe_vllm.scratch_modules(changed))
    changed = sources(**{"benchmark_moe.py": "import vllm.new_module\n"})
    with pytest.raises(moe_vllm.VllmFilesError, match=r"imports vllm.new_module, a module"):
        moe_vllm.check_imports(moe_vllm.scratch_modules(changed))


def test_a_rule_taken_from_vllm_keeps_its_decorator_and_a_missing_one_is_named():
    assert moe_vllm.extract(sources()["config.py"], ["_get_config_dtype_str"], "config.py").startswith("@decorated\n")
    with pytest.raises(moe_vllm.VllmFilesError, match="config.py has no top-level gone"):
        moe_vllm.extract("x = 1\n", ["gone"], "config.py")


def write_files(folder, texts):
    for name, text in texts.items():
        (folder / name).write_text(text)


def test_vllm_files_are_refused_when_missing_or_not_the_expected_ones(tmp_path):
    with pytest.raises(moe_vllm.VllmFilesError, match="is not a folder"):
        moe_vllm.read_sources(str(tmp_path / "nowhere"))
    texts = sources()
    write_files(tmp_path, {k: v for k, v in texts.items() if k != "activation.py"})
    with pytest.raises(moe_vllm.VllmFilesError, match="activation.py is missing"):
        moe_vllm.read_sources(str(tmp_path))
    write_files(tmp_path, texts)
    with pytest.raises(moe_vllm.VllmFilesError, match=r"has sha256 .*--any-vllm"):
        moe_vllm.read_sources(str(tmp_path))
    assert moe_vllm.read_sources(str(tmp_path), any_version=True) == texts


def test_the_script_reports_bad_files_in_one_line_and_exit_status_2(tmp_path):
    done = subprocess.run([sys.executable, os.path.join(BENCH, "moe_real.py"), str(tmp_path / "nowhere"), "--kerntune"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "is not a folder" in done.stderr, done.stderr
    assert not (tmp_path / "moe-out").exists()


def test_brute_force_chunks_add_up_to_the_fastest_configuration_and_the_wall_time_per_batch_size(tmp_path):
    def row(m, block_n, us=None):
        base = {"kind": "config", "batch_size": m, "config": {"BLOCK_SIZE_N": block_n}}
        return json.dumps({**base, "us": us} if us else {**base, "failure": "OutOfResources: shared memory"})

    def batch(m, span, wall):
        return json.dumps({"kind": "batch", "batch_size": m, "slice": span, "wall_s": wall})

    (tmp_path / "a.jsonl").write_text("\n".join([row(1, 32, 9.0), row(1, 64, 7.0), batch(1, "0:2", 3.0), row(8, 32),
                                                 batch(8, "0:2", 1.0)]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join([row(1, 128, 8.0), batch(1, "2:", 2.5), row(8, 64, 20.0),
                                                 batch(8, "2:", 4.0)]) + "\n")
    again = tmp_path / "a-again.jsonl"
    again.write_text((tmp_path / "a.jsonl").read_text())
    record = moe_real.brute_record([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), str(again)])
    assert record["winners"] == {1: {"BLOCK_SIZE_N": 64}, 8: {"BLOCK_SIZE_N": 64}}
    assert record["wall_s"] == {1: 5.5, 8: 5.0}
    assert record["covered"] == {1: 3, 8: 2}


def test_moe_align_block_size_groups_each_expert_padded_to_whole_blocks():
    torch = pytest.importorskip("torch", reason="the replacements of vLLM's CUDA ops are torch code")
    generator = torch.Generator().manual_seed(0)
    for tokens, topk, experts, block in [(1, 2, 8, 16), (5, 8, 128, 16), (64, 2, 8, 64), (300, 8, 64, 32)]:
        ids = torch.stack([torch.randperm(experts, generator=generator)[:topk] for _ in range(tokens)]).int()
        numel = ids.numel()
        capacity = numel + experts * (block - 1)
        if numel < experts:
            capacity = min(numel * block, capacity)
        sorted_ids = torch.empty(capacity, dtype=torch.int32)
        expert_ids = torch.empty(-(-capacity // block), dtype=torch.int32)
        total = torch.empty(1, dtype=torch.int32)
        moe_vllm.moe_align_block_size(ids, experts, block, sorted_ids, expert_ids, total)
        flat = ids.reshape(-1).tolist()
        position, blocks = 0, []
        for e in range(experts):
            slots = [i for i, x in enumerate(flat) if x == e]
            padded = -(-len(slots) // block) * block
            assert sorted_ids[position:position + padded].tolist() == slots + [numel] * (padded - len(slots))
            blocks += [e] * (padded // block)
            position += padded
        assert total.item() == position
        assert sorted_ids[position:].tolist() == [numel] * (capacity - position)
        assert expert_ids.tolist() == blocks + [-1] * (len(expert_ids) - len(blocks))


def test_the_other_ops_compute_what_vllm_documents():
    torch = pytest.importorskip("torch", reason="the replacements of vLLM's CUDA ops are torch code")
    gating = torch.randn(6, 16)
    weights, ids, _ = moe_vllm.fused_topk(torch.zeros(6, 4), gating, 3, renormalize=True)
    for row in range(6):
        expected = sorted(range(16), key=lambda e: -gating[row, e].item())[:3]
        assert ids[row].tolist() == expected and ids.dtype == torch.int32
    assert torch.allclose(weights.sum(dim=-1), torch.ones(6))
    x = torch.randn(5, 8)
    out = torch.empty(5, 4)
    moe_vllm.silu_and_mul(out, x)
    assert torch.allclose(out, x[:, :4] * torch.sigmoid(x[:, :4]) * x[:, 4:])
    cache = torch.randn(5, 3, 7)
    summed = torch.empty(5, 7)
    moe_vllm.moe_sum(cache, summed)
    assert torch.allclose(summed, cache[:, 0] + cache[:, 1] + cache[:, 2])
    quantized, scale = moe_vllm.scaled_fp8_quant(torch.tensor([1.0, -2.0, 1e4]), torch.tensor([0.5]))
    assert quantized.float().tolist() == [2.0, -4.0, 448.0] and scale.item() == 0.5


# vLLM's files imported through the shim in a process of their own; without torch, a stand-in
# whose every attribute is a mock: importing them needs only the names, and vLLM's loader
# reads the table as JSON.
ROUND_TRIP = r'''
import json, os, sys, tempfile
from unittest import mock
sys.path.insert(0, sys.argv[1])
try:
    import torch
except ImportError:
    torch = mock.MagicMock(name="torch")
    sys.modules.update({"torch": torch, "torch.nn": torch.nn, "torch.nn.functional": torch.nn.functional})
import moe_kerntune, moe_real, moe_vllm
fm, bm = moe_vllm.load(sys.argv[2])
fm.current_platform.get_device_name = lambda device_id=0: "NVIDIA H100 80GB HBM3"
winners = {m: dict(zip(moe_kerntune.KEYS, (16 if m < 24 else 64, 64, 128, 1, 4, m % 3 + 2)))
           for m in moe_real.BATCH_SIZES}
folder = tempfile.mkdtemp()
table = moe_kerntune.write_table(fm, bm, moe_real.Model("qwen3", "bf16"), winners, folder)
w1, w2 = (128, 768, 2048), (128, 2048, 384)
nearest = {m: fm.try_get_optimal_moe_config(w1, w2, 8, None, m)["num_stages"] for m in (3, 20, 5000)}
print(json.dumps({"table": table, "nearest": nearest, "space": len(bm.get_configs_compute_bound(True, None))}))
'''


@pytest.mark.skipif(not os.path.isfile(os.path.join(VLLM_DIR, "fused_moe.py")),
                    reason="vLLM's files are not here (MOE_VLLM_DIR or .device/vllm/src; never committed)")
def test_vllm_files_import_through_the_shim_and_load_the_table_kerntune_writes():
    done = subprocess.run([sys.executable, "-c", ROUND_TRIP, BENCH, VLLM_DIR], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["table"]["file"] == "E=128,N=384,device_name=NVIDIA_H100_80GB_HBM3.json"
    assert answer["table"]["errors"] == []
    # vLLM's nearest key: 3 -> 2 (a tie goes to the first), 20 -> 16, 5000 -> 4096.
    assert answer["nearest"] == {"3": 2 % 3 + 2, "20": 16 % 3 + 2, "5000": 4096 % 3 + 2}
    assert answer["space"] == 1920

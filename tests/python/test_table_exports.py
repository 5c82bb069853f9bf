"""A dispatch table as other programs read it: ``kerntune.export_table`` writes vLLM's
fused-MoE config file (checked here with a loader written from vLLM's description, since
vLLM is not installed) and a C/C++ header (compiled and called where a C compiler is);
``kerntune.load_configs`` reads a table back as ``triton.Config``s per key."""

import json
import shutil
import subprocess

import pytest

triton = pytest.importorskip("triton")

import kerntune  # noqa: E402
import triton.language as tl  # noqa: E402
from kerntune import _dispatch  # noqa: E402

SIX = ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"]


def moe_config(block_m, group_m=1, **more):
    """A configuration of vLLM's fused-MoE kernel, its keys in an order vLLM does not write."""
    return {"num_stages": 3, "num_warps": 4, "GROUP_SIZE_M": group_m, "BLOCK_SIZE_K": 128, "BLOCK_SIZE_N": 64,
            "BLOCK_SIZE_M": block_m, **more}


TUNED = {(64,): moe_config(64), (1,): moe_config(16, 16), (16,): moe_config(16, 32, SPLIT_K=1), (24,): moe_config(32)}


def vllm_file_name(E, N, device_name, dtype=None, block_shape=None):
    """vLLM's get_config_file_name, written from its description."""
    device = device_name.replace(" ", "_")
    if "H200" in device.split("_"):
        device = "NVIDIA_H200"
    dtype_part = f",dtype={dtype}" if dtype else ""
    block_part = f",block_shape=[{block_shape[0]},{block_shape[1]}]" if block_shape and all(block_shape) else ""
    return f"E={E},N={N},device_name={device}{dtype_part}{block_part}.json"


def vllm_configs(path):
    """vLLM's get_moe_configs once it found the file: load, drop triton_version, int keys."""
    with open(path) as f:
        tuned = json.load(f)
    tuned.pop("triton_version", None)
    return {int(key): value for key, value in tuned.items()}


def vllm_config_for(configs, M):
    """vLLM's try_get_optimal_moe_config: the nearest batch size by absolute difference,
    ties to the key that comes first in the file."""
    return configs[min(configs.keys(), key=lambda x: abs(x - M))]


def written_table(tmp_path, best=TUNED, key=("M",)):
    path = tmp_path / "moe_table.json"
    _dispatch.write(path, "fused_moe_kernel", list(key), best)
    return path


def test_the_vllm_file_has_vllms_name_and_its_loader_finds_every_tuned_size_and_the_nearest_for_others(tmp_path):
    table = written_table(tmp_path)
    written = kerntune.export_table(table, tmp_path, format="vllm-moe", experts=8, intermediate=7168,
                                    device_name="NVIDIA H100 80GB HBM3", triton_version="3.6.0")
    assert written == str(tmp_path / vllm_file_name(8, 7168, "NVIDIA H100 80GB HBM3"))
    assert written.endswith("/E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json")
    configs = vllm_configs(written)
    assert list(configs) == [1, 16, 24, 64], "batch sizes ascending"
    for (M,), config in TUNED.items():
        assert vllm_config_for(configs, M) == config
        assert list(configs[M])[:6] == SIX, "the six keys first, as benchmark_moe.py writes them"
    assert list(configs[16]) == SIX + ["SPLIT_K"]
    assert vllm_config_for(configs, 20) == TUNED[(16,)], "20 is as near 16 as 24: the first in the file"
    assert vllm_config_for(configs, 4096) == TUNED[(64,)]
    with open(written) as f:
        text = f.read()
    script = {"triton_version": "3.6.0", **{str(M): {k: c[k] for k in SIX + [k for k in c if k not in SIX]}
                                           for (M,), c in sorted(TUNED.items())}}
    assert text == json.dumps(script, indent=4) + "\n", "byte for byte what benchmark_moe.py writes"


@pytest.mark.parametrize("device_name", ["NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"])
def test_the_file_name_follows_vllms_device_rule_dtype_and_block_shape(tmp_path, device_name):
    table = written_table(tmp_path)
    written = kerntune.export_table(table, tmp_path, format="vllm-moe", experts=128, intermediate=384,
                                    device_name=device_name, dtype="fp8_w8a8", block_shape=[128, 128])
    assert written == str(tmp_path / vllm_file_name(128, 384, device_name, "fp8_w8a8", [128, 128]))
    if "H200" in device_name:
        assert "device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json" in written


def test_a_table_vllm_cannot_load_and_bad_options_are_one_line_errors(tmp_path):
    shape = {"experts": 8, "intermediate": 7168, "device_name": "NVIDIA H100"}
    lacking = written_table(tmp_path, {(1,): {k: v for k, v in moe_config(16).items() if k != "GROUP_SIZE_M"}})
    with pytest.raises(kerntune.ArgumentError, match="the entry of M = 1 has no GROUP_SIZE_M, which vLLM's kernel needs"):
        kerntune.export_table(lacking, tmp_path, format="vllm-moe", **shape)
    two_names = written_table(tmp_path, {(1, 4096): moe_config(16)}, key=("M", "K"))
    with pytest.raises(kerntune.ArgumentError, match="keyed by the batch size alone"):
        kerntune.export_table(two_names, tmp_path, format="vllm-moe", **shape)
    not_integer = written_table(tmp_path, {(1.5,): moe_config(16)})
    with pytest.raises(kerntune.ArgumentError, match=r"M = 1\.5 is not a batch size"):
        kerntune.export_table(not_integer, tmp_path, format="vllm-moe", **shape)
    table = written_table(tmp_path)
    with pytest.raises(kerntune.ArgumentError, match="export options: unknown field `expert`"):
        kerntune.export_table(table, tmp_path, format="vllm-moe", expert=8, intermediate=1, device_name="x")
    with pytest.raises(kerntune.ArgumentError, match="export options: unknown variant `csv`"):
        kerntune.export_table(table, tmp_path, format="csv")
    with pytest.raises(kerntune.ArgumentTypeError, match="table: give a table file, a many-shape run's results or a @kerntune.autotune kernel"):
        kerntune.export_table(42, tmp_path, format="c-header")


@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


def tuned_scale():
    """A decorated kernel with three keys tuned (as its calls would key them: n, then the
    tensor's dtype)."""
    kernel = kerntune.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])(scale)
    kernel._best = {(1024, "torch.float32"): {"BLOCK": 64, "num_warps": 2},
                    (65536, "torch.float32"): {"BLOCK": 256, "num_warps": 4},
                    (1 << 20, "torch.float32"): {"BLOCK": 1024, "num_warps": 8}}
    return kernel


def test_the_c_header_of_a_decorated_kernel_answers_tuned_and_untuned_keys_as_kerntune_does(tmp_path):
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (cc) on this machine to compile the header with")
    kernel = tuned_scale()
    header = kerntune.export_table(kernel, tmp_path, format="c-header")
    assert header == str(tmp_path / "scale.h")
    sizes = [1, 1024, 2000, 8192, 65536, 100_000, 1 << 20, 1 << 24]
    calls = "".join(f'printf("%lld %lld\\n", scale_lookup({n}.0)->block, scale_lookup({n}.0)->num_warps);\n'
                    for n in sizes)
    (tmp_path / "use.c").write_text(f'#include <stdio.h>\n#include "scale.h"\nint main(void) {{\n{calls}return 0;\n}}\n')
    subprocess.run([compiler, "-Wall", "-Werror", str(tmp_path / "use.c"), "-o", str(tmp_path / "use"), "-lm"], check=True)
    answers = subprocess.run([str(tmp_path / "use")], check=True, capture_output=True, text=True).stdout.split("\n")
    for n, answer in zip(sizes, answers):
        expected = kernel._best[_dispatch.nearest((n, "torch.float32"), list(kernel._best))]
        assert answer == f"{expected['BLOCK']} {expected['num_warps']}", f"n = {n}"


def test_load_configs_reads_a_table_as_triton_configs_per_key(tmp_path):
    kernel = tuned_scale()
    path = kernel.save_table(tmp_path / "scale.json")
    configs = kerntune.load_configs(path)
    assert set(configs) == set(kernel._best)
    big = configs[(1 << 20, "torch.float32")]
    assert isinstance(big, triton.Config)
    assert (big.kwargs, big.num_warps) == ({"BLOCK": 1024}, 8)

"""Tuned configurations back into Triton: ``kerntune export --format triton`` writes the best
configurations, and ``kerntune.load_configs`` turns them into ``triton.Config`` objects that
``@triton.autotune`` and ``@kerntune.autotune`` take."""

import json

import pytest

import kerntune

triton = pytest.importorskip("triton")


def exported(tmp_path, configs):
    path = tmp_path / "matmul.json"
    document = {
        "kernel": "matmul_kernel",
        "device": "NVIDIA H100 80GB HBM3",
        "problem": "{}",
        "objective": {"name": "time", "higher_is_better": False},
        "configs": [{"config": c, "objective": 0.19 + i / 100} for i, c in enumerate(configs)],
    }
    path.write_text(json.dumps(document))
    return path


def test_exported_configs_become_triton_configs_best_first(tmp_path):
    path = exported(tmp_path, [
        {"BLOCK_M": 128, "BLOCK_N": 256, "num_warps": 8, "num_stages": 3, "num_ctas": 1, "maxnreg": 0, "ptx_options": ""},
        {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 4, "maxnreg": 128},
    ])
    first, second = kerntune.load_configs(path)
    assert isinstance(first, triton.Config)
    assert first.kwargs == {"BLOCK_M": 128, "BLOCK_N": 256}
    assert (first.num_warps, first.num_stages, first.num_ctas, first.maxnreg) == (8, 3, 1, None)
    assert second.kwargs == {"BLOCK_M": 64, "BLOCK_N": 128}
    assert (second.num_warps, second.num_stages, second.maxnreg) == (4, 4, 128)


def test_a_file_of_another_kind_is_refused_with_its_name(tmp_path):
    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"cache": {}}))
    with pytest.raises(kerntune.ArgumentError, match="cache.json: not a file of `kerntune export --format triton`"):
        kerntune.load_configs(path)

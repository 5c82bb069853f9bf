"""Shared fixtures: the examples' folder on the import path, and a results database per test."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "triton"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU with torch; skipped without one")


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    if os.environ.get("KERNTUNE_REQUIRE_GPU"):
        # Set on the GPU machine (gpu/check.sh): there a skipped GPU test is a failure.
        raise pytest.UsageError("KERNTUNE_REQUIRE_GPU is set, but torch finds no CUDA GPU")
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and torch")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "results.db")

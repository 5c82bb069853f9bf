"""The files kerntune shares with other tools, written from Python by the Rust writers the
CLI uses: ``kerntune.export`` against ``kerntune export``, byte for byte, and the T4
statuses of ``kerntune.file_utils`` as the T4 schema names them; and the rules Python
reads from Rust: the architecture a compile targets, the relay's command for Ray."""

import json
import os
import subprocess

import pytest

import kerntune
from kerntune import file_utils, util

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LANDSCAPE = os.path.join(ROOT, "data", "landscapes", "convolution_A4000_T4.json.gz")


@pytest.fixture
def store(tmp_path, kerntune_cli):
    """A store holding a recorded tuning, correct and failed configurations alike."""
    db = str(tmp_path / "results.db")
    subprocess.run([kerntune_cli, "import", LANDSCAPE, "--db", db], check=True, capture_output=True)
    return db


@pytest.mark.parametrize("python_format, cli_format", [("t4", "t4"), ("kernel_tuner", "kernel-tuner")])
def test_python_and_cli_exports_of_one_store_are_byte_identical(tmp_path, kerntune_cli, store, python_format,
                                                                 cli_format):
    from_cli = tmp_path / "cli.json"
    subprocess.run([kerntune_cli, "export", store, "--format", cli_format, "-o", str(from_cli)], check=True,
                   capture_output=True)
    from_python = kerntune.export(store, tmp_path / "python.json", format=python_format)
    assert from_python == str(tmp_path / "python.json")
    assert (tmp_path / "python.json").read_bytes() == from_cli.read_bytes()


def test_exporting_a_store_without_that_kernel_is_a_store_error_naming_it(store, tmp_path):
    with pytest.raises(kerntune.StoreError, match="no tuning of kernel 'nothing' to export"):
        kerntune.export(store, tmp_path / "out.json", kernel="nothing")
    with pytest.raises(kerntune.SpecError, match='format "csv"'):
        kerntune.export(store, tmp_path / "out.json", format="csv")


def test_a_store_of_several_tunings_is_exported_one_kernel_at_a_time_each_front_naming_its_setting(
        tmp_path, kerntune_cli, store):
    other = os.path.join(ROOT, "data", "landscapes", "pnpoly_RTX_3090.json.gz")
    subprocess.run([kerntune_cli, "import", other, "--db", store], check=True, capture_output=True)
    with pytest.raises(kerntune.StoreError, match=r"holds 2 tunings; choose one with kernel= \(.*convolution"):
        kerntune.export(store, tmp_path / "out.json")
    cli = subprocess.run([kerntune_cli, "export", store, "--format", "t4", "-o", str(tmp_path / "cli.json")],
                         capture_output=True, text=True)
    assert cli.returncode == 1 and "holds 2 tunings; choose one with --kernel (" in cli.stderr, cli.stderr


def test_t4_results_name_a_wrong_output_and_a_timeout_as_the_schema_does(tmp_path):
    failed = {"time": util.RuntimeFailedConfig(), "times": [], "reason": "why"}
    results = [{"bx": 64, **failed, "status": "invalid_output"}, {"bx": 128, **failed, "status": "timeout"},
               {"bx": 256, **failed, "status": "runtime_failed"}, {"bx": 512, "time": 1.0, "times": [1.0]}]
    document = file_utils.get_t4_results(results, {"bx": [64, 128, 256, 512]})
    assert [r["invalidity"] for r in document["results"]] == ["correctness", "timeout", "runtime", "correct"]
    assert [r["correctness"] for r in document["results"]] == [0, 0, 0, 1]


def test_a_t4_file_of_another_objective_keeps_the_time_and_the_failures(tmp_path):
    results = [{"bx": 64, "time": 2.0, "times": [2.0], "GFLOP/s": 40.0, "status": "ok"},
               {"bx": 128, "time": util.CompilationFailedConfig(), "times": [], "status": "compile_failed"}]
    file_utils.store_output_file(tmp_path / "out", results, {"bx": [64, 128]}, objective="GFLOP/s")
    first, second = json.loads((tmp_path / "out.json").read_text())["results"]
    assert first["measurements"] == [{"name": "GFLOP/s", "value": 40.0, "unit": ""},
                                     {"name": "time", "value": 2.0, "unit": "ms"}]
    assert second["invalidity"] == "compile" and second["objectives"] == ["GFLOP/s"]


def test_an_architecture_is_read_by_the_clis_rule_with_its_own_limits():
    from kerntune._errors import check_arch, compile_target

    assert check_arch("sm_90a") == 90 and check_arch(90) == 90 and check_arch("sm_120") == 120
    assert compile_target("80")["max_shared_per_block_optin"] == 163 << 10, "an A100 is not given Hopper's limits"
    for typo in ("sm90", "sm_1234", "compute_90", "gfx90a"):
        with pytest.raises(kerntune.ArgumentError, match="not an NVIDIA architecture"):
            check_arch(typo)


def test_a_relayed_worker_is_the_clis_relay_command_with_its_files_shipped():
    from kerntune import ray_worker

    argv = ray_worker.command("/venv/bin/python", "10.0.0.1:6379", ["/venv/bin/python", "-m", "kerntune._worker"],
                              env=["PYTHONPATH"], ship=["/tmp/setup.json"], gpus=1)
    assert argv == ["/venv/bin/python", "-m", "kerntune.ray_worker", "--address", "10.0.0.1:6379", "--gpus", "1",
                    "--env", "PYTHONPATH", "--ship", "/tmp/setup.json", "--", "/venv/bin/python", "-m",
                    "kerntune._worker"]

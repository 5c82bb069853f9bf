"""``kerntune.report(db, path)`` and ``TuneResult.report(path)``: the HTML report of a results
store, written by the same Rust code as ``kerntune report`` (whose test opens it in headless
Chromium, crates/kerntune-cli/tests/report.rs). The store here is made by ``kerntune
simulate``; the report of a real tuning is checked in test_gpu.py."""

import sqlite3
import subprocess

import pytest

import kerntune


def test_report_of_a_simulated_store_has_its_tables_and_charts(tmp_path, kerntune_cli):
    db = tmp_path / "results.db"
    subprocess.run([kerntune_cli, "simulate", "--max-fevals", "30", "--db", str(db), "--json"],
                   check=True, capture_output=True)
    path = kerntune.report(db, tmp_path / "report.html")
    assert path == str(tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert "convolution_kernel on NVIDIA A100-PCIE-40GB" in page and "Best configurations" in page
    # The progress charts (2) and one per parameter with more than one value (7).
    assert page.count("<svg") == 9, page.count("<svg")
    assert kerntune.report(db, tmp_path / "one.html", tuning=1) == str(tmp_path / "one.html")


def test_a_store_without_tunings_or_without_that_tuning_is_a_store_error(tmp_path):
    empty = tmp_path / "empty.db"
    with sqlite3.connect(empty) as connection:  # a SQLite file that is not yet a kerntune store
        connection.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(kerntune.StoreError, match="no tunings stored"):
        kerntune.report(empty, tmp_path / "r.html")
    with pytest.raises(kerntune.StoreError, match="no such results database"):
        kerntune.report(tmp_path / "missing.db", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(kerntune.ArgumentTypeError, match="tuning: give a tuning's number"):
        kerntune.report(empty, tmp_path / "r.html", tuning="1")

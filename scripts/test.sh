#!/usr/bin/env bash
# Runs every test kerntune has, after installing what they need (Python packages from
# PyPI). GPU tests are skipped cleanly on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
cargo test --workspace

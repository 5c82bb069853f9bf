#!/usr/bin/env bash
# Runs every test kerntune has, after installing what they need (Python packages from
# PyPI): the Rust crates' tests, then the Python package's, on the package built and
# installed from this checkout. GPU tests are skipped cleanly on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
cargo test --workspace
python3 -m pip install -q --disable-pip-version-check --force-reinstall --no-deps .
python3 -m pytest -q -p no:cacheprovider tests/python

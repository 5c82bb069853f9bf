#!/usr/bin/env bash
# Runs every test kerntune has: the Rust crates' tests, then the Python package's, on the
# package built and installed from this checkout. Everything Python is installed into a
# virtual environment of the checkout's own (.venv, or $KERNTUNE_VENV), never into the
# Python you run it with. GPU tests are skipped cleanly on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${KERNTUNE_VENV:-.venv}
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
# shellcheck disable=SC1091
source "$venv/bin/activate"  # python3 is the venv's from here on, for the Rust tests too
python3 -m pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
# Tests that read ../shared (recorded landscapes) or need NVRTC note their skip on standard
# error, which cargo test hides for passing tests; say it here once. CI sets
# KERNTUNE_REQUIRE_SHARED and KERNTUNE_REQUIRE_NVRTC, which turn such a skip into a failure.
[ -d ../shared/data/landscapes ] || echo "note: ../shared/data/landscapes is missing: the tests that compare against those landscapes skip them" >&2
python3 -c "import nvidia.cu13" 2>/dev/null || echo "note: NVRTC (pip nvidia-cuda-nvrtc) is missing: the CUDA compile tests skip" >&2
cargo test --workspace
python3 -m pip install -q --disable-pip-version-check --force-reinstall --no-deps .
python3 -m pytest -q -p no:cacheprovider tests/python

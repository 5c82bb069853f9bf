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
# Tests that read ../shared (recorded landscapes), need NVRTC or open a page in Chromium skip
# themselves (or their browser half) when it is missing and say so ("skipped: ...") on
# standard error, which cargo test hides for passing tests; Python's GPU tests skip without
# a GPU. Both are counted and listed at the end, so a run that passed by skipping says so.
# KERNTUNE_REQUIRE_SHARED=1, KERNTUNE_REQUIRE_NVRTC=1 and KERNTUNE_REQUIRE_CHROMIUM=1 (CI
# sets all three) turn those Rust skips into failures; KERNTUNE_REQUIRE_GPU=1 (gpu/check.sh
# sets it) does the same for the Python GPU tests, and KERNTUNE_REQUIRE_PTXAS=1 (CI) for the
# compiler-controls tests that need the pip ptxas and CompileIQ. CompileIQ's ptxas search
# space is not on PyPI: the tests that need real ACF files skip without it
# ($KERNTUNE_CIQ_SEARCH_SPACE names the .bin), whatever the flag says.
[ -d ../shared/data/landscapes ] || echo "note: ../shared/data/landscapes is missing: the tests that compare against those landscapes skip them" >&2
python3 -c "import nvidia.cu13" 2>/dev/null || echo "note: NVRTC (pip nvidia-cuda-nvrtc) is missing: the CUDA compile tests skip" >&2
command -v chromium >/dev/null || echo "note: chromium is missing (apt-get install chromium): the report tests do not open the report in a browser" >&2
[ -n "${KERNTUNE_CIQ_SEARCH_SPACE:-}" ] || echo "note: KERNTUNE_CIQ_SEARCH_SPACE is unset: the tests that need CompileIQ's ACF files skip unless CompileIQ finds its search space itself" >&2
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# --show-output keeps what passing tests printed, so that their skip notes can be counted.
cargo test --workspace -- --show-output 2>&1 | tee "$logs/cargo.log"
# The Python tests that drive the CLI take the binary cargo just built, wherever
# CARGO_TARGET_DIR put it.
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
export KERNTUNE_BIN=${KERNTUNE_BIN:-$target/debug/kerntune}
python3 -m pip install -q --disable-pip-version-check --force-reinstall --no-deps .
python3 -m pytest -q -rs -p no:cacheprovider tests/python 2>&1 | tee "$logs/pytest.log"
# kerntune.torch's tests again with torch importable: PyPI's build (it runs on a CPU), in a
# folder of its own (.torch-site) that only this run puts on the path.
python3 -m pip install -q --disable-pip-version-check --target .torch-site -r scripts/requirements-torch.txt
PYTHONPATH=.torch-site python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_torch.py 2>&1 \
    | tee "$logs/pytest-torch.log"
# A Rust test's captured output follows a "---- NAME stdout ----" line.
rust_skips=$(awk '/^---- .* stdout ----$/ { name = $2 } /^skipped: / { print "  " name ": " substr($0, 10) }' "$logs/cargo.log")
python_skips=$(grep -E '^SKIPPED ' "$logs/pytest.log" || true)
torch_skips=$(grep -E '^SKIPPED ' "$logs/pytest-torch.log" || true)
echo
echo "=== skipped for a missing requirement"
echo "Rust: $(printf '%s' "$rust_skips" | grep -c . || true) tests"
[ -z "$rust_skips" ] || printf '%s\n' "$rust_skips"
echo "Python: $(sed -nE 's/^(.*[^0-9])?([0-9]+) skipped.*/\2/p' "$logs/pytest.log" | tail -1 | grep . || echo 0) tests"
[ -z "$python_skips" ] || printf '%s\n' "$python_skips" | sed 's/^/  /'
echo "Python, kerntune.torch with torch: $(sed -nE 's/^(.*[^0-9])?([0-9]+) skipped.*/\2/p' "$logs/pytest-torch.log" | tail -1 | grep . || echo 0) tests"
[ -z "$torch_skips" ] || printf '%s\n' "$torch_skips" | sed 's/^/  /'

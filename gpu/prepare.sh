#!/usr/bin/env bash
# Builds (here, not on the GPU machine) what gpu/check.sh runs there, into .device/: the
# kerntune binary, the Rust GPU test binary, the single-move writer of the schedule audit,
# the Python wheel, and Ray's wheels (.device/wheels) for the scale-out benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
# Whatever an earlier prepare left goes first: if a step below fails, the script stops
# (set -e) and check.sh finds nothing to run, never a stale binary or wheel.
rm -f .device/kerntune .device/gpu-tests .device/single_moves .device/*.whl
mkdir -p .device
cargo build --release -q -p kerntune-cli
# The test binary's path, as cargo reports it, not the newest file of target/release/deps.
test_binary=$(cargo test --release -q -p kerntune-cli --test gpu --no-run --message-format json-render-diagnostics \
    | python3 -c 'import json, sys; print(*[m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable") and m["target"]["name"] == "gpu"])')
[ -x "$test_binary" ] || { echo "gpu/prepare.sh: no GPU test binary built (got '$test_binary')" >&2; exit 1; }
cargo build --release -q -p kerntune-sass --example single_moves
strip -o .device/kerntune target/release/kerntune
strip -o .device/gpu-tests "$test_binary"
strip -o .device/single_moves target/release/examples/single_moves
maturin build --release -q -o .device
# bench/controls.py (gpu/check.sh controls): the nvidia-cuda-nvcc wheel's ptxas 13.3 and
# CompileIQ with what it imports for an ask/tell search (not ray, which it imports only to
# run objective functions itself; numpy comes with torch), for the GPU machine's Python
# 3.12, which has no internet (about 60 MB).
# NVIDIA's licence: downloaded for the user's run, never committed.
rm -rf .device/wheels
python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: --platform manylinux_2_34_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .device/wheels \
    'nvidia-cuda-nvcc==13.3.*' 'compileiq==1.1.*' loguru 'pandas>=2.2.3,<3' python-dateutil pytz tzdata six pydantic pydantic-core \
    annotated-types typing-inspection typing-extensions requests certifi idna charset-normalizer urllib3 tqdm
du -sh .device/wheels
wheels=(.device/kerntune-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { echo "gpu/prepare.sh: expected one wheel in .device, found: ${wheels[*]}" >&2; exit 1; }
# Ray for bench/scale_out.py's `nodes` stage (the GPU machine has no internet and runs
# Python 3.12): its wheels and their dependencies, downloaded once.
if ! ls .device/wheels/ray-*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --disable-pip-version-check --python-version 3.12 --only-binary=:all: ray -d .device/wheels
fi
ls -la .device

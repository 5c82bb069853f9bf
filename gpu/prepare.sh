#!/usr/bin/env bash
# Builds (here, not on the GPU machine) what gpu/check.sh runs there, into .device/: the
# kerntune binary, the Rust GPU test binary, the single-move writer of the schedule audit
# and the Python wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kerntune-cli
cargo test --release -q -p kerntune-cli --test gpu --no-run 2>/dev/null
cargo build --release -q -p kerntune-sass --example single_moves
mkdir -p .device
strip -o .device/kerntune target/release/kerntune
test_binary=$(ls -t target/release/deps/gpu-* | grep -v '\.d$' | head -1)
strip -o .device/gpu-tests "$test_binary"
strip -o .device/single_moves target/release/examples/single_moves
rm -f .device/*.whl
maturin build --release -q -o .device
ls -la .device

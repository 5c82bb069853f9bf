#!/usr/bin/env bash
# Builds kerntune and runs its main job: tuning the shared-memory matmul example on the GPU,
# or, without a GPU, simulating a tuning run on the recorded landscape shipped with
# kerntune (and saying so).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kerntune-cli
echo "kerntune built: target/release/kerntune (cargo install --path crates/kerntune-cli puts it on your PATH)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    exec target/release/kerntune tune examples/cuda/matmul_sram/spec.toml --strategy default "$@"
fi
echo "No GPU found: simulating a tuning run on a recorded landscape instead."
exec target/release/kerntune simulate --strategy default --max-fevals 100 "$@"

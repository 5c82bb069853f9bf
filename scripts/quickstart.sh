#!/usr/bin/env bash
# Builds kerntune, installs the `kerntune` command into the checkout's virtual environment
# (.venv, or $KERNTUNE_VENV; made here if missing, the same one scripts/test.sh fills with
# the package and NVIDIA's compiler wheels, which the command finds there), and runs its main
# job: tuning the shared-memory matmul example on the GPU, or, without a GPU, simulating a
# tuning run on the recorded landscape shipped with kerntune (and saying so).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${KERNTUNE_VENV:-.venv}
cargo build --release -q -p kerntune-cli
# Where cargo put it: $CARGO_TARGET_DIR, a cargo config's target-dir, or ./target.
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
install -m 755 "$target/release/kerntune" "$venv/bin/kerntune"
echo "kerntune installed: $venv/bin/kerntune ('source $venv/bin/activate' puts it on your PATH)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    exec "$venv/bin/kerntune" tune examples/cuda/matmul_sram/spec.toml --strategy default "$@"
fi
echo "No GPU found: simulating a tuning run on a recorded landscape instead."
exec "$venv/bin/kerntune" simulate --strategy default --max-fevals 100 "$@"

#!/usr/bin/env bash
# Builds kerntune and runs its main job. Without a GPU it simulates tuning on the recorded
# landscape shipped with kerntune (and says so).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p kerntune-cli
echo "kerntune built: target/release/kerntune"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "A GPU is present, but this build has no GPU backend yet: simulating instead."
else
    echo "No GPU found: simulating a tuning run on a recorded landscape."
fi
exec target/release/kerntune simulate --strategy default --max-fevals 100 "$@"

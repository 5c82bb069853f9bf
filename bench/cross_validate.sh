#!/usr/bin/env bash
# Leave-one-kernel-out cross-validation of the default strategy's options.
#
# Runs every combination of bench/default_grid.json on the four Kernel Tuner-format landscapes
# of ../shared/data/landscapes with seeds 100..149 (not the 0..9 of bench/strategies.sh), then
# holds out one kernel at a time, picks the combination that scores best on the other three
# and reports its score on the held-out kernel. Prints Markdown (see the cross_validate example
# for the exact procedure). About 12 minutes on 2 cores.
#
# Usage: bash bench/cross_validate.sh [GRID.json]    (env: SEEDS, FIRST_SEED, BUDGETS)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${KERNTUNE_SHARED:-../shared}
dir="$shared/data/landscapes"
landscapes=()
for name in convolution_A100 dedispersion_A100 gemm_RTX_3090 pnpoly_RTX_3090; do
    [ -f "$dir/$name.json.gz" ] || { echo "bench/cross_validate.sh: $dir/$name.json.gz not found (set KERNTUNE_SHARED)" >&2; exit 1; }
    landscapes+=("$dir/$name.json.gz")
done
cargo run --release -q -p kerntune-engine --example cross_validate -- "${1:-bench/default_grid.json}" "${landscapes[@]}"

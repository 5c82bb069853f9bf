#!/usr/bin/env bash
# What the default strategy costs per evaluation, beside brute force's, as the budget grows.
#
# Runs `kerntune simulate` on the shipped convolution_A100 landscape (4,362 configurations)
# with `--strategy default` at 100 and 1,000 evaluations and over the whole space, and with
# `--strategy brute_force` at the same budgets as the anchor measured in the same run. A
# simulated evaluation only looks up its recorded outcome, so the wall time of `simulate`
# is loading the landscape plus what the strategy spends deciding. Prints per budget: wall
# seconds of each, milliseconds per evaluation, and default / brute_force.
#
# Usage: bash bench/strategy_cost.sh [path/to/kerntune]   (builds target/release/kerntune
#        when given none; about 5 s after the build)
set -euo pipefail
cd "$(dirname "$0")/.."
kerntune=${1:-}
if [ -z "$kerntune" ]; then
    cargo build --release -q -p kerntune-cli
    kerntune=target/release/kerntune
fi
landscape=data/landscapes/convolution_A100.json.gz

# Wall seconds of one `simulate` run: strategy, evaluations.
wall() {
    local start end
    start=$(date +%s.%N)
    "$kerntune" simulate "$landscape" --strategy "$1" --max-fevals "$2" --json > /dev/null
    end=$(date +%s.%N)
    python3 -c "print(f'{$end - $start:.3f}')"
}

echo "kerntune simulate $landscape: wall seconds, milliseconds per evaluation, default / brute_force"
echo
echo "| evaluations | default s | default ms/eval | brute_force s | brute_force ms/eval | ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
# 4362: the whole space (simulate's budget is 100 evaluations when none is given).
for evaluations in 100 1000 4362; do
    default=$(wall default "$evaluations")
    brute=$(wall brute_force "$evaluations")
    python3 - "$evaluations" "$default" "$brute" <<'PY'
import sys
n, default, brute = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"| {n:,} | {default:.2f} | {1000 * default / n:.2f} | {brute:.2f} | {1000 * brute / n:.3f} | {default / brute:.1f} |")
PY
done

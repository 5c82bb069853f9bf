#!/usr/bin/env bash
# Search-space construction: kerntune versus Kernel Tuner 1.5, side by side in one run.
# Builds kerntune (release), installs Kernel Tuner if it is missing, then for each space
# file prints both counts and times and the ratio Kernel Tuner / kerntune (higher is better
# for kerntune), plus kerntune's peak memory (max RSS).
# Usage: bash bench/space.sh [SPACE.json ...]   (default: the three files in data/spaces/)
set -euo pipefail
cd "$(dirname "$0")/.."
anchor=${KT_ANCHOR:-../shared/anchors/kt_searchspace.py}
[ -f "$anchor" ] || { echo "bench/space.sh: Kernel Tuner anchor script $anchor not found (set KT_ANCHOR)" >&2; exit 1; }
python3 -c "import kernel_tuner" 2>/dev/null || python3 -m pip install -q kernel_tuner==1.5.0
cargo build --release -q -p kerntune-cli
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(data/spaces/clblast_gemm_full.json data/spaces/triton_matmul_wide.json data/spaces/triton_matmul_huge.json)
printf '%-22s %10s %10s %10s %10s %8s %10s\n' space count_kt count_ours kt_s kerntune_s ratio rss_MB
for f in "${files[@]}"; do
    kt=$(python3 "$anchor" "$f")
    if [ -x /usr/bin/time ]; then
        ours=$( { /usr/bin/time -f '%M' target/release/kerntune space "$f" --json; } 2>/tmp/kerntune_space_rss )
        rss_kb=$(tail -n 1 /tmp/kerntune_space_rss)
    else  # GNU time is in Debian's package `time`
        ours=$(target/release/kerntune space "$f" --json); rss_kb=0
    fi
    python3 - "$f" "$kt" "$ours" "$rss_kb" <<'PY'
import json, sys, os
name = os.path.basename(sys.argv[1]).removesuffix(".json")
kt, ours, rss = json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
assert kt["count"] == ours["count"], f"counts differ: Kernel Tuner {kt['count']}, kerntune {ours['count']}"
print(f"{name:<22} {kt['count']:>10} {ours['count']:>10} {kt['seconds']:>10.3f} {ours['seconds']:>10.3f} {kt['seconds'] / ours['seconds']:>7.1f}x {rss / 1024:>10.1f}")
PY
done

#!/usr/bin/env bash
# Two builds of kerntune's Python package, `default` on the Triton matmul, interleaved:
# bench/triton_matmul.py's `repeat` stage (REPEAT_RUNS seeds per process, default 3) runs
# ROUNDS times per build (default 2), the builds alternating and each round taking the
# next seeds, so both builds see the same seeds under the same conditions. Then a table:
# per build, runs within 0.99 of the brute force's best, the median wall time, the median
# time after the search's loop (wall minus loop: start-up, vetting, the finalists'
# re-timing) and the finalists' own seconds where the build reports them.
#
# Usage (on the GPU machine, after gpu/check.sh has installed the new build and the
# `brute` stage has exported its landscape to $OUT): OLD=/path/to/old-site bash
# bench/triton_repeat_ab.sh. OLD is a folder with the other build's `kerntune` package;
# the new build is the one on PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OLD:?OLD must name a folder holding the other build of the kerntune package}"
export OUT=${OUT:-/tmp/kerntune-out}
[ -f "$OUT/triton_matmul_landscape.json" ] || { echo "no brute force in $OUT: run bench/triton_matmul.py brute first" >&2; exit 1; }
runs=${REPEAT_RUNS:-3}
for round in $(seq 0 $((${ROUNDS:-2} - 1))); do
    builds=(new old)
    [ $((round % 2)) -eq 1 ] && builds=(old new)
    for build in "${builds[@]}"; do
        path=$PYTHONPATH
        [ "$build" = old ] && path=$OLD:$PYTHONPATH
        PYTHONPATH=$path REPEAT_RUNS=$runs REPEAT_FIRST_SEED=$((round * runs)) REPEAT_LABEL=$build \
            python3 bench/triton_matmul.py repeat > "$OUT/ab-$build-$round.log" 2>&1 \
            || { echo "round $round, build $build failed:"; tail -20 "$OUT/ab-$build-$round.log"; exit 1; }
        cp "$OUT/triton_matmul.json" "$OUT/ab-$build-$round.json"
        grep -E '^repeat .* seed' "$OUT/ab-$build-$round.log" | tail -n "$runs"
    done
done
python3 - "$OUT" <<'EOF'
import glob, json, os, statistics, sys

out = sys.argv[1]
with open(os.path.join(out, "triton_matmul_landscape.json")) as f:
    cache = json.load(f)["cache"].values()
brute = max(e["TFLOP/s"] for e in cache if isinstance(e["TFLOP/s"], (int, float)) and not e.get("early_stopped"))
print("\n=== repeat A/B summary (medians over the runs)")
for build in ("new", "old"):
    runs = [r for path in sorted(glob.glob(os.path.join(out, f"ab-{build}-*.json")))
            for r in json.load(open(path)).get("repeat", [])]
    if not runs:
        continue
    hits = sum(r["best_tflops"] >= 0.99 * brute for r in runs)
    after = [r["wall_s"] - r["loop_s"] for r in runs if r.get("loop_s") is not None]
    retimed = [r["finalists_s"] for r in runs if r.get("finalists_s") is not None]
    reused = sum(bool(r.get("finalists_reused")) for r in runs)
    print(f"{build}: {hits} of {len(runs)} within 0.99; wall {statistics.median(r['wall_s'] for r in runs):.2f} s; "
          f"after the loop {statistics.median(after):.2f} s (range {min(after):.2f}-{max(after):.2f})"
          + (f"; finalists {statistics.median(retimed):.2f} s, on the search's workers in {reused} of {len(retimed)}" if retimed else ""))
EOF

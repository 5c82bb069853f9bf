#!/usr/bin/env bash
# Two arms of `default` on the Triton matmul, interleaved: bench/triton_matmul.py's `repeat`
# stage (REPEAT_RUNS seeds per process, default 3) runs ROUNDS times per arm (default 2),
# the arms alternating and each round taking the next seeds, so both arms see the same
# seeds under the same conditions. Then a table: per arm, runs within 0.99 of the brute
# force's best, the median wall time, the median time after the search's loop (wall minus
# loop: start-up, vetting, the finalists' re-timing) and the finalists' own seconds where
# the build reports them.
#
# The arms are two builds of the Python package (OLD: a folder holding the other build's
# `kerntune` package; the new build is the one on PYTHONPATH), or one build under two
# settings (A_ENV and B_ENV: VAR=VALUE words for each arm's process, e.g.
# B_ENV=REPEAT_COMPILE_WORKERS=16), or both. A_LABEL and B_LABEL name the arms (default new
# and old).
#
# Usage (on the GPU machine, after gpu/check.sh has installed the new build and the `brute`
# stage has exported its landscape to $OUT): OLD=/path/to/old-site bash
# bench/triton_repeat_ab.sh, or B_ENV=REPEAT_COMPILE_WORKERS=16 B_LABEL=workers16 bash
# bench/triton_repeat_ab.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${OLD:-}${A_ENV:-}${B_ENV:-}" ] || { echo "set OLD (another build) or A_ENV/B_ENV (other settings)" >&2; exit 1; }
export OUT=${OUT:-/tmp/kerntune-out}
[ -f "$OUT/triton_matmul_landscape.json" ] || { echo "no brute force in $OUT: run bench/triton_matmul.py brute first" >&2; exit 1; }
a=${A_LABEL:-new} b=${B_LABEL:-old}
runs=${REPEAT_RUNS:-3}
for round in $(seq 0 $((${ROUNDS:-2} - 1))); do
    arms=(a b)
    [ $((round % 2)) -eq 1 ] && arms=(b a)
    for arm in "${arms[@]}"; do
        if [ "$arm" = a ]; then label=$a path=$PYTHONPATH settings=${A_ENV:-}; else
            label=$b path=${OLD:+$OLD:}$PYTHONPATH settings=${B_ENV:-}; fi
        # shellcheck disable=SC2086 # settings are VAR=VALUE words
        env $settings PYTHONPATH="$path" REPEAT_RUNS="$runs" REPEAT_FIRST_SEED=$((round * runs)) REPEAT_LABEL="$label" \
            python3 bench/triton_matmul.py repeat > "$OUT/ab-$label-$round.log" 2>&1 \
            || { echo "round $round, $label failed:"; tail -20 "$OUT/ab-$label-$round.log"; exit 1; }
        cp "$OUT/triton_matmul.json" "$OUT/ab-$label-$round.json"
        grep -E '^repeat .* seed' "$OUT/ab-$label-$round.log" | tail -n "$runs"
    done
done
python3 - "$OUT" "$a" "$b" <<'PY'
import glob, json, os, statistics, sys

out, labels = sys.argv[1], sys.argv[2:]
with open(os.path.join(out, "triton_matmul_landscape.json")) as f:
    cache = json.load(f)["cache"].values()
brute = max(e["TFLOP/s"] for e in cache if isinstance(e["TFLOP/s"], (int, float)) and not e.get("early_stopped"))
print("\n=== repeat A/B summary (medians over the runs)")
for label in labels:
    runs = [r for path in sorted(glob.glob(os.path.join(out, f"ab-{label}-*.json")))
            for r in json.load(open(path)).get("repeat", [])]
    if not runs:
        continue
    hits = sum(r["best_tflops"] >= 0.99 * brute for r in runs)
    after = [r["wall_s"] - r["loop_s"] for r in runs if r.get("loop_s") is not None]
    retimed = [r["finalists_s"] for r in runs if r.get("finalists_s") is not None]
    reused = sum(bool(r.get("finalists_reused")) for r in runs)
    print(f"{label}: {hits} of {len(runs)} within 0.99; wall {statistics.median(r['wall_s'] for r in runs):.2f} s; "
          f"after the loop {statistics.median(after):.2f} s (range {min(after):.2f}-{max(after):.2f})"
          + (f"; finalists {statistics.median(retimed):.2f} s, on the search's workers in {reused} of {len(retimed)}" if retimed else ""))
PY

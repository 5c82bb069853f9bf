#!/usr/bin/env bash
# Issue 13: `default` against the best of the other strategies, on the fitting and on the
# held-out landscapes, one at a time and in batches of 16; and where a run without a budget
# stops by itself.
#
# The landscapes come from the benchmark hub at a pinned commit and from data/landscapes/h100
# (bench/landscapes.py, which also says which set each belongs to; the rule is in
# docs/strategies.md). Per set and batch size, `kerntune compare-strategies` runs `default` and
# every strategy named after one of Kernel Tuner 1.5's (kerntune's own implementations;
# bayes_opt is left out, its Gaussian process costs minutes per run at 400 evaluations) with
# seeds 0..9 (SEEDS, FIRST_SEED) at budgets 25, 50, 100, 200 and 400. Score: the mean over
# landscapes of the median over seeds of optimum / best found. Then `default` without a budget
# (the auto_stop example of kerntune-engine, which runs what `kerntune simulate LANDSCAPE --seed
# S` runs, loading each landscape once), the same seeds on every landscape: the evaluations used
# when it stopped by itself, and optimum / best there.
#
# Usage: bash bench/search_quality.sh [--hub GIT_DIR]
#        (GIT_DIR: a benchmark_hub clone or mirror; needed once, to extract the landscapes)
# Env: SEEDS (default 10), FIRST_SEED (default 0), SETS (default "fitting heldout"; also
# fitting_extra, heldout_extra, heldout_ktt, and fitting_h100, heldout_h100, heldout_h100b and
# fitting_h100b, recorded by kerntune on an H100 and committed in data/landscapes/h100, and
# fitting_h100c and heldout_h100c, the hub's convolution script run through kerntune on an
# H100), BATCHES (default "1 16"), AUTOSTOP (default 1; 0 leaves out the runs without a budget), QUALITY_OUT
# (default target/bench/search_quality: where the JSON goes).
# Runtime on 2 shared cores: see docs/strategies.md.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-10}
FIRST_SEED=${FIRST_SEED:-0}
AUTOSTOP=${AUTOSTOP:-1}
SETS=${SETS:-fitting heldout}
BATCHES=${BATCHES:-1 16}
if [ "${1:-}" = "--hub" ] || [ ! -d target/landscapes/heldout ]; then
    python3 bench/landscapes.py ${2:+--hub "$2"}
fi
KERNTUNE=${KERNTUNE:-target/release/kerntune}
[ -n "${KERNTUNE_PREBUILT:-}" ] || cargo build --release -q -p kerntune-cli
[ -n "${KERNTUNE_PREBUILT:-}" ] || cargo build --release -q -p kerntune-engine --example auto_stop
AUTO_STOP=${AUTO_STOP:-target/release/examples/auto_stop}
strategies=default,random_sample,genetic_algorithm,diff_evo,pso,firefly_algorithm,simulated_annealing,basinhopping,greedy_ils,mls
out=${QUALITY_OUT:-target/bench/search_quality}
mkdir -p "$out"
start=$(date +%s)
for set in $SETS; do
    mapfile -t files < <(python3 bench/landscapes.py --list "$set")
    for batch in $BATCHES; do
        "$KERNTUNE" compare-strategies "${files[@]}" --strategies "$strategies" --budgets 25,50,100,200,400 \
            --seeds "$SEEDS" --first-seed "$FIRST_SEED" --batch "$batch" --json > "$out/${set}_batch$batch.json"
    done
    [ "$AUTOSTOP" = 0 ] || SEEDS=$SEEDS FIRST_SEED=$FIRST_SEED "$AUTO_STOP" "${files[@]}" > "$out/${set}_autostop.jsonl"
done
echo "Ran in $(( $(date +%s) - start )) s." >&2
AUTOSTOP=$AUTOSTOP python3 bench/search_quality_tables.py "$out" $SETS -- $BATCHES

"""How good the first outcomes of a batch are, next to the last: in batches, a strategy's
first informed picks rest on the outcomes that came back first, those quickest to evaluate.

For random batches of 16 configurations of a recorded landscape (Kernel Tuner cache files),
the successful outcomes are ordered by their recorded cost (compile, verification,
benchmark and framework time: the order `kerntune simulate --batch 16` tells them back in),
and the mean optimum / objective of the first four is set beside that of the last four and
of the whole landscape. Batches with fewer than eight successes are skipped.

    python3 bench/completion_order.py LANDSCAPE.json[.gz] ...    # e.g. $(python3 bench/landscapes.py --list fitting_h100)

Env: BATCHES (default 2000), SEED (default 0). Time objectives only (lower is better).
"""

import gzip
import json
import os
import random
import sys
from statistics import mean

COSTS = ("compile_time", "verification_time", "benchmark_time", "framework_time")


def load(path):
    """Each configuration's cache key -> (recorded time, None when it failed; recorded cost), or
    None when `path` is not a Kernel Tuner cache file."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        document = json.load(f)
    if "cache" not in document:
        return None
    table = {}
    for key, entry in document["cache"].items():
        time = entry.get("time")
        ok = isinstance(time, (int, float)) and time > 0
        table[key] = (time if ok else None, sum(entry.get(k) or 0 for k in COSTS))
    return table


def first_and_last(qualities):
    """Mean of the first four and of the last four qualities given (None: a failure, left out),
    or None when fewer than eight succeeded."""
    done = [q for q in qualities if q is not None]
    return (mean(done[:4]), mean(done[-4:])) if len(done) >= 8 else None


def main():
    paths = sys.argv[1:]
    if not paths:
        raise SystemExit(__doc__)
    rng = random.Random(int(os.environ.get("SEED", "0")))
    batches = int(os.environ.get("BATCHES", "2000"))
    print(f"{'landscape':<36} {'first 4':>8} {'last 4':>8} {'all':>8}  (mean optimum / objective of the successes)")
    for path in paths:
        table = load(path)
        name = os.path.basename(path).split(".json")[0]
        if table is None:
            print(f"{name:<36} not a Kernel Tuner cache file, skipped")
            continue
        rows = list(table.values())
        best = min(t for t, _ in rows if t is not None)
        quality = [best / t if t is not None else None for t, _ in rows]
        first, last = [], []
        for _ in range(batches):
            batch = sorted(rng.sample(range(len(rows)), 16), key=lambda i: rows[i][1])
            pair = first_and_last([quality[i] for i in batch])
            if pair:
                first.append(pair[0])
                last.append(pair[1])
        overall = mean(q for q in quality if q is not None)
        print(f"{name:<36} {mean(first):8.3f} {mean(last):8.3f} {overall:8.3f}")


if __name__ == "__main__":
    main()

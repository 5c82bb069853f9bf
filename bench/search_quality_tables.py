#!/usr/bin/env python3
"""Prints the Markdown tables of bench/search_quality.sh from the JSON it wrote.

Usage: search_quality_tables.py OUT_DIR SET... -- BATCH...
With several sets, a last table pools their landscapes. AUTOSTOP=0: no tables of the runs
without a budget.
"""
import json
import os
import statistics
import sys


def comparison_tables(out, set_name, batch):
    data = json.load(open(os.path.join(out, f"{set_name}_batch{batch}.json")))
    budgets = data["budgets"]
    by_label = {c["label"]: c for c in data["contenders"]}
    # random_sample counts among the others: Kernel Tuner has it too (docs/strategies.md).
    others = [c for c in data["contenders"] if c["label"] != "default"]
    print(f"\n#### {set_name}, batch {batch} ({len(data['landscapes'])} landscapes, seeds "
          f"{data['seeds']['start']}..{data['seeds']['end'] - 1})\n")
    print("| strategy | " + " | ".join(str(b) for b in budgets) + " |")
    print("|---|" + "---:|" * len(budgets))
    for c in data["contenders"]:
        cells = [f"{r['score']:.3f} ({100 * r['within_2_percent']:.0f}%)" for r in c["budgets"]]
        print(f"| {c['label']} | " + " | ".join(cells) + " |")
    best = []
    for i, _ in enumerate(budgets):
        top = max(others, key=lambda c: c["budgets"][i]["score"])
        best.append((top["budgets"][i]["score"], top["label"]))
    print("| *best of the others at that budget* | " + " | ".join(f"{s:.3f} ({l})" for s, l in best) + " |")
    default = by_label["default"]["budgets"]
    # A score of 0 is a median run that found no configuration able to be its best (on
    # landscapes where most are marked early_stopped): no ratio to print.
    print("| **default / best of the others** | " + " | ".join(
        f"**{d['score'] / s:.3f}**" if s > 0 else "no ratio (both 0)" if d["score"] == 0 else "above (other 0)"
        for d, (s, _) in zip(default, best)) + " |")
    print("\n`default` per landscape (median over seeds):\n")
    print("| landscape | " + " | ".join(str(b) for b in budgets) + " |")
    print("|---|" + "---:|" * len(budgets))
    for i, name in enumerate(data["landscapes"]):
        print(f"| {name} | " + " | ".join(f"{r['per_landscape'][i]:.3f}" for r in default) + " |")


def autostop_table(out, set_name):
    runs = [json.loads(line) for line in open(os.path.join(out, f"{set_name}_autostop.jsonl"))]
    seeds = sorted({r["seed"] for r in runs})
    print(f"\n#### {set_name}: `default` without a budget (stops by itself), seeds {seeds[0]}..{seeds[-1]}\n")
    print("| landscape | configurations | evaluations used (median, min–max) | optimum / best (median, min) | stopped |")
    print("|---|---:|---:|---:|---|")
    for name in sorted({r["landscape"] for r in runs}):
        mine = [r for r in runs if r["landscape"] == name]
        evals, ratios = [r["evaluations"] for r in mine], [r["ratio"] for r in mine]
        stops = ", ".join(sorted({r["stop"] for r in mine}))
        print(f"| {name} | {mine[0]['configurations']} | {statistics.median(evals):.0f} ({min(evals)}–{max(evals)}) | "
              f"{statistics.median(ratios):.3f} ({min(ratios):.3f}) | {stops} |")
    evals, ratios = [r["evaluations"] for r in runs], [r["ratio"] for r in runs]
    share = sum(r["evaluations"] / r["configurations"] for r in runs) / len(runs)
    print(f"| **all** | | {statistics.median(evals):.0f} ({min(evals)}–{max(evals)}); {100 * share:.0f}% of a space on average | "
          f"{statistics.median(ratios):.3f} ({min(ratios):.3f}); {100 * sum(r >= 0.98 for r in ratios) / len(ratios):.0f}% within 2% | |")


def pooled_table(out, sets, batches):
    """`default` against the best of the others over the landscapes of several sets taken
    together: per strategy and budget, the mean over all their landscapes of the median over
    seeds (each set's run must cover the same strategies, budgets and seeds)."""
    print(f"\n#### {' + '.join(sets)}, pooled: `default` / best of the others\n")
    budgets = None
    for batch in batches:
        medians = {}
        for set_name in sets:
            data = json.load(open(os.path.join(out, f"{set_name}_batch{batch}.json")))
            budgets = data["budgets"]
            for c in data["contenders"]:
                for i, r in enumerate(c["budgets"]):
                    medians.setdefault((c["label"], i), []).extend(r["per_landscape"])
        labels = sorted({label for label, _ in medians})
        if batch == batches[0]:
            count = len(medians[(labels[0], 0)])
            print(f"| {count} landscapes | " + " | ".join(str(b) for b in budgets) + " |")
            print("|---|" + "---:|" * len(budgets))
        cells = []
        for i, _ in enumerate(budgets):
            mean = {label: statistics.mean(medians[(label, i)]) for label in labels}
            top = max((label for label in labels if label != "default"), key=lambda label: mean[label])
            cells.append(f"{mean['default']:.3f} / {mean[top]:.3f} ({top}) = **{mean['default'] / mean[top]:.3f}**")
        print(f"| batch {batch} | " + " | ".join(cells) + " |")


def main():
    args = sys.argv[1:]
    out = args[0]
    split = args.index("--")
    sets, batches = args[1:split], args[split + 1:]
    for set_name in sets:
        print(f"\n### {set_name} landscapes")
        for batch in batches:
            comparison_tables(out, set_name, batch)
        if os.environ.get("AUTOSTOP", "1") != "0":
            autostop_table(out, set_name)
    if len(sets) > 1:
        pooled_table(out, sets, batches)


if __name__ == "__main__":
    main()

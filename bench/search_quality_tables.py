#!/usr/bin/env python3
"""Prints the Markdown tables of bench/search_quality.sh from the JSON it wrote.

Usage: search_quality_tables.py OUT_DIR SET... -- BATCH...
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
    print("| **default / best of the others** | " + " | ".join(
        f"**{d['score'] / s:.3f}**" for d, (s, _) in zip(default, best)) + " |")
    print("\n`default` per landscape (median over seeds):\n")
    print("| landscape | " + " | ".join(str(b) for b in budgets) + " |")
    print("|---|" + "---:|" * len(budgets))
    for i, name in enumerate(data["landscapes"]):
        print(f"| {name} | " + " | ".join(f"{r['per_landscape'][i]:.3f}" for r in default) + " |")


def autostop_table(out, set_name):
    runs = [json.loads(line) for line in open(os.path.join(out, f"{set_name}_autostop.jsonl"))]
    print(f"\n#### {set_name}: `default` without a budget (stops by itself), seeds 0..9\n")
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


def main():
    args = sys.argv[1:]
    out = args[0]
    split = args.index("--")
    sets, batches = args[1:split], args[split + 1:]
    for set_name in sets:
        print(f"\n### {set_name} landscapes")
        for batch in batches:
            comparison_tables(out, set_name, batch)
        autostop_table(out, set_name)


if __name__ == "__main__":
    main()

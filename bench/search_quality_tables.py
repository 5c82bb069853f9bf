#!/usr/bin/env python3
"""Prints the Markdown tables of bench/search_quality.sh from the JSON it wrote.

Usage: search_quality_tables.py OUT_DIR SET... -- BATCH...
"""
import glob
import json
import os
import statistics
import sys


def comparison_tables(out, set_name, batch):
    data = json.load(open(os.path.join(out, f"{set_name}_batch{batch}.json")))
    budgets = data["budgets"]
    by_label = {c["label"]: c for c in data["contenders"]}
    others = [c for c in data["contenders"] if c["label"] not in ("default", "random_sample")]
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
    print(f"\n#### {set_name}: `default` without a budget (stops by itself)\n")
    print("| landscape | evaluations used (median, min–max) | optimum / best (median, min) | stopped |")
    print("|---|---:|---:|---|")
    all_evals, all_ratios = [], []
    for path in sorted(glob.glob(os.path.join(out, f"{set_name}_autostop_*.jsonl"))):
        name = os.path.basename(path)[len(f"{set_name}_autostop_"):-len(".jsonl")]
        runs = [json.loads(line) for line in open(path)]
        evals = [r["evaluations"] for r in runs]
        ratios = []
        for r in runs:
            best = r["best"]["objective"] if r["best"] else None
            if best is None:
                ratios.append(0.0)
            else:
                ratios.append(best / r["optimum"] if r["higher_is_better"] else r["optimum"] / best)
        stops = sorted({r["stop"] for r in runs})
        print(f"| {name} | {statistics.median(evals):.0f} ({min(evals)}–{max(evals)}) | "
              f"{statistics.median(ratios):.3f} ({min(ratios):.3f}) | {', '.join(stops)} |")
        all_evals += evals
        all_ratios += ratios
    print(f"| **all** | {statistics.median(all_evals):.0f} ({min(all_evals)}–{max(all_evals)}) | "
          f"{statistics.median(all_ratios):.3f} ({min(all_ratios):.3f}); "
          f"{100 * sum(r >= 0.98 for r in all_ratios) / len(all_ratios):.0f}% within 2% | |")


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

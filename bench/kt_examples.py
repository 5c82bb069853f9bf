#!/usr/bin/env python3
"""kerntune against Kernel Tuner 1.5 on the Kernel Tuner-style examples of
examples/kernel_tuner/ (vector add, stencil, matmul, convolution, reduction), one GPU.

For each example both tools brute-force the same kernel and space with the same
arguments: Kernel Tuner with its CuPy backend (lang="cupy"), kerntune through the same
`tune_kernel` call with a fresh results store (nothing answered from a previous run), and
each with an empty CuPy kernel cache (nothing compiled by a previous run).
Each call runs in a child process of its own; over several rounds the tool that goes
first alternates. Per example it prints the wall time of each call (median over rounds),
the median of the per-round ratios kerntune / Kernel Tuner with their range, and whether
the best configurations agree within noise: the same, or each tool's best is within 5% of
the other's best by the other tool's own measurements. A table ends the output; the exit
status is 1 if any step failed.

    python3 bench/kt_examples.py [--rounds 3] [--examples vector_add,matmul] [--out DIR]

Needs on the GPU machine: CuPy, and Kernel Tuner 1.5 (gpu/check.sh puts gpu/prepare.sh's
packed .device/sites/kt.tar.xz on PYTHONPATH); kerntune installed or on PYTHONPATH.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = ["vector_add", "stencil", "matmul", "convolution", "reduction"]
TOOLS = {"kt": "Kernel Tuner 1.5", "kerntune": "kerntune"}
NOISE = 0.05


def load_example(name):
    import importlib.util

    path = os.path.join(ROOT, "examples", "kernel_tuner", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"kernel_tuner_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_one(tool, example, out):
    """In the child: one tune_kernel call; writes its wall time and valid times as JSON."""
    arguments = load_example(example).problem()
    if tool == "kt":
        import kernel_tuner

        started = time.perf_counter()
        results, _ = kernel_tuner.tune_kernel(**arguments, lang="cupy", quiet=True)
    else:
        import kerntune

        db = os.path.join(tempfile.mkdtemp(prefix="kt-examples-"), "results.db")
        started = time.perf_counter()
        results, _ = kerntune.tune_kernel(**arguments, db=db, quiet=True)
    wall = time.perf_counter() - started
    names = list(arguments["tune_params"])
    times = {}
    for row in results:
        if isinstance(row.get("time"), float):
            times[json.dumps([row[n] for n in names])] = row["time"]
    with open(out, "w") as f:
        json.dump({"wall_s": wall, "evaluated": len(results), "valid": times}, f)


def ensure_kernel_tuner(env):
    """The children's environment, once Kernel Tuner imports in it."""
    probe = subprocess.run([sys.executable, "-c", "import kernel_tuner"], env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        raise SystemExit(f"Kernel Tuner does not import ({probe.stderr.strip().splitlines()[-1:]}): "
                         "pip install kernel_tuner, or run this through gpu/check.sh (see the docstring)")
    return env


def child(tool, example, out_dir, round_index, env):
    out = os.path.join(out_dir, f"{example}-{tool}-{round_index}.json")
    log = os.path.join(out_dir, f"{example}-{tool}-{round_index}.log")
    # CuPy keeps the kernels it compiled on disk across processes: each call gets an empty
    # cache, or Kernel Tuner's later rounds would skip their compiles (kerntune keeps none).
    env = dict(env, CUPY_CACHE_DIR=tempfile.mkdtemp(prefix="cupy-cache-", dir=out_dir))
    started = time.perf_counter()
    with open(log, "w") as f:
        done = subprocess.run([sys.executable, __file__, "--one", tool, example, out], env=env, stdout=f,
                              stderr=subprocess.STDOUT, timeout=900)
    process = time.perf_counter() - started
    if done.returncode != 0:
        with open(log) as f:
            tail = f.read().strip().splitlines()[-3:]
        raise RuntimeError(f"{TOOLS[tool]} on {example}, round {round_index + 1}, failed: {' | '.join(tail)}")
    with open(out) as f:
        result = json.load(f)
    result["process_s"] = process
    return result


def best(valid):
    key = min(valid, key=valid.get)
    return key, valid[key]


def agreement(kt, ours):
    """Whether the best configurations agree within noise, and how."""
    kt_key, kt_time = best(kt["valid"])
    our_key, our_time = best(ours["valid"])
    if kt_key == our_key:
        return True, "same configuration"
    # Each tool's own measurement of the other's best.
    ours_of_kt = ours["valid"].get(kt_key)
    kt_of_ours = kt["valid"].get(our_key)
    close = all(v is not None for v in (ours_of_kt, kt_of_ours)) and \
        ours_of_kt <= our_time * (1 + NOISE) and kt_of_ours <= kt_time * (1 + NOISE)
    detail = (f"kerntune {json.loads(our_key)} vs Kernel Tuner {json.loads(kt_key)}; "
              f"kerntune times KT's best at {ours_of_kt / our_time:.3f}x its best" if ours_of_kt else "not measured")
    return close, detail


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--out", default=None, help="folder for each call's JSON and log (default: a temporary one)")
    parser.add_argument("--one", nargs=3, metavar=("TOOL", "EXAMPLE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(*args.one)
        return 0
    examples = [e for e in args.examples.split(",") if e]
    unknown = set(examples) - set(EXAMPLES)
    if unknown:
        raise SystemExit(f"unknown examples {sorted(unknown)}; choose from {EXAMPLES}")
    out_dir = args.out or tempfile.mkdtemp(prefix="kt-examples-")
    os.makedirs(out_dir, exist_ok=True)
    env = ensure_kernel_tuner(dict(os.environ, PYTHONUNBUFFERED="1"))
    rows, failed = [], []
    for example in examples:
        runs = {"kt": [], "kerntune": []}
        try:
            for round_index in range(args.rounds):
                order = ["kt", "kerntune"] if round_index % 2 == 0 else ["kerntune", "kt"]
                for tool in order:
                    runs[tool].append(child(tool, example, out_dir, round_index, env))
                    print(f"{example:<12} round {round_index + 1} {TOOLS[tool]:<17} "
                          f"{runs[tool][-1]['wall_s']:7.1f} s in tune_kernel, {runs[tool][-1]['process_s']:7.1f} s "
                          f"process, {len(runs[tool][-1]['valid'])} valid of {runs[tool][-1]['evaluated']}", flush=True)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            failed.append(str(error))
            print(f"FAILED: {error}", flush=True)
            continue
        ratios = [o["wall_s"] / k["wall_s"] for k, o in zip(runs["kt"], runs["kerntune"])]
        agree = [agreement(k, o) for k, o in zip(runs["kt"], runs["kerntune"])]
        rows.append({
            "example": example,
            "kt_s": statistics.median(r["wall_s"] for r in runs["kt"]),
            "kerntune_s": statistics.median(r["wall_s"] for r in runs["kerntune"]),
            "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios),
            "agree": all(a for a, _ in agree), "detail": "; ".join(sorted({d for _, d in agree})),
        })
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'example':<12}{'KT s':>8}{'kerntune s':>12}{'kerntune/KT':>13}{'range':>16}  best agrees")
    for row in rows:
        spread = f"[{row['low']:.2f}, {row['high']:.2f}]"
        print(f"{row['example']:<12}{row['kt_s']:>8.1f}{row['kerntune_s']:>12.1f}{row['ratio']:>13.2f}{spread:>16}  "
              f"{'yes' if row['agree'] else 'NO'} ({row['detail']})")
    for error in failed:
        print(f"FAILED: {error}")
    disagree = [r["example"] for r in rows if not r["agree"]]
    if disagree:
        print(f"best configurations differ beyond noise: {', '.join(disagree)}")
    print(f"(medians over {args.rounds} rounds, tool order alternating; logs in {out_dir})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

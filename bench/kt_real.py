"""Kernel Tuner's own example scripts, run unchanged but for their imports: the test of
"a Kernel Tuner user changes the import" on Kernel Tuner's published code.

    python3 bench/kt_real.py DIR [NAME ...] [--kernel-tuner] [--full]

NAME defaults to all ten of Kernel Tuner's examples/cuda that tune CUDA C with
`tune_kernel` (`all` names them too): vector_add stencil matmul reduction spmv
vector_add_metric zeromeanfilter vector_add_observers expdist convolution.

DIR holds Kernel Tuner's `examples/cuda` scripts (NAME.py, and the .cu files they read),
fetched by whoever runs this: they are Kernel Tuner's code and are never committed here
(on the GPU machine, carry a git-ignored copy such as `.device/kt-real`). Each script is
copied into a scratch folder with `kernel_tuner` replaced by `kerntune` in its import lines
and nothing else, then the function its main guard calls (`tune`, `tune_expdist`,
`tune_zeromean`) is called, in a process of its own with a fresh results store.
Whatever the script returns or writes, every `tune_kernel` call it makes is recorded
(reduction makes 12, expdist and zeromeanfilter 2): its kernel, configurations, valid ones,
wall time and best configuration. Prints one JSON line per script; exits non-zero when a
script fails or, with `--kernel-tuner`, a best configuration disagrees.

A brute force that kerntune forecasts to be long (`kerntune.LongSearchWarning`: more than
10,000 configurations, such as convolution's 1.87 M valid ones) is stopped at its forecast and
reported with the forecast's line, unless `--full` lets it run.

`--kernel-tuner` also runs each script unswitched, under Kernel Tuner itself (it must be
importable, with CuPy: each of its `tune_kernel` calls gets `lang="cupy"` unless the
script names one, as the GPU machine has no PyCUDA), and compares each call's best
configuration: the same, or kerntune's best timed by Kernel Tuner within 5% of Kernel
Tuner's best (each tool's own times: their clocks differ for microsecond kernels).
Scripts whose kerntune run stopped at the forecast are not run under Kernel Tuner.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

EXAMPLES = ["vector_add", "stencil", "matmul", "reduction", "spmv", "vector_add_metric", "zeromeanfilter",
            "vector_add_observers", "expdist", "convolution"]
NOISE = 0.05

# The child: runs one script's main function with every tune_kernel call recorded.
CHILD = r'''
import json, sys, time, runpy, warnings
tool, name, entry, full = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
module = __import__("kerntune" if tool == "kerntune" else "kernel_tuner")
original = module.tune_kernel
calls = []

def summary(kernel_name, tune_params, results, wall):
    keys = list(tune_params)
    valid = [r for r in results if isinstance(r.get("time"), float)]
    measured = [r for r in valid if not r.get("early_stopped")] or valid
    best = min(measured, key=lambda r: r["time"]) if measured else None
    return {"kernel": kernel_name, "configurations": len(results), "valid": len(valid), "wall_s": round(wall, 2),
            "best": {k: best[k] for k in keys + ["time"]} if best else None,
            "times": {json.dumps([r.get(k) for k in keys]): r["time"] for r in valid}}

def recording(kernel_name, kernel_source, problem_size, arguments, tune_params, *args, **kwargs):
    if tool == "kernel_tuner":
        kwargs.setdefault("lang", "cupy")
    start = time.perf_counter()
    out = original(kernel_name, kernel_source, problem_size, arguments, tune_params, *args, **kwargs)
    calls.append(summary(kernel_name, tune_params, out[0], time.perf_counter() - start))
    return out

module.tune_kernel = recording
stopped = None
if tool == "kerntune" and not full:
    warnings.simplefilter("error", module.LongSearchWarning)
start = time.perf_counter()
namespace = runpy.run_path(f"{name}.py", run_name="kt_example")
try:
    namespace[entry]()
except Exception as error:
    if tool != "kerntune" or not isinstance(error, module.LongSearchWarning):
        raise
    stopped = str(error)
print("KTREAL " + json.dumps({"calls": calls, "stopped_at_forecast": stopped,
                              "wall_s": round(time.perf_counter() - start, 2)}, default=str))
'''


def switched(source: str) -> str:
    """The script with `kernel_tuner` replaced by `kerntune` in its import lines only; a bare
    `import kernel_tuner` becomes `import kerntune as kernel_tuner`, so the script's
    `kernel_tuner.tune_kernel(...)` still names the module."""
    source = re.sub(r"^(\s*)import kernel_tuner\s*$", r"\1import kerntune as kernel_tuner", source, flags=re.M)
    return re.sub(r"^(\s*(?:from|import)\s+)kernel_tuner\b", r"\1kerntune", source, flags=re.M)


def entry_point(source: str) -> str:
    """The function the script's main guard calls (`results = tune()` counts)."""
    guard = re.search(r"^if __name__ == ['\"]__main__['\"]:\s*\n(?:\s*#.*\n)*\s+(?:\w+\s*=\s*)?(\w+)\(\)", source,
                      flags=re.M)
    return guard.group(1) if guard else "tune"


def run(folder: str, name: str, tool: str, full: bool) -> dict:
    scratch = tempfile.mkdtemp(prefix=f"kt-real-{tool}-{name}-")
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        if os.path.isfile(path):
            shutil.copy(path, scratch)
    script = os.path.join(scratch, f"{name}.py")
    with open(script) as f:
        text = f.read()
    if tool == "kerntune":
        with open(script, "w") as f:
            f.write(switched(text))
    env = dict(os.environ, KERNTUNE_DB=os.path.join(scratch, f"{name}.db"), PYTHONUNBUFFERED="1")
    argv = [sys.executable, "-c", CHILD, tool, name, entry_point(text), "1" if full else "0"]
    done = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("KTREAL ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail) or f"exit status {done.returncode}"}
    return json.loads(lines[-1][len("KTREAL "):])


def agreement(ours: dict, theirs: dict) -> dict:
    """Whether kerntune's best configuration of one call is Kernel Tuner's, or within
    noise of it by Kernel Tuner's own times."""
    if not ours.get("best") or not theirs.get("best"):
        return {"agree": False, "why": "a tool found no valid configuration"}
    keys = [k for k in ours["best"] if k != "time"]
    mine, its = ([best[k] for k in keys] for best in (ours["best"], theirs["best"]))
    if mine == its:
        return {"agree": True, "same": True}
    by_kt = theirs["times"].get(json.dumps(mine))
    ratio = by_kt / theirs["best"]["time"] if by_kt else None
    by_us = ours["times"].get(json.dumps(its))
    return {"agree": ratio is not None and ratio <= 1 + NOISE, "same": False,
            "kt_times_our_pick": None if ratio is None else round(ratio, 3),
            "we_time_kt_pick": None if not by_us else round(by_us / ours["best"]["time"], 3)}


def main(argv):
    flags = {a for a in argv if a.startswith("--")}
    positional = [a for a in argv if not a.startswith("--")]
    unknown = flags - {"--kernel-tuner", "--full"}
    if not positional or not os.path.isdir(positional[0]) or unknown:
        sys.exit(__doc__)
    folder, names = positional[0], positional[1:]
    names = EXAMPLES if not names or names == ["all"] else names
    failed = False
    for name in names:
        if not os.path.isfile(os.path.join(folder, f"{name}.py")):
            print(f"{name}: {folder}/{name}.py is missing")
            failed = True
            continue
        row = {"name": name, **run(folder, name, "kerntune", "--full" in flags)}
        if "--kernel-tuner" in flags and "error" not in row and not row.get("stopped_at_forecast"):
            theirs = run(folder, name, "kernel_tuner", True)
            row["kernel_tuner"] = theirs
            if "error" not in theirs:
                row["agreement"] = [agreement(a, b) for a, b in zip(row["calls"], theirs["calls"])]
                failed |= not all(a["agree"] for a in row["agreement"])
        failed |= "error" in row
        for call in row.get("calls", []) + row.get("kernel_tuner", {}).get("calls", []):
            call.pop("times", None)
        print(json.dumps(row, default=str), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Records landscapes on this machine's GPU with the benchmark hub's own tuning script for
its convolution kernel, run through kerntune: the kernel, space and restrictions of the
hub's convolution landscapes (convolution_A100, convolution_W6600...), on another GPU.

    python3 bench/record_hub_landscapes.py DIR [VARIANT ...]   # default: every variant

DIR holds the hub's `kernels/convolution_milo.py` and `kernels/convolution_milo.cu`
(https://github.com/AutoTuningAssociation/benchmark_hub, MIT licence), fetched by whoever
runs this and never committed here (on the GPU machine, carry a git-ignored copy such as
`.hub/kernels`). Each variant copies both files into a scratch folder, switches the
script's imports to kerntune as bench/kt_real.py does (`import kerntune as kernel_tuner`),
and runs the script as its main guard does (`python3 convolution_milo.py
CUDA NAME`): a brute force of the 4,362 configurations (`iterations=32`; kerntune stops
timing the clearly slower ones after two runs, marked `early_stopped`), with a fresh results
store. Variants:

- `f15`: the script as published (4096 x 4096 image, 15 x 15 filter);
- `f7`, `f3` (fitting_h100c), `f11`, `f5` (heldout_h100c): the same with a 7 x 7, 3 x 3,
  11 x 11 or 5 x 5 filter. The script's filter size is set in two
  places, its `fw = fh = 15` and its `filter_height`/`filter_width` tunables, and only those
  lines change.

The cache the script writes goes to $OUT/convolution_<VARIANT>_<GPU>.json as soon as it is
written; the script's output goes to $OUT/hub_scripts.log; a table is printed last. A
variant is not started when fewer than HUB_MIN_LEFT seconds (default 150) remain of
HUB_BUDGET (default 540), so one call of the device tool is not overrun.

These landscapes are fitting landscapes (bench/landscapes.py, `fitting_h100c`): they were
assigned before any strategy ran on them.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import kt_real  # bench/: the import switch of Kernel Tuner's own scripts

OUT = os.environ.get("OUT", tempfile.gettempdir())
VARIANTS = {"f15": 15, "f7": 7, "f3": 3, "f11": 11, "f5": 5}


def switched(source: str, filter_size: int) -> str:
    """The script with its imports switched to kerntune and its filter set to `filter_size`."""
    text = kt_real.switched(source)
    if filter_size != 15:
        text, lines = re.subn(r"^fw = fh = 15$", f"fw = fh = {filter_size}", text, flags=re.M)
        text, tunables = re.subn(r'^(\s*tune_params\["filter_(?:height|width)"\]) = \[15\]$',
                                 rf"\1 = [{filter_size}]", text, flags=re.M)
        if (lines, tunables) != (1, 2):
            sys.exit("the script's filter size is not where this recorder expects it (fw = fh = 15 and two tunables)")
    return text


def gpu_name() -> str:
    name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                          capture_output=True, text=True).stdout.strip()
    return next((word for word in name.split() if re.fullmatch(r"[A-Z]+\d+\w*", word)), "GPU")


def record(folder: str, variant: str, gpu: str, log) -> dict:
    scratch = tempfile.mkdtemp(prefix=f"hub-{variant}-")
    kernels = os.path.join(scratch, "kernels")
    os.makedirs(kernels)
    for name in ("convolution_milo.py", "convolution_milo.cu"):
        shutil.copy(os.path.join(folder, name), kernels)
    script = os.path.join(kernels, "convolution_milo.py")
    with open(script) as f:
        text = f.read()
    with open(script, "w") as f:
        f.write(switched(text, VARIANTS[variant]))
    device = f"{gpu}_{variant}"
    env = dict(os.environ, KERNTUNE_DB=os.path.join(scratch, "results.db"))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "convolution_milo.py", "CUDA", device], cwd=kernels, env=env,
                          stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    cache = os.path.join(scratch, "cachefiles", "convolution_milo", f"{device.upper()}.json")
    row = dict(variant=variant, filter=VARIANTS[variant], rc=done.returncode, wall_s=round(wall, 1))
    if os.path.exists(cache):
        with open(cache) as f:
            entries = json.load(f)["cache"].values()
        timed = [e for e in entries if isinstance(e.get("time"), (int, float))]
        best = min(timed, key=lambda e: e["time"]) if timed else None
        row.update(configurations=len(entries), valid=len(timed),
                   early_stopped=sum(1 for e in timed if e.get("early_stopped")),
                   best_ms=best and best["time"],
                   best={k: best[k] for k in ("block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "read_only",
                                              "use_padding", "use_shmem")} if best else None)
        target = os.path.join(OUT, f"convolution_{variant}_{gpu}.json")
        shutil.copy(cache, target)
        row["landscape"] = target
    return row


def main():
    folder = sys.argv[1]
    variants = sys.argv[2:] or list(VARIANTS)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    budget = float(os.environ.get("HUB_BUDGET", "540"))
    min_left = float(os.environ.get("HUB_MIN_LEFT", "150"))
    gpu = gpu_name()
    started = time.perf_counter()
    rows = []
    with open(os.path.join(OUT, "hub_scripts.log"), "w") as log:
        for variant in variants:
            left = budget - (time.perf_counter() - started)
            if left < min_left:
                rows.append(dict(variant=variant, skipped=f"{left:.0f} s left of {budget:.0f}"))
                continue
            rows.append(record(folder, variant, gpu, log))
            print("RECORDED " + json.dumps(rows[-1]), flush=True)
    print("\n=== record_hub summary")
    for row in rows:
        print(json.dumps(row))
    if any(row.get("rc") for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()

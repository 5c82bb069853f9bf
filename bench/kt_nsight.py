"""Which time of a microsecond kernel to believe: kerntune's, Kernel Tuner's, or neither.
For Kernel Tuner's example scripts (spmv and stencil by default), the configuration kerntune
picks is timed three ways on the same GPU in one call:

    python3 bench/kt_nsight.py DIR [NAME ...]

- kerntune: the script with its import switched (bench/kt_real.py), the pick's reported time;
- Kernel Tuner 1.5: the script unswitched (CuPy backend), its reported time for the same
  configuration;
- Nsight Compute: the configuration launched REPEATS times (default 30) through Kernel Tuner's
  own `run_kernel` in a process profiled by `ncu --metrics gpu__time_duration.sum`, the
  duration the GPU's own counters give each launch, with the clocks left as they are
  (`--clock-control none`) and the caches flushed before each launch (`--cache-control all`,
  as kerntune flushes L2 between timed runs) and, a second time, not flushed.

Needs DIR as for bench/kt_real.py, Kernel Tuner with CuPy importable, and `ncu` on PATH or
under /usr/local/cuda. Prints one JSON line per script and a table after `=== nsight summary`.
"""

import csv
import glob
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kt_real  # noqa: E402

REPEATS = int(os.environ.get("NSIGHT_REPEATS", "30"))

# The child ncu profiles: the script's first tune_kernel call becomes REPEATS launches of one
# configuration through Kernel Tuner's run_kernel.
CHILD = r'''
import json, runpy, sys
import kernel_tuner
name, entry, config, repeats = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
RUN_OPTIONS = {"grid_div_x", "grid_div_y", "grid_div_z", "smem_args", "cmem_args", "texmem_args", "compiler_options",
               "block_size_names", "lang", "device", "defines"}

def launching(kernel_name, kernel_source, problem_size, arguments, tune_params, *args, **kwargs):
    options = {k: v for k, v in kwargs.items() if k in RUN_OPTIONS}
    options.setdefault("lang", "cupy")
    for _ in range(repeats):
        kernel_tuner.run_kernel(kernel_name, kernel_source, problem_size, arguments, config, quiet=True, **options)
    raise SystemExit(0)

kernel_tuner.tune_kernel = launching
runpy.run_path(f"{name}.py", run_name="kt_example")[entry]()
'''


def ncu_binary():
    found = shutil.which("ncu") or sorted(glob.glob("/usr/local/cuda*/bin/ncu") + glob.glob("/opt/nvidia/nsight-compute/*/ncu"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def profiled(ncu, folder, name, kernel, config, cache):
    """Median, min and max of gpu__time_duration per launch in microseconds, and the count."""
    with tempfile.TemporaryDirectory(prefix=f"nsight-{name}-") as scratch:
        for entry in os.listdir(folder):
            if os.path.isfile(os.path.join(folder, entry)):
                shutil.copy(os.path.join(folder, entry), scratch)
        with open(os.path.join(scratch, f"{name}.py")) as f:
            entry_point = kt_real.entry_point(f.read())
        argv = [ncu, "--csv", "--metrics", "gpu__time_duration.sum", "--clock-control", "none", "--cache-control", cache,
                "-k", f"regex:{kernel}", sys.executable, "-c", CHILD, name, entry_point, json.dumps(config), str(REPEATS)]
        done = subprocess.run(argv, cwd=scratch, capture_output=True, text=True)
    rows = [r for r in csv.DictReader(io.StringIO(done.stdout[done.stdout.find('"ID"'):]))
            if r.get("Metric Name") == "gpu__time_duration.sum"] if '"ID"' in done.stdout else []
    if not rows:
        return {"error": (done.stderr or done.stdout).strip()[-600:]}
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
    values = [float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], float("nan")) for r in rows]
    return {"median_us": round(statistics.median(values), 3), "min_us": round(min(values), 3),
            "max_us": round(max(values), 3), "launches": len(values)}


def main(argv):
    if not argv or not os.path.isdir(argv[0]):
        sys.exit(__doc__)
    folder, names = argv[0], argv[1:] or ["spmv", "stencil"]
    ncu = ncu_binary()
    if ncu is None:
        sys.exit("ncu (Nsight Compute) is not on PATH or under /usr/local/cuda*/bin")
    table, failed = [], False
    for name in names:
        ours = kt_real.run(folder, name, "kerntune", False)
        theirs = kt_real.run(folder, name, "kernel_tuner", True)
        if "error" in ours or "error" in theirs or not ours["calls"] or not ours["calls"][0]["best"]:
            print(json.dumps({"name": name, "kerntune": ours.get("error"), "kernel_tuner": theirs.get("error")}))
            failed = True
            continue
        call = ours["calls"][0]
        config = {k: v for k, v in call["best"].items() if k != "time"}
        kt_ms = theirs["calls"][0]["times"].get(json.dumps(list(config.values())))
        row = {"name": name, "kernel": call["kernel"], "config": config, "kerntune_us": round(call["best"]["time"] * 1e3, 3),
               "kernel_tuner_us": None if kt_ms is None else round(kt_ms * 1e3, 3),
               "ncu_flushed": profiled(ncu, folder, name, call["kernel"], config, "all"),
               "ncu_warm": profiled(ncu, folder, name, call["kernel"], config, "none")}
        failed |= "error" in row["ncu_flushed"]
        print(json.dumps(row), flush=True)
        flushed, warm = row["ncu_flushed"].get("median_us"), row["ncu_warm"].get("median_us")
        table.append(f"{name} {config}: kerntune {row['kerntune_us']} us, Kernel Tuner {row['kernel_tuner_us']} us, "
                     f"Nsight Compute {flushed} us L2 flushed / {warm} us warm ({REPEATS} launches each)")
    print("=== nsight summary")
    print("\n".join(table))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Kernel Tuner's own example scripts, run unchanged but for their imports: the test of
"a Kernel Tuner user changes the import" on Kernel Tuner's published code.

    python3 bench/kt_real.py DIR [NAME ...]     # default names: vector_add stencil matmul

DIR holds Kernel Tuner's `examples/cuda` scripts (NAME.py, and the .cu files they read),
fetched by whoever runs this: they are Kernel Tuner's code and are never committed here
(on the GPU machine, carry a git-ignored copy such as `.device/kt-real`). Each script is
copied into a scratch folder with `kernel_tuner` replaced by `kerntune` in its import lines
and nothing else, then its `tune()` is called as its main guard would call it, in a process
of its own with a fresh results store. Prints one line per script: configurations, valid
ones, wall time and the best configuration; exits non-zero when a script fails.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The child: runs one switched script's tune() and prints what it returned.
CHILD = r'''
import json, os, runpy, sys, time
name = sys.argv[1]
start = time.perf_counter()
namespace = runpy.run_path(f"{name}.py", run_name="kt_example")
out = namespace["tune"]()
wall = time.perf_counter() - start
results = out
while isinstance(results, tuple):
    results = results[0]
if results is None and os.path.exists(f"{name}.json"):  # a script that writes its results instead
    with open(f"{name}.json") as f:
        results = json.load(f)
valid = [r for r in results if isinstance(r.get("time"), float)]
best = min(valid, key=lambda r: r["time"]) if valid else None
print("KTREAL " + json.dumps({"name": name, "configurations": len(results), "valid": len(valid), "wall_s": wall,
                              "best": {k: v for k, v in best.items() if k != "times"} if best else None}, default=str))
'''


def switched(source: str) -> str:
    """The script with `kernel_tuner` replaced by `kerntune` in its import lines only; a bare
    `import kernel_tuner` becomes `import kerntune as kernel_tuner`, so the script's
    `kernel_tuner.tune_kernel(...)` still names the module."""
    source = re.sub(r"^(\s*)import kernel_tuner\s*$", r"\1import kerntune as kernel_tuner", source, flags=re.M)
    return re.sub(r"^(\s*(?:from|import)\s+)kernel_tuner\b", r"\1kerntune", source, flags=re.M)


def run(folder: str, name: str) -> dict:
    scratch = tempfile.mkdtemp(prefix=f"kt-real-{name}-")
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        if os.path.isfile(path):
            shutil.copy(path, scratch)
    script = os.path.join(scratch, f"{name}.py")
    with open(script) as f:
        text = f.read()
    with open(script, "w") as f:
        f.write(switched(text))
    env = dict(os.environ, KERNTUNE_DB=os.path.join(scratch, f"{name}.db"))
    done = subprocess.run([sys.executable, "-c", CHILD, name], cwd=scratch, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("KTREAL ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"name": name, "error": " | ".join(tail) or f"exit status {done.returncode}"}
    return json.loads(lines[-1][len("KTREAL "):])


def main(argv):
    if not argv or not os.path.isdir(argv[0]):
        sys.exit(__doc__)
    folder, names = argv[0], argv[1:] or ["vector_add", "stencil", "matmul"]
    failed = False
    for name in names:
        if not os.path.isfile(os.path.join(folder, f"{name}.py")):
            print(f"{name}: {folder}/{name}.py is missing")
            failed = True
            continue
        row = run(folder, name)
        print(json.dumps(row, default=str), flush=True)
        failed |= "error" in row
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Triton's own tutorials as published, with `@triton.autotune` renamed to `@kerntune.autotune`
and nothing else, against the same files run through Triton's autotuner: the test of "a
Triton user renames the decorator in the script they copied".

    python3 bench/tutorials.py DIR [STAGE ...]     # stages: 03 08 06 09 (default: all)

DIR holds Triton 3.6.0's `python/tutorials/*.py`, fetched by whoever runs this: they are
Triton's code and are never committed here (on the GPU machine, carry a git-ignored copy
such as `.tutorials`). Each run copies a tutorial into a scratch folder, switched (the
decorator renamed, `import kerntune` added) or as it is, and runs it in a process of its own
with a fresh results store and a fresh Triton cache, so every first call compiles.

- 03, 08: the whole file as a script (top-level code, module-level tensors, its own checks
  and benchmark), once switched; passes when it exits 0 and prints its own success line.
- 06, 09: the file imported as a module (its `__main__` benchmarks take tens of minutes),
  then its own entry points called at one size: 06's `attention` forward (host descriptors,
  and on Hopper device-side ones with warp specialization), 09's `matmul_tma`,
  `matmul_tma_persistent` and `matmul_descriptor_persistent`. Each is called first through
  kerntune and then through Triton, alternating over ROUNDS processes each: the first call's
  wall time, the output checked against torch, and the chosen kernel's time (do_bench). The
  summary gives per-round ratios kerntune / Triton (median, min, max). 09 also times
  cuBLAS (`torch.matmul`) interleaved with the tuned kernel in the same process.

Prints a summary after `=== tutorials summary`; exits non-zero when a run fails.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROUNDS = int(os.environ.get("TUTORIAL_ROUNDS", "2"))
TIMEOUT_S = int(os.environ.get("TUTORIAL_TIMEOUT_S", "420"))

FILES = {
    "03": "03-matrix-multiplication.py",
    "06": "06-fused-attention.py",
    "08": "08-grouped-gemm.py",
    "09": "09-persistent-matmul.py",
}

# What each whole-file run prints when its own check passed.
SUCCESS = {"03": "Triton and Torch match", "08": None}

# The calls made of an imported tutorial: `ns` is its namespace. Each prints one RESULT line.
CALLS = {
    "06": r'''
import torch, triton
cases = [("host descriptors", False)] + ([("device descriptors, warp specialized", True)] if ns["is_hopper"]() else [])
for label, ws in cases:
    torch.manual_seed(0)
    Z, H, N_CTX, D = 4, 32, 4096, 128
    q, k, v = (torch.randn((Z, H, N_CTX, D), dtype=torch.float16, device="cuda") * 0.5 for _ in range(3))
    call = lambda: ns["attention"](q, k, v, True, 0.5, ws)
    first = timed(call)
    out = call()
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    error = (out.float() - ref.float()).abs().max().item()
    report(f"06 attention fwd causal {Z}x{H}x{N_CTX}x{D}, {label}", first, triton.testing.do_bench(call), error < 2e-2, error)
''',
    "09": r'''
import torch, triton
M = N = K = int(os.environ.get("TUTORIAL_09_SIZE", "4096"))
torch.manual_seed(0)
a = torch.randn((M, K), dtype=torch.float16, device="cuda")
b = torch.randn((K, N), dtype=torch.float16, device="cuda").T.contiguous()  # the tutorial passes b transposed
ref = torch.matmul(a, b.T)
cublas = lambda: torch.matmul(a, b.T)
for name in ("matmul_tma", "matmul_tma_persistent", "matmul_descriptor_persistent"):
    fn = ns[name]
    call = lambda: fn(a, b, False)
    first = timed(call)
    out = call()
    error = (out.float() - ref.float()).abs().max().item()
    rounds = [triton.testing.do_bench(call) / triton.testing.do_bench(cublas) for _ in range(7)]
    report(f"09 {name} fp16 {M}^3", first, triton.testing.do_bench(call), error < 1.0, error,
           cublas_ratio=statistics.median(rounds))
''',
}

CHILD = r'''
import json, os, runpy, statistics, sys, time
import torch

def timed(call):
    torch.cuda.synchronize()
    start = time.perf_counter()
    call()
    torch.cuda.synchronize()
    return time.perf_counter() - start

def report(label, first_s, kernel_ms, correct, error, **extra):
    print("RESULT " + json.dumps({"label": label, "first_s": first_s, "kernel_ms": kernel_ms, "correct": correct,
                                  "max_error": error, **extra}), flush=True)

ns = runpy.run_path(sys.argv[1], run_name="tutorial")
''' 


def switched(text: str) -> str:
    """The tutorial with `@triton.autotune` renamed and kerntune imported; nothing else."""
    renamed, count = re.subn(r"@triton\.autotune\b", "@kerntune.autotune", text)
    if count == 0:
        raise SystemExit("no @triton.autotune in the tutorial: nothing to switch")
    return "import kerntune\n" + renamed


def prepare(source_dir: str, stage: str, tool: str, scratch: str) -> str:
    with open(os.path.join(source_dir, FILES[stage])) as f:
        text = f.read()
    path = os.path.join(scratch, FILES[stage])
    with open(path, "w") as f:
        f.write(switched(text) if tool == "kerntune" else text)
    return path


def run(argv, scratch, label):
    env = dict(os.environ, KERNTUNE_DB=os.path.join(scratch, "results.db"), TRITON_CACHE_DIR=os.path.join(scratch, "triton"),
               MPLBACKEND="Agg")
    print(f"--- {label}: {' '.join(argv)}", flush=True)
    try:
        done = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as expired:
        print(f"{label}: timed out after {TIMEOUT_S} s\n{(expired.stdout or '')[-3000:]}{(expired.stderr or '')[-3000:]}")
        return None, ""
    print(done.stdout[-4000:])
    if done.returncode != 0:
        print(done.stderr[-6000:])
    return done.returncode, done.stdout


def whole_file(source_dir, stage):
    scratch = tempfile.mkdtemp(prefix=f"tutorial-{stage}-")
    try:
        path = prepare(source_dir, stage, "kerntune", scratch)
        code, out = run([sys.executable, path], scratch, f"{stage} as a script, switched")
        ok = code == 0 and (SUCCESS[stage] is None or SUCCESS[stage] in out)
        return [f"{stage} ({FILES[stage]}) as a script, switched: {'ok' if ok else 'FAILED'} (exit {code})"], ok
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def entry_points(source_dir, stage):
    results = {"kerntune": [], "triton": []}
    ok = True
    for round_number in range(ROUNDS):
        for tool in ("kerntune", "triton"):
            scratch = tempfile.mkdtemp(prefix=f"tutorial-{stage}-{tool}-")
            try:
                path = prepare(source_dir, stage, tool, scratch)
                child = os.path.join(scratch, "child.py")
                with open(child, "w") as f:
                    f.write(CHILD + CALLS[stage])
                code, out = run([sys.executable, child, path], scratch, f"{stage} round {round_number + 1}, {tool}")
                rows = [json.loads(line[len("RESULT "):]) for line in out.splitlines() if line.startswith("RESULT ")]
                ok = ok and code == 0 and bool(rows) and all(r["correct"] for r in rows)
                results[tool].append(rows)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    lines = []
    labels = [r["label"] for r in results["kerntune"][0]] if results["kerntune"] and results["kerntune"][0] else []
    for index, label in enumerate(labels):
        pairs = [(k[index], t[index]) for k, t in zip(results["kerntune"], results["triton"]) if len(k) > index and len(t) > index]
        if not pairs:
            lines.append(f"{label}: no pair of runs")
            continue
        first = [k["first_s"] / t["first_s"] for k, t in pairs]
        kernel = [k["kernel_ms"] / t["kernel_ms"] for k, t in pairs]
        line = (f"{label}: first call kerntune {statistics.median(k['first_s'] for k, _ in pairs):.1f} s, "
                f"Triton {statistics.median(t['first_s'] for _, t in pairs):.1f} s, ratio {statistics.median(first):.2f} "
                f"({min(first):.2f}-{max(first):.2f}); kernel ratio {statistics.median(kernel):.3f} "
                f"({min(kernel):.3f}-{max(kernel):.3f}); correct {all(k['correct'] and t['correct'] for k, t in pairs)}")
        if "cublas_ratio" in pairs[0][0]:
            line += (f"; cuBLAS time / kernel time: kerntune {statistics.median(1 / k['cublas_ratio'] for k, _ in pairs):.3f}, "
                     f"Triton {statistics.median(1 / t['cublas_ratio'] for _, t in pairs):.3f}")
        lines.append(line + f" [{len(pairs)} rounds]")
    return lines, ok


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    source_dir = sys.argv[1]
    stages = sys.argv[2:] or ["03", "08", "06", "09"]
    summary, failed = [], []
    for stage in stages:
        if stage not in FILES:
            raise SystemExit(f"unknown stage {stage}: choose among {', '.join(FILES)}")
        lines, ok = (whole_file if stage in SUCCESS else entry_points)(source_dir, stage)
        summary += lines
        if not ok:
            failed.append(stage)
    print("=== tutorials summary")
    print("\n".join(summary))
    if failed:
        print("FAILED: " + " ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()

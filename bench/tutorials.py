"""Triton's own tutorials as published, with `@triton.autotune` renamed to `@kerntune.autotune`
and nothing else, against the same files run through Triton's autotuner: the test of "a
Triton user renames the decorator in the script they copied".

    python3 bench/tutorials.py DIR [STAGE ...]     # stages: 03 08 06 09 02 05 09wide (default: all)

DIR holds Triton 3.6.0's `python/tutorials/*.py`, fetched by whoever runs this: they are
Triton's code and are never committed here (on the GPU machine, carry a git-ignored copy
such as `.tutorials`). Each run copies a tutorial into a scratch folder, switched (the
decorator renamed, `import kerntune` added) or as it is, and runs it in a process of its own
with a fresh results store and a fresh Triton cache, so every first call compiles.

- 03, 08: the whole file as a script (top-level code, module-level tensors, its own checks
  and benchmark), once switched; passes when it exits 0 and prints its own success line.
  The stages named in TUTORIAL_WHOLE_TRITON (default 08) also run as published, under
  Triton's autotuner, and the two wall times are compared (one round: the whole file).
- 06, 09: the file imported as a module (its `__main__` benchmarks take tens of minutes),
  then its own entry points called at one size: 06's `attention` forward (host descriptors,
  and on Hopper device-side ones with warp specialization), 09's `matmul_tma`,
  `matmul_tma_persistent` and `matmul_descriptor_persistent`. Each is called first through
  kerntune and then through Triton, alternating over ROUNDS processes each: the first call's
  wall time, the output checked against torch, and the chosen kernel's time (do_bench). The
  summary gives per-round ratios kerntune / Triton (median, min, max). 09 also times
  cuBLAS (`torch.matmul`) interleaved with the tuned kernel in the same process.
  TUTORIAL_09_SIZE (default 4096), TUTORIAL_09_DTYPE (fp16 or fp8: then cuBLAS is
  `torch._scaled_mm` with unit scales) and TUTORIAL_09_FUNCTIONS (the entry points) pick
  what 09 runs.
- 09wide: tutorial 09's persistent TMA kernel (`matmul_kernel_tma_persistent`, its own
  pre_hook setting the descriptors' blocks) tuned by `kerntune.tune` over a space wider than
  the tutorial's 48 configurations (block sizes 64-256, BLOCK_SIZE_K 32-128, GROUP_SIZE_M
  1, 8 or 16, 2-5 stages, 4 or 8 warps, epilogue subtiling, warp specialization, one or two
  persistent programs an SM: 5,184 configurations) with the default
  strategy and a time limit (TUTORIAL_WIDE_S, default 90 s), then timed against cuBLAS
  (`torch.matmul`) over 15 interleaved rounds (do_bench each): median per-round ratio.
- 02, 05: the tutorials that hand-pick their launch parameters (02's `num_warps` and
  `num_stages`, 05's block sizes, warps and backward group size). Their `@triton.jit`
  kernels are taken from the file alone (its imports and kernel definitions, none of its
  top-level code, which runs a benchmark), tuned with `kerntune.tune` over those parameters,
  and the pick timed against the tutorial's hand-picked values, interleaved (do_bench,
  median of per-round ratios).

Prints a summary after `=== tutorials summary`; exits non-zero when a run fails.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = int(os.environ.get("TUTORIAL_ROUNDS", "2"))
TIMEOUT_S = int(os.environ.get("TUTORIAL_TIMEOUT_S", "420"))

FILES = {
    "09wide": "09-persistent-matmul.py",
    "02": "02-fused-softmax.py",
    "03": "03-matrix-multiplication.py",
    "05": "05-layer-norm.py",
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
precision = os.environ.get("TUTORIAL_09_DTYPE", "fp16")
dtype = torch.float8_e4m3fn if precision == "fp8" else torch.float16
torch.manual_seed(0)
a = torch.randn((M, K), device="cuda").to(dtype)
b = torch.randn((K, N), device="cuda").to(dtype).T.contiguous()  # the tutorial passes b transposed
ref = torch.matmul(a.half(), b.half().T)
if precision == "fp8":  # cuBLAS's fp8 GEMM, unit scales, fp8 out where it offers it
    one = torch.tensor(1.0, device="cuda")
    try:
        torch._scaled_mm(a, b.T, one, one, out_dtype=dtype)
        cublas = lambda: torch._scaled_mm(a, b.T, one, one, out_dtype=dtype)
    except RuntimeError:
        cublas = lambda: torch._scaled_mm(a, b.T, one, one, out_dtype=torch.float16)
else:
    cublas = lambda: torch.matmul(a, b.T)
names = os.environ.get("TUTORIAL_09_FUNCTIONS", "matmul_tma matmul_tma_persistent matmul_descriptor_persistent").split()
for name in names:
    fn = ns[name]
    call = lambda: fn(a, b, False)
    first = timed(call)
    out = call()
    error = (out.float() - ref.float()).abs().max().item()
    # fp8 keeps 3 bits of mantissa: an element is off by up to 1/16 of its size.
    bound = 1.0 if precision == "fp16" else 0.07 * ref.abs().max().item()
    rounds = [triton.testing.do_bench(call) / triton.testing.do_bench(cublas) for _ in range(7)]
    report(f"09 {name} {precision} {M}^3", first, triton.testing.do_bench(call), error < bound, error,
           cublas_ratio=statistics.median(rounds))
''',
}

# The tutorials whose launch parameters are hand-picked: their kernels tuned with
# kerntune.tune, in a child that imports `kernels` (the file's imports and @triton.jit
# functions only) and prints one HANDPICKED line per case.
HANDPICKED = {
    "02": r'''
import torch, triton, kerntune, statistics
for rows, cols in [(1823, 781), (4096, 4096)]:
    torch.manual_seed(0)
    x = torch.randn(rows, cols, device="cuda")
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    args = {"output_ptr": y, "input_ptr": x, "input_row_stride": x.stride(0), "output_row_stride": y.stride(0),
            "n_rows": rows, "n_cols": cols, "BLOCK_SIZE": block}
    hand = {"num_warps": 8, "num_stages": 4 if torch.cuda.get_device_properties(0).shared_memory_per_block_optin > 200000 else 2}
    result = kerntune.tune(kernels.softmax_kernel, args, (rows,), {"num_warps": [1, 2, 4, 8, 16], "num_stages": [1, 2, 3, 4]},
                           answer={"output_ptr": torch.softmax(x, dim=1)}, strategy="brute_force", progress=False)
    launch = lambda config: kernels.softmax_kernel[(rows,)](y, x, x.stride(0), y.stride(0), rows, cols, BLOCK_SIZE=block, **config)
    compare(f"02 softmax {rows}x{cols} fp32, num_warps and num_stages", result, hand, launch)
''',
    "05": r'''
import torch, triton, kerntune
M, N = 4096, 8192
torch.manual_seed(0)
x = torch.randn(M, N, device="cuda", dtype=torch.float16)
w = torch.rand(N, device="cuda", dtype=torch.float16)
b = torch.rand(N, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
mean = torch.empty(M, device="cuda", dtype=torch.float32)
rstd = torch.empty(M, device="cuda", dtype=torch.float32)
expected = torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
args = {"X": x, "Y": y, "W": w, "B": b, "Mean": mean, "Rstd": rstd, "stride": x.stride(0), "N": N, "eps": 1e-5}
hand_block = min(65536 // x.element_size(), triton.next_power_of_2(N))
hand = {"BLOCK_SIZE": hand_block, "num_warps": min(max(hand_block // 256, 1), 8)}
result = kerntune.tune(kernels._layer_norm_fwd_fused, args, (M,),
                       {"BLOCK_SIZE": [512, 1024, 2048, 4096, 8192, 16384, 32768], "num_warps": [1, 2, 4, 8, 16]},
                       answer={"Y": expected}, strategy="brute_force", progress=False)
launch = lambda config: kernels._layer_norm_fwd_fused[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, 1e-5, **config)
compare(f"05 layer norm forward {M}x{N} fp16, BLOCK_SIZE and num_warps", result, hand, launch)

# The backward's dx kernel: GROUP_SIZE_M rows share one partial sum of dw and db, under a lock.
kernels._layer_norm_fwd_fused[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, 1e-5, **hand)
dy = torch.randn_like(x)
xr = x.float().requires_grad_()
torch.nn.functional.layer_norm(xr, (N,), w.float(), b.float(), 1e-5).backward(dy.float())
largest = 256
partial = lambda: torch.zeros(largest, N, device="cuda", dtype=x.dtype)
dx = torch.empty_like(x)
dw, db, locks = partial(), partial(), torch.zeros(2 * largest, device="cuda", dtype=torch.int32)
args = {"DX": dx, "DY": dy, "DW": dw, "DB": db, "X": x, "W": w, "Mean": mean, "Rstd": rstd, "Lock": locks,
        "stride": x.stride(0), "N": N, "BLOCK_SIZE_N": hand_block}
hand = {"GROUP_SIZE_M": 96, "num_warps": min(max(hand_block // 256, 1), 8)}
result = kerntune.tune(kernels._layer_norm_bwd_dx_fused, args, (M,),
                       {"GROUP_SIZE_M": [16, 32, 64, 96, 128, 256], "num_warps": [4, 8, 16]},
                       answer={"DX": xr.grad.to(x.dtype)}, reset_to_zero=["DW", "DB", "Lock"], atol=5e-2,
                       strategy="brute_force", progress=False)
def launch(config):
    dw.zero_(); db.zero_(); locks.zero_()
    kernels._layer_norm_bwd_dx_fused[(M,)](dx, dy, dw, db, x, w, mean, rstd, locks, x.stride(0), N,
                                            BLOCK_SIZE_N=hand_block, **config)
compare(f"05 layer norm backward dx {M}x{N} fp16, GROUP_SIZE_M and num_warps", result, hand, launch)
''',
}

WIDE = r'''
import runpy, statistics, sys, time, torch, triton, kerntune
from triton.tools.tensor_descriptor import TensorDescriptor
from kerntune._space import launch_options
ns = runpy.run_path(sys.argv[2], run_name="tutorial")
hook, kernel = ns["matmul_tma_set_block_size_hook"], ns["matmul_kernel_tma_persistent"]
jit = kerntune._arguments.jit_function(kernel)
for size in [int(n) for n in os.environ.get("TUTORIAL_WIDE_SIZES", "4096").split()]:
    M = N = K = size
    torch.manual_seed(0)
    a = torch.randn((M, K), dtype=torch.float16, device="cuda")
    b = torch.randn((N, K), dtype=torch.float16, device="cuda")
    c = torch.empty((M, N), dtype=torch.float16, device="cuda")
    sms = torch.cuda.get_device_properties("cuda").multi_processor_count
    descs = {name: TensorDescriptor.from_tensor(t, [1, 1]) for name, t in (("a_desc", a), ("b_desc", b), ("c_desc", c))}
    args = {**descs, "M": M, "N": N, "K": K, "FP8_OUTPUT": False}
    grid = lambda meta: (min(meta["NUM_SMS"], triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"])),)
    # Beyond the tutorial's knobs: warp specialization, and two persistent programs an SM.
    configs = [triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g, "EPILOGUE_SUBTILE": sub,
                              "WARP_SPECIALIZE": ws, "NUM_SMS": sms * programs},
                             num_stages=s, num_warps=w, pre_hook=hook)
               for bm in (64, 128, 256) for bn in (64, 128, 256) for bk in (32, 64, 128) for g in (1, 8, 16)
               for s in (2, 3, 4, 5) for w in (4, 8) for sub in (True, False) for ws in (False, True) for programs in (1, 2)]
    started = time.perf_counter()
    result = kerntune.tune(kernel, args, grid, configs=configs, answer={"c_desc": a @ b.T},
                           time_limit=float(os.environ.get("TUTORIAL_WIDE_S", "90")), progress=False)
    wall = time.perf_counter() - started
    best = launch_options(result.best_config)

    def ours():
        nargs = {**descs, **best}
        hook(nargs)
        jit[grid](*descs.values(), M, N, K, FP8_OUTPUT=False, **best)

    ours()
    error = (c.float() - (a @ b.T).float()).abs().max().item()
    rounds = [triton.testing.do_bench(lambda: a @ b.T) / triton.testing.do_bench(ours) for _ in range(15)]
    print("WIDE " + json.dumps({"size": size, "evaluations": len(result.results), "wall_s": wall, "best": best,
                                "cublas_over_ours": statistics.median(rounds), "low": min(rounds), "high": max(rounds),
                                "max_error": error}), flush=True)
'''


def wide(source_dir, stage):
    with tempfile.TemporaryDirectory(prefix="tutorial-09wide-", ignore_cleanup_errors=True) as scratch:
        path = prepare(source_dir, stage, "triton", scratch)
        code, rows = run_child(scratch, "import json, os\n" + WIDE, [scratch, path], "WIDE",
                               "09 persistent TMA kernel, a wider space")
    lines = [f"09wide fp16 {r['size']}^3: {r['evaluations']} evaluations in {r['wall_s']:.0f} s, best {r['best']}; "
             f"cuBLAS time / kernel time {r['cublas_over_ours']:.3f} ({r['low']:.3f}-{r['high']:.3f}) over 15 "
             f"interleaved rounds; max error {r['max_error']:.3g}" for r in rows]
    return lines, code == 0 and bool(rows) and all(r["max_error"] < 1.0 for r in rows)


HANDPICKED_CHILD = r'''
import importlib, json, statistics, sys
import triton
from kerntune._space import launch_options
sys.path.insert(0, sys.argv[1])
kernels = importlib.import_module("kernels")

def compare(label, result, hand, launch):
    picked = launch_options(result.best_config)
    rounds = []
    for _ in range(7):
        ours = triton.testing.do_bench(lambda: launch(picked))
        theirs = triton.testing.do_bench(lambda: launch(hand))
        rounds.append(theirs / ours)
    print("HANDPICKED " + json.dumps({"label": label, "picked": picked, "hand": hand, "speedup": statistics.median(rounds),
                                      "low": min(rounds), "high": max(rounds), "evaluations": len(result.results),
                                      "verified": result.verified}), flush=True)
'''


def kernels_only(text: str) -> str:
    """A tutorial's imports and ``@triton.jit`` functions, none of its other top-level code."""
    import ast

    tree = ast.parse(text)
    keep = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
            or (isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list))]
    lines = text.splitlines()
    first = lambda node: min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n\n".join("\n".join(lines[first(node) - 1:node.end_lineno]) for node in keep) + "\n"


def handpicked(source_dir, stage):
    with tempfile.TemporaryDirectory(prefix=f"tutorial-{stage}-kernels-", ignore_cleanup_errors=True) as scratch:
        with open(os.path.join(source_dir, FILES[stage])) as f:
            text = f.read()
        with open(os.path.join(scratch, "kernels.py"), "w") as f:
            f.write(kernels_only(text))
        code, rows = run_child(scratch, HANDPICKED_CHILD + HANDPICKED[stage], [scratch], "HANDPICKED",
                               f"{stage} kernels tuned with kerntune.tune")
    lines = [f"{r['label']}: kerntune picked {r['picked']} against the tutorial's {r['hand']}: "
             f"{r['speedup']:.3f}x ({r['low']:.3f}-{r['high']:.3f}) over 7 interleaved rounds, "
             f"{r['evaluations']} evaluations, verified {r['verified']}" for r in rows]
    return lines, code == 0 and bool(rows)


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


def run_child(scratch, source, args, tag, label):
    """Runs ``source`` as a script in ``scratch`` with ``args``; returns its exit status and
    the JSON of each line it printed after ``tag``."""
    child = os.path.join(scratch, "child.py")
    with open(child, "w") as f:
        f.write(source)
    code, out = run([sys.executable, child, *args], scratch, label)
    return code, [json.loads(line[len(tag) + 1:]) for line in out.splitlines() if line.startswith(tag + " ")]


def whole_file(source_dir, stage):
    """The file run as a script, switched; for the stages in TUTORIAL_WHOLE_TRITON (default
    08), then as published under Triton's autotuner, each run's wall time beside the other."""
    lines, ok = [], True
    tools = ("kerntune", "triton") if stage in os.environ.get("TUTORIAL_WHOLE_TRITON", "08").split() else ("kerntune",)
    walls = {}
    for tool in tools:
        with tempfile.TemporaryDirectory(prefix=f"tutorial-{stage}-{tool}-", ignore_cleanup_errors=True) as scratch:
            path = prepare(source_dir, stage, tool, scratch)
            started = time.perf_counter()
            code, out = run([sys.executable, path], scratch, f"{stage} as a script, {tool}")
            walls[tool] = time.perf_counter() - started
        passed = code == 0 and (SUCCESS[stage] is None or SUCCESS[stage] in out)
        ok = ok and passed
        lines.append(f"{stage} ({FILES[stage]}) as a script, {'switched' if tool == 'kerntune' else 'as published'}: "
                     f"{'ok' if passed else 'FAILED'} (exit {code}), {walls[tool]:.1f} s")
    if len(walls) == 2:
        lines.append(f"{stage} whole file, wall time kerntune / Triton: {walls['kerntune'] / walls['triton']:.2f}")
    return lines, ok


def entry_points(source_dir, stage):
    results = {"kerntune": [], "triton": []}
    ok = True
    for round_number in range(ROUNDS):
        for tool in ("kerntune", "triton"):
            with tempfile.TemporaryDirectory(prefix=f"tutorial-{stage}-{tool}-", ignore_cleanup_errors=True) as scratch:
                path = prepare(source_dir, stage, tool, scratch)
                code, rows = run_child(scratch, CHILD + CALLS[stage], [path], "RESULT",
                                       f"{stage} round {round_number + 1}, {tool}")
            ok = ok and code == 0 and bool(rows) and all(r["correct"] for r in rows)
            results[tool].append(rows)
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
    stages = sys.argv[2:] or ["03", "08", "06", "09", "02", "05"]
    summary, failed = [], []
    for stage in stages:
        if stage not in FILES:
            raise SystemExit(f"unknown stage {stage}: choose among {', '.join(FILES)}")
        runner = (whole_file if stage in SUCCESS else handpicked if stage in HANDPICKED else wide if stage == "09wide"
                  else entry_points)
        lines, ok = runner(source_dir, stage)
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

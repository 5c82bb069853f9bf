"""GPU audit of the schedule legality rules: every single legal move of a kernel's original
schedule, launched through Triton and compared bit for bit with the original's output.

The search never keeps a candidate whose outputs differ (each is checked before it is timed),
but a legal move that computes something else is a hole in the rules. For each configuration
below, this compiles the kernel with Triton, writes one cubin per legal move of ptxas's schedule
(`single_moves`, an example of kerntune-sass carried in .device/), launches each on two random
input sets with the output poisoned, and lists the moves whose output differs.

Usage: python3 bench/schedule_audit.py   (on the GPU machine, after gpu/prepare.sh here)"""

import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "triton"))
import attention  # noqa: E402
import matmul  # noqa: E402

import kerntune  # noqa: E402
from kerntune._arguments import jit_function  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SINGLE_MOVES = os.environ.get("SINGLE_MOVES", os.path.join(ROOT, ".device", "single_moves"))
OUT = os.environ.get("OUT", tempfile.gettempdir())


def matmul_case(bm, bn, bk, stages, warps):
    size = 4096
    inputs = [(torch.randn((size, size), device="cuda", dtype=torch.float16),
               torch.randn((size, size), device="cuda", dtype=torch.float16)) for _ in range(2)]
    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
    config = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, num_stages=stages, num_warps=warps)
    runs = [(matmul.arguments(a, b, c), c) for a, b in inputs]
    return f"matmul {bm}x{bn}x{bk} s{stages} w{warps}", matmul.matmul_kernel, matmul.grid, config, runs


def attention_case(bm, bn, pre, warps, stages):
    Z, H, N_CTX, HEAD_DIM = 4, 16, 4096, 64
    o = torch.empty((Z, H, N_CTX, HEAD_DIM), device="cuda", dtype=torch.float16)
    runs = []
    for _ in range(2):
        q, k, v = (torch.randn((Z, H, N_CTX, HEAD_DIM), device="cuda", dtype=torch.float16) for _ in range(3))
        runs.append((attention.arguments(q, k, v, o, HEAD_DIM ** -0.5), o))
    config = dict(BLOCK_M=bm, BLOCK_N=bn, PRE_LOAD_V=pre, num_warps=warps, num_stages=stages)
    return (f"attention {bm}x{bn} pre_v={pre} w{warps} s{stages}", attention.attention_fwd,
            lambda META: attention.grid({**META, "Z": Z}), config, runs)


def outputs(kernel, grid, config, runs):
    results = []
    for args, out in runs:
        out.fill_(float("nan"))
        jit_function(kernel)[grid](**args, **config)
        results.append(out.clone())
    torch.cuda.synchronize()
    return results


def audit(label, kernel, grid, config, runs, folder):
    fn = jit_function(kernel)
    reference = outputs(kernel, grid, config, runs)
    compiled = fn.warmup(**runs[0][0], **config, grid=grid)
    original = compiled.asm["cubin"]
    path = os.path.join(folder, "original.cubin")
    with open(path, "wb") as f:
        f.write(original)
    listing = subprocess.run([SINGLE_MOVES, path, compiled.name, os.path.join(folder, "moves")], capture_output=True, text=True)
    if listing.returncode != 0:
        return dict(kernel=label, error=listing.stderr.strip()[-500:])
    moves = [json.loads(line) for line in listing.stdout.splitlines()]
    failing = []
    for move in moves:
        with open(move["file"], "rb") as f:
            kerntune.use_schedule(kernel, runs[0][0], grid, config, f.read())
        got = outputs(kernel, grid, config, runs)
        wrong = [int((g != r).sum().item()) for g, r in zip(got, reference) if not torch.equal(g, r)]
        if wrong:
            failing.append(dict(move=f"#{move['index']} {move['direction']}", moving=move["moving"], crossing=move["crossing"], wrong_elements=wrong))
    kerntune.use_schedule(kernel, runs[0][0], grid, config, original)
    again = outputs(kernel, grid, config, runs)
    stable = all(torch.equal(g, r) for g, r in zip(again, reference))
    return dict(kernel=label, legal_moves=len(moves), failing=failing, original_reproducible=stable)


def main():
    torch.manual_seed(0)
    cases = [
        lambda: matmul_case(128, 256, 64, 3, 8), lambda: matmul_case(128, 128, 64, 4, 4),
        lambda: matmul_case(64, 64, 32, 3, 2), lambda: matmul_case(32, 64, 64, 4, 4),
        lambda: attention_case(128, 64, True, 8, 3), lambda: attention_case(64, 64, True, 4, 3),
        lambda: attention_case(128, 128, False, 8, 2),
    ]
    rows = []
    for make in cases:
        label, kernel, grid, config, runs = make()
        folder = tempfile.mkdtemp(prefix="audit-")
        row = audit(label, kernel, grid, config, runs, folder)
        print(json.dumps(row), flush=True)
        rows.append(row)
    with open(os.path.join(OUT, "schedule_audit.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("\n=== schedule audit")
    for r in rows:
        if "error" in r:
            print(f"{r['kernel']}: error {r['error']}")
            continue
        print(f"{r['kernel']}: {r['legal_moves']} legal moves, {len(r['failing'])} computing something else; original reproducible: {r['original_reproducible']}")
        for f in r["failing"]:
            print(f"  {f['move']}: {f['moving']}  <->  {f['crossing']}  ({f['wrong_elements']} elements differ)")


if __name__ == "__main__":
    main()

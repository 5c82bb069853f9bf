"""What a launch of a tuned kernel costs on the host: `@kerntune.autotune` against
`@triton.autotune` and the bare `@triton.jit` launch, once both have tuned (one key).

    python3 bench/dispatch.py [LAUNCHES]

A microsecond kernel (an add of 4,096 floats) is launched LAUNCHES times (default 20,000)
back to back and the wall time divided by the count, so the host's cost per launch is what is
measured; the three are interleaved over ROUNDS (7) rounds. Prints the microseconds per
launch of each and the median (min-max) per-round ratios kerntune / Triton's autotuner and
kerntune / bare launch, after `=== dispatch summary`.
"""

import os
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

import kerntune

ROUNDS = 7
CONFIGS = [(128, 4), (256, 4), (512, 8)]


@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def main():
    launches = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in CONFIGS]
    theirs = triton.autotune(configs=configs, key=["n"])(add)
    ours = kerntune.autotune(configs=configs, key=["n"], progress=False)(add)
    n = 4096
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    theirs[grid](x, y, out, n)
    ours[grid](x, y, out, n)
    torch.testing.assert_close(out, x + y)
    block = ours.best_config.kwargs["BLOCK"]
    bare = lambda: add[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block, num_warps=ours.best_config.num_warps)
    calls = {"bare": bare, "triton": lambda: theirs[grid](x, y, out, n), "kerntune": lambda: ours[grid](x, y, out, n)}

    def per_launch(call):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(launches):
            call()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / launches * 1e6

    for call in calls.values():
        per_launch(call)  # warm
    rounds = [{name: per_launch(call) for name, call in calls.items()} for _ in range(ROUNDS)]
    print("=== dispatch summary")
    for name in calls:
        print(f"{name}: {statistics.median(r[name] for r in rounds):.2f} us a launch")
    for anchor in ("triton", "bare"):
        ratios = [r["kerntune"] / r[anchor] for r in rounds]
        print(f"kerntune / {anchor}: {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) over {ROUNDS} rounds")


if __name__ == "__main__":
    os.environ.setdefault("KERNTUNE_DB", os.path.join(os.environ.get("OUT", "/tmp"), "dispatch.db"))
    main()

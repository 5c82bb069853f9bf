"""Native schedule tuning on the GPU (issue targets: at least 5% lower median time than
ptxas's schedule on a real kernel, with the interleaved A/B interval excluding no gain and
bit-for-bit identical outputs on 10^4 random input sets; 1,000 candidates in under 5
minutes). For the Triton matmul and fused attention examples (fp16), tunes a small space
around their best configurations, then the schedule of the best one with 1,000 candidates,
and reports what it gives, including when it gives nothing. A kept schedule is also
launched through Triton (kerntune.use_schedule) and checked against the original.

`survey` instead tunes the schedule of several fixed configurations of both examples (the
wgmma ones the parameter search prefers and warp-level mma ones, with hill climbing and, once,
SIP's simulated annealing), to show what the legal moves give across kernels.

`shapes` tunes both examples at other problem shapes (small, skinny and medium matmuls, short
and wide-head attention: 40 configurations each with the default strategy), then the schedule
of each best configuration, for kernels whose time depends more on latency or memory.

Usage: python3 bench/schedule.py [matmul] [attention] [survey] [shapes]; rows go to $OUT/schedule.json."""

import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "triton"))
import attention  # noqa: E402
import matmul  # noqa: E402

import kerntune  # noqa: E402

BUDGET = int(os.environ.get("SCHEDULE_BUDGET", "1000"))
# Reloads of the final A/B timing in `shapes`; several values ("1 20") repeat each shape, to
# show what loading both kernels only once (1) does to the control.
BLOCKS = [int(b) for b in os.environ.get("SCHEDULE_BLOCKS", "20").split()]
# Runs only the survey cases whose label contains this text (all by default).
ONLY = os.environ.get("SURVEY_ONLY", "")
OUT = os.environ.get("OUT", tempfile.gettempdir())


def report(label, result, started):
    s = result.schedule
    row = dict(kernel=label, best_config=result.best_config, instructions=s["instructions"], legal_moves=s["legal_moves"],
               evaluations=s["evaluations"], rejected=s["rejected"], search_s=s["search_seconds"], stage_s=time.perf_counter() - started,
               search_range=s["search_range"], finalists=s["finalists"], rejected_reasons=s["rejected_reasons"],
               original_ms=s["original_median_ms"], schedule_ms=s["candidate_median_ms"], ratio=s["ratio"], ci=[s["ratio_low"], s["ratio_high"]],
               control=s["control_ratio"], control_ci=[s["control_low"], s["control_high"]],
               moves=s["moves"], checked_sets=s["checked_sets"], differing_sets=s["differing_sets"], kept=s.get("cubin") is not None)  # only a kept schedule carries its cubin
    print(label, json.dumps(row), flush=True)
    return row


def run_matmul(db):
    torch.manual_seed(0)
    size = 4096
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
    corner = ["BLOCK_SIZE_M == 128", "BLOCK_SIZE_N == 256", "BLOCK_SIZE_K <= 64", "num_warps == 8"]
    started = time.perf_counter()
    result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS, corner,
                           answer={"c_ptr": torch.matmul(a, b)}, strategy="brute_force", db=db, progress=False,
                           schedule=True, schedule_options={"budget": BUDGET})
    row = report("triton matmul fp16 4096", result, started)
    if row["kept"]:
        args = matmul.arguments(a, b, c)
        matmul.matmul_kernel.jit[matmul.grid](**args, **result.best_config)
        expected = c.clone()
        kerntune.use_schedule(matmul.matmul_kernel, args, matmul.grid, result.best_config, result.schedule["cubin"])
        c.zero_()
        matmul.matmul_kernel.jit[matmul.grid](**args, **result.best_config)
        row["triton_launch_identical"] = bool(torch.equal(c, expected))
        print("use_schedule: Triton launch of the kept schedule identical:", row["triton_launch_identical"], flush=True)
    return row


def run_attention(db):
    torch.manual_seed(0)
    Z, H, N_CTX, HEAD_DIM = 4, 16, 4096, 64
    q, k, v = (torch.randn((Z, H, N_CTX, HEAD_DIM), device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    sm_scale = HEAD_DIM ** -0.5
    started = time.perf_counter()
    result = kerntune.tune(attention.attention_fwd, attention.arguments(q, k, v, o, sm_scale), lambda META: attention.grid({**META, "Z": Z}),
                           attention.PARAMS, ["BLOCK_M == 128", "num_warps == 8"], answer={"Out": attention.reference(q, k, v, sm_scale)},
                           strategy="brute_force", db=db, progress=False, schedule=True, schedule_options={"budget": BUDGET})
    return report("triton attention fp16 4x16x4096x64", result, started)


def pinned(config):
    """Restrictions that leave exactly `config`."""
    return [f"{name} == {value}" for name, value in config.items()]


def run_survey(db):
    torch.manual_seed(0)
    rows = []
    size = 4096
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    c = torch.empty((size, size), device="cuda", dtype=torch.float16)
    expected = torch.matmul(a, b)
    matmuls = [  # (BLOCK_SIZE_M, N, K, num_stages, num_warps, method); wgmma needs 4 warps and 64 rows
        (128, 256, 64, 3, 8, "hill_climb"), (128, 256, 64, 3, 8, "anneal"), (128, 128, 64, 4, 4, "hill_climb"),
        (64, 64, 32, 3, 2, "hill_climb"), (32, 64, 64, 4, 4, "hill_climb"),
    ]
    for bm, bn, bk, stages, warps, method in matmuls:
        label = f"matmul 4096 {bm}x{bn}x{bk} s{stages} w{warps} {method}"
        if ONLY not in label:
            continue
        config = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, num_stages=stages, num_warps=warps)
        started = time.perf_counter()
        result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS, pinned(config),
                               answer={"c_ptr": expected}, strategy="brute_force", db=db, progress=False,
                               schedule=True, schedule_options={"budget": BUDGET, "method": method})
        rows.append(report(label, result, started))
    Z, H, N_CTX, HEAD_DIM = 4, 16, 4096, 64
    q, k, v = (torch.randn((Z, H, N_CTX, HEAD_DIM), device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    sm_scale = HEAD_DIM ** -0.5
    reference = attention.reference(q, k, v, sm_scale)
    attentions = [(128, 64, True, 8, 3), (64, 64, True, 4, 3), (128, 128, False, 8, 2)]
    for bm, bn, pre, warps, stages in attentions:
        label = f"attention {bm}x{bn} pre_v={pre} w{warps} s{stages}"
        if ONLY not in label:
            continue
        config = dict(BLOCK_M=bm, BLOCK_N=bn, PRE_LOAD_V=pre, num_warps=warps, num_stages=stages)
        started = time.perf_counter()
        result = kerntune.tune(attention.attention_fwd, attention.arguments(q, k, v, o, sm_scale), lambda META: attention.grid({**META, "Z": Z}),
                               attention.PARAMS, pinned(config), answer={"Out": reference}, strategy="brute_force", db=db,
                               progress=False, schedule=True, schedule_options={"budget": BUDGET})
        rows.append(report(label, result, started))
    return rows


def run_shapes(db):
    torch.manual_seed(0)
    rows = []
    shapes = [(m, n, k, blocks) for m, n, k in [(512, 512, 512), (128, 8192, 8192), (2048, 2048, 2048)] for blocks in BLOCKS]
    for m, n, k, blocks in shapes:
        label = f"matmul {m}x{n}x{k} tuned, {blocks} reloads"
        if ONLY not in label:
            continue
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        c = torch.empty((m, n), device="cuda", dtype=torch.float16)
        started = time.perf_counter()
        # 2-warp configurations with large tiles compile for minutes and are never best.
        result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS,
                               ["num_warps >= 4"], answer={"c_ptr": torch.matmul(a, b)}, max_fevals=40, db=db, progress=False,
                               schedule=True, schedule_options={"budget": BUDGET, "blocks": blocks})
        rows.append(report(label, result, started))
    for Z, H, N_CTX, HEAD_DIM, blocks in [(4, 16, 1024, 64, b) for b in BLOCKS] + [(2, 16, 4096, 128, b) for b in BLOCKS]:
        label = f"attention {Z}x{H}x{N_CTX}x{HEAD_DIM} tuned, {blocks} reloads"
        if ONLY not in label:
            continue
        q, k, v = (torch.randn((Z, H, N_CTX, HEAD_DIM), device="cuda", dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        sm_scale = HEAD_DIM ** -0.5
        started = time.perf_counter()
        result = kerntune.tune(attention.attention_fwd, attention.arguments(q, k, v, o, sm_scale),
                               lambda META, Z=Z: attention.grid({**META, "Z": Z}), attention.PARAMS,
                               answer={"Out": attention.reference(q, k, v, sm_scale)}, max_fevals=40, db=db,
                               progress=False, schedule=True, schedule_options={"budget": BUDGET, "blocks": blocks})
        rows.append(report(label, result, started))
    return rows


def finalists(row):
    ratios = [f["ratio"] for f in row["finalists"]]
    return f"{len(ratios)} at {min(ratios):.4f}..{max(ratios):.4f}" if ratios else "none"


def main():
    which = sys.argv[1:] or ["matmul", "attention"]
    db = os.path.join(tempfile.mkdtemp(prefix="kerntune-schedule-"), "results.db")
    rows = []
    if "matmul" in which:
        rows.append(run_matmul(db))
    if "attention" in which:
        rows.append(run_attention(db))
    if "survey" in which:
        rows.extend(run_survey(db))
    if "shapes" in which:
        rows.extend(run_shapes(db))
    with open(os.path.join(OUT, "schedule.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("\n=== schedule summary")
    for r in rows:
        lo, hi = r["ci"]
        print(f"{r['kernel']}: {r['instructions']} instructions, {r['legal_moves']} legal moves; {r['evaluations']} candidates in {r['search_s']:.1f} s "
              f"({r['rejected']} rejected); A/B {r['original_ms']:.4f} -> {r['schedule_ms']:.4f} ms, ratio {r['ratio']:.4f} [{lo:.4f}, {hi:.4f}], "
              f"control {r['control']:.4f} [{r['control_ci'][0]:.4f}, {r['control_ci'][1]:.4f}]; "
              f"search range {r['search_range'][0]:.4f}..{r['search_range'][2]:.4f}; finalists {finalists(r)}; {r['moves']} moves; checked {r['checked_sets']} sets, {r['differing_sets']} differing; kept: {r['kept']}")


if __name__ == "__main__":
    main()

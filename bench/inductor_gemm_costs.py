"""Where each GEMM's tuning time goes in kerntune.torch: one first call of a model of
bench/inductor.py (an inference call, or with --train a training step) through
kerntune.torch.compile on an empty store, then every evaluation of each GEMM's tuning, in
the order the store received them: when it was stored (seconds after the tuning's first),
its status and what its compile, checks and timing cost. The last lines sum each GEMM's.

  python3 bench/inductor_gemm_costs.py [--model mlp|llama] [--tokens 2048] [--budget 60] [--train]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import stored  # noqa: E402  (this folder's helpers)
from inductor import build, call, grad_mode  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--train", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-"))
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-"))
    import torch
    import kerntune.torch

    db = os.path.join(tempfile.mkdtemp(prefix="kerntune-db-"), "results.db")
    model, x = build(args.model, args.tokens)
    with grad_mode(args.train):
        compiled = kerntune.torch.compile(model, db=db, max_fevals=args.budget, progress=False)
        call(compiled, x, args.train)
        torch.cuda.synchronize()
    rows = compiled.kerntune.rows
    totals = []
    for row in rows:
        if row.get("tuning") is None:
            continue
        found = stored.evaluations(db, row["tuning"])
        first = found[0].at if found else 0.0
        label = f"{row['op']} {row['problem']['M']}x{row['problem']['N']}x{row['problem']['K']}"
        print(f"== {label} (tuning {row['tuning']}, {len(found)} evaluations, {row['seconds']:.2f} s in all)")
        for evaluation in found:
            print(f"  {evaluation.at - first:6.2f} s  {evaluation.status:16s} compile {evaluation.compile_s:5.2f}  "
                  f"check {evaluation.verify_s:5.2f}  time {evaluation.benchmark_s:5.2f}  "
                  f"{json.dumps(json.loads(evaluation.config), separators=(',', ':'))}")
        sums = [sum(e.compile_s for e in found), sum(e.verify_s for e in found), sum(e.benchmark_s for e in found)]
        span = found[-1].at - first if found else 0.0
        totals.append(f"{label:28s} {len(found):3d} evaluations over {span:5.2f} s; summed compile {sums[0]:6.2f} s, "
                      f"checks {sums[1]:5.2f} s, timing {sums[2]:5.2f} s; the GEMM in all {row['seconds']:5.2f} s")
    print("\n=== inductor_gemm_costs summary")
    print("\n".join(totals))


if __name__ == "__main__":
    main()

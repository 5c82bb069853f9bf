"""Where each GEMM's tuning time goes in kerntune.torch: one first call of a model of
bench/inductor.py (an inference call, or with --train a training step) through
kerntune.torch.compile on an empty store, then every evaluation of each GEMM's tuning, in
the order the store received them: when it was stored (seconds after the tuning's first),
its status and what its compile, checks and timing cost. The last lines sum each GEMM's.

  python3 bench/inductor_gemm_costs.py [--model mlp|llama] [--tokens 2048] [--budget 60] [--train]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from inductor import build, call, grad_mode  # noqa: E402  (this folder's benchmark)


def stored_at(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


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
    connection = sqlite3.connect(db)
    totals = []
    for row in rows:
        if row.get("tuning") is None:
            continue
        found = connection.execute(
            "SELECT created, status, compile_s, verify_s, benchmark_s, config FROM evaluations "
            "WHERE tuning = ? ORDER BY created", (row["tuning"],)).fetchall()
        first = stored_at(found[0][0]) if found else 0.0
        label = f"{row['op']} {row['problem']['M']}x{row['problem']['N']}x{row['problem']['K']}"
        print(f"== {label} (tuning {row['tuning']}, {len(found)} evaluations, {row['seconds']:.2f} s in all)")
        for created, status, compile_s, verify_s, benchmark_s, config in found:
            print(f"  {stored_at(created) - first:6.2f} s  {status:16s} compile {compile_s:5.2f}  check {verify_s:5.2f}  "
                  f"time {benchmark_s:5.2f}  {json.dumps(json.loads(config), separators=(',', ':'))}")
        sums = [sum(r[i] for r in found) for i in (2, 3, 4)]
        span = stored_at(found[-1][0]) - first if found else 0.0
        totals.append(f"{label:28s} {len(found):3d} evaluations over {span:5.2f} s; summed compile {sums[0]:6.2f} s, "
                      f"checks {sums[1]:5.2f} s, timing {sums[2]:5.2f} s; the GEMM in all {row['seconds']:5.2f} s")
    print("\n=== inductor_gemm_costs summary")
    print("\n".join(totals))


if __name__ == "__main__":
    main()

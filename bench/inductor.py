"""torch.compile's GEMM autotuning: kerntune.torch.compile against Inductor's own max-autotune
and against eager, on an MLP block (4096 -> 11008 -> 4096, bf16, the anchor's) and a
Llama-style transformer layer (bf16, at a few token counts).

For each model and token count, fresh processes (fresh Inductor and Triton caches) time the
first call of:
  default     torch.compile(mode="max-autotune-no-cudagraphs"), Inductor's DEFAULT GEMM space
  exhaustive  the same with the EXHAUSTIVE space (only with --exhaustive-s S: stopped after S s)
  kerntune@B  kerntune.torch.compile(model, max_fevals=B) with an empty results store: tunes
              every GEMM (one variant per budget of --budget)
  again       kerntune.torch.compile(model) in a second process on the last budget's store:
              tunes nothing
  wide@B      (--wide) kerntune.torch.compile(model, max_fevals=B, space="wide")
  brute       (--brute) kerntune.torch.compile(model, strategy="brute_force", max_fevals=None):
              every configuration of Inductor's EXHAUSTIVE space, timed by kerntune
  fresh@B     (--fresh-workers) kerntune@B with KERNTUNE_KEEP_WORKERS=0: every GEMM's tuning
              starts its own workers, as before kerntune._crew
With --repeat N, default, kerntune@B and fresh@B run N times each, in a rotating order, each
kerntune run on an empty store; the summary gives the median per-round ratio of first calls
(kerntune@B / default, fresh@B / kerntune@B) with its range.
Each first call also records where its time went (``Timeline``: Inductor's compile, its GEMM
autotuning, kerntune's tuning of each GEMM with its evaluations' ends, the checks against
ATen and eager, the Triton compiles of the compiling process), in its JSON line and, summed,
in the summary.
Then one process compiles eager's rivals again (Inductor from its warm cache, kerntune from
its store) and times them interleaved, ROUNDS rounds, each with L2 flushed; it prints the
median per-round ratio against eager with its spread.
With --train, every call is a training step (the forward, then the backward of a loss), so
the first call compiles and tunes the backward's GEMMs too.

  python3 bench/inductor.py [--models mlp,llama] [--tokens 2048] [--rounds 20] [--budget 24,60] [--train]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time


def mlp():
    import torch
    return torch.nn.Sequential(torch.nn.Linear(4096, 11008, bias=False), torch.nn.GELU(),
                               torch.nn.Linear(11008, 4096, bias=False))


def llama():
    """A Llama-3-8B-sized decoder layer: RMSNorm, grouped-query attention (32 heads, 8 of
    keys and values, head 128) through scaled_dot_product_attention, RMSNorm, SwiGLU MLP
    (14336)."""
    import torch
    import torch.nn.functional as F

    class RMSNorm(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(width))

        def forward(self, x):
            return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * self.weight

    class Layer(torch.nn.Module):
        def __init__(self, width=4096, heads=32, kv_heads=8, hidden=14336):
            super().__init__()
            self.heads, self.kv_heads, self.head = heads, kv_heads, width // heads
            self.norm1, self.norm2 = RMSNorm(width), RMSNorm(width)
            self.q = torch.nn.Linear(width, width, bias=False)
            self.k = torch.nn.Linear(width, kv_heads * self.head, bias=False)
            self.v = torch.nn.Linear(width, kv_heads * self.head, bias=False)
            self.o = torch.nn.Linear(width, width, bias=False)
            self.gate = torch.nn.Linear(width, hidden, bias=False)
            self.up = torch.nn.Linear(width, hidden, bias=False)
            self.down = torch.nn.Linear(hidden, width, bias=False)

        def forward(self, x):
            batch, seq, width = x.shape
            h = self.norm1(x)
            q = self.q(h).view(batch, seq, self.heads, self.head).transpose(1, 2)
            k = self.k(h).view(batch, seq, self.kv_heads, self.head).transpose(1, 2)
            v = self.v(h).view(batch, seq, self.kv_heads, self.head).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(batch, seq, width))
            h = self.norm2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    return Layer()


MODELS = {"mlp": mlp, "llama": llama}
#: Calls timed back to back in a sample, as a model's layers run: the host's cost of a call
#: (Dynamo's guards, Inductor's wrapper, eager's modules) overlaps the GPU's work unless it
#: is larger.
BURST = 10


def build(model_name: str, tokens: int):
    import torch
    torch.manual_seed(0)
    model = MODELS[model_name]().cuda().to(torch.bfloat16).eval()
    if model_name == "llama":
        x = torch.randn(tokens // 512 or 1, min(tokens, 512), 4096, device="cuda", dtype=torch.bfloat16)
    else:
        x = torch.randn(tokens, 4096, device="cuda", dtype=torch.bfloat16)
    return model, x


def call(function, x, train: bool):
    """One inference call, or one training step's forward and backward (the gradients add up
    in the parameters' ``grad``, the same work for every variant)."""
    y = function(x)
    if train:
        y.float().square().mean().backward()
    return y


def grad_mode(train: bool):
    import torch
    return contextlib.nullcontext() if train else torch.no_grad()


def compiled(variant: str, model, budget: int, db: str):
    import torch
    if variant == "eager":
        return model
    if variant.startswith(("kerntune", "fresh")) or variant == "again":
        import kerntune.torch
        return kerntune.torch.compile(model, db=db, max_fevals=budget)
    if variant.startswith("wide"):
        import kerntune.torch
        return kerntune.torch.compile(model, db=db, max_fevals=budget, space="wide")
    if variant == "brute":
        import kerntune.torch
        return kerntune.torch.compile(model, db=db, max_fevals=None, strategy="brute_force")
    import torch._inductor.config as ic
    ic.max_autotune_gemm_search_space = variant.upper()
    return torch.compile(model, mode="max-autotune-no-cudagraphs")


class Timeline:
    """Where a first call's time goes: spans of the functions that matter, by name, in
    seconds from the start of the call (this bench's own wrappers, not kerntune's)."""

    def __init__(self):
        self.clock = time.perf_counter()
        self.spans = []

    def wrap(self, owner, name: str, label: str, detail=None, outcome=None) -> None:
        """Times every call of ``owner.name`` as a span ``label``, with ``detail`` of its
        arguments and ``outcome`` of its result where given."""
        inner = getattr(owner, name)
        timeline = self

        def timed(*args, **kwargs):
            start = time.perf_counter()
            result = None
            try:
                result = inner(*args, **kwargs)
                return result
            finally:
                end = time.perf_counter()
                timeline.spans.append({"what": label, "detail": detail(*args, **kwargs) if detail else None,
                                       "start": round(start - timeline.clock, 3), "s": round(end - start, 3),
                                       **({"outcome": outcome(result)} if outcome and result is not None else {})})

        setattr(owner, name, timed)

    def start(self) -> None:
        self.clock = time.perf_counter()
        self.spans.clear()

    def totals(self) -> dict:
        out = {}
        for span in self.spans:
            out.setdefault(span["what"], [0, 0.0])
            out[span["what"]][0] += 1
            out[span["what"]][1] += span["s"]
        return {what: {"count": n, "s": round(s, 3)} for what, (n, s) in out.items()}


def timeline_of(variant: str) -> Timeline:
    """Wraps what a first call does: Inductor's compile of each graph, its GEMM autotuning
    (DEFAULT), kerntune's tuning of a GEMM and its checks against ATen and eager, and the
    Triton compiles of this process."""
    import torch._inductor.compile_fx as compile_fx
    import triton.compiler
    import triton.compiler.compiler
    from torch._inductor.select_algorithm import AlgorithmSelectorCache

    timeline = Timeline()
    timeline.wrap(compile_fx, "compile_fx", "compile_fx")
    timeline.wrap(AlgorithmSelectorCache, "__call__", "inductor_gemm_autotune", lambda self, name, *a, **k: name)
    name_of = lambda src, *a, **k: getattr(src, "name", type(src).__name__)  # noqa: E731
    timeline.wrap(triton.compiler, "compile", "triton_compile_here", name_of)
    timeline.wrap(triton.compiler.compiler, "compile", "triton_compile_here", name_of)
    if variant != "default":
        import kerntune
        from kerntune.torch import _inductor, _versus
        # Each evaluation's end, on the tuning's clock: where the last ones wait.
        timeline.wrap(kerntune, "tune", "kerntune_tune", None,
                      lambda result: [round(point["elapsed_s"], 2) for point in result.trace])
        timeline.wrap(_inductor.Session, "tune_one", "kerntune_gemm", lambda self, key, problem, *a: problem.label)
        timeline.wrap(_versus, "versus_aten", "versus_aten")
        timeline.wrap(_versus, "versus_eager", "versus_eager")
        timeline.wrap(_inductor, "faster_of", "faster_of")
        from kerntune import _kerntune
        timeline.wrap(_kerntune, "keep_workers", "keep_workers", lambda keep: keep)
    return timeline


def first_call(args) -> None:
    """One variant's first call in this fresh process; prints one JSON line."""
    import torch
    from torch._inductor import select_algorithm
    autotuned = []
    select_algorithm.add_feedback_saver(lambda timings, name, *rest: autotuned.append((name, len(timings))))
    timeline = timeline_of(args.variant)
    model, x = build(args.model, args.tokens)
    with torch.no_grad():
        ref = model(x)
    with grad_mode(args.train):
        function = compiled(args.variant, model, args.budget, args.db)
        torch.cuda.synchronize()
        timeline.start()
        clock = time.perf_counter()
        y = call(function, x, args.train)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - clock
    table = getattr(function, "kerntune", None)
    print(json.dumps({"variant": args.variant, "first_call_s": seconds, "timeline": timeline.spans,
                      "totals": timeline.totals(), "autotuned": len(autotuned),
                      "autotuned_choices": sum(n for _, n in autotuned),
                      "max_abs_diff": (y.float() - ref.float()).abs().max().item(),
                      "gemms": None if table is None else len(table.rows),
                      "graphs": None if table is None else [
                          {k: g.get(k) for k in ("kept", "timed", "reason", "compiled_ms", "eager_ms", "rounds", "warm_s", "rounds_s",
                                    "seconds")}
                          for g in table.graphs],
                      "from_store": None if table is None else sum(bool(r["from_store"]) for r in table.rows),
                      "table": None if table is None else table.summary(),
                      "seconds": None if table is None else [
                          {"tuning": r.get("tuning_s"), "phases": r.get("phases"),
                           "versus": (r.get("versus") or {}).get("seconds"),
                           "versus_rounds": (r.get("versus") or {}).get("rounds"), "all": r["seconds"]}
                          for r in table.rows]}), flush=True)


def steady(args) -> None:
    """Compiles every variant again (warm caches, the kerntune store) and times them
    interleaved against eager; prints one JSON line."""
    import torch
    model, x = build(args.model, args.tokens)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    # "eager again" is eager timed as a second variant: the A/A control of the ratios.
    variants = ["eager", "eager again"] + args.variants.split(",")
    kept = {}  # which graphs kerntune's check against eager kept compiled
    with grad_mode(args.train):
        functions = {}
        for variant in variants:
            if variant == "eager again":
                functions[variant] = model
                continue
            if variant == "default":
                torch._dynamo.reset()
            budget = int(variant.split("@")[1]) if "@" in variant else args.budget
            functions[variant] = compiled(variant, model, budget, f"{args.db}.{store_of(variant, budget)}")
            call(functions[variant], x, args.train)
            checks = getattr(getattr(functions[variant], "kerntune", None), "graphs", None)
            if checks is not None:
                kept[variant] = [g.get("kept") for g in checks]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = {v: [] for v in variants}
        order = random.Random(0)
        for _ in range(args.rounds):
            shuffled = list(variants)
            order.shuffle(shuffled)
            for variant in shuffled:
                samples = []
                for _ in range(3):
                    flush.zero_()
                    torch.cuda._sleep(1_000_000)
                    start.record()
                    for _ in range(BURST):
                        call(functions[variant], x, args.train)
                    end.record()
                    end.synchronize()
                    samples.append(start.elapsed_time(end) / BURST)
                times[variant].append(statistics.median(samples))
    out = {}
    for variant in variants:
        ratios = sorted(e / t for e, t in zip(times["eager"], times[variant]))
        out[variant] = {"ms": statistics.median(times[variant]), "speedup": statistics.median(ratios),
                        "low": ratios[len(ratios) // 10], "high": ratios[-1 - len(ratios) // 10],
                        "graphs": kept.get(variant)}
    print(json.dumps({"steady": out}), flush=True)


def store_of(variant: str, budget) -> str:
    """The results store of a variant, beside the run's: one per budget and space."""
    if variant == "brute":
        return "brute"
    if variant.startswith("fresh"):
        return f"fresh{budget}"
    return f"wide{budget}" if variant.startswith("wide") else str(budget)


def fresh_env(db: str, variant: str = "") -> dict:
    env = dict(os.environ)
    if variant.startswith("fresh"):
        env["KERNTUNE_KEEP_WORKERS"] = "0"
    env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
    env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-")
    return env


def child(args, mode: str, variant: str, db: str, env: dict, limit: float) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--variant", variant, "--model", args.model,
               "--tokens", str(args.tokens), "--budget", str(args.budget), "--db", db, "--rounds", str(args.rounds),
               "--variants", args.variants] + (["--train"] if args.train else [])
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "timed_out_s": limit}
    sys.stderr.write(done.stderr[-4000:])
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"variant": variant, "failed": done.returncode}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp")
    parser.add_argument("--tokens", default="2048")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--budget", default="60", help="kerntune's evaluations per GEMM; several: 24,60")
    parser.add_argument("--exhaustive-s", type=float, default=0)
    parser.add_argument("--wide", action="store_true",
                        help="also kerntune over its wide space (GROUP_M 1-16, 6 stages) with the last budget")
    parser.add_argument("--brute", action="store_true",
                        help="also kerntune's brute force of Inductor's EXHAUSTIVE space (every configuration)")
    parser.add_argument("--fresh-workers", action="store_true",
                        help="also kerntune@B with every GEMM's tuning on workers of its own (first call only)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="first calls of default, kerntune@B (and fresh@B) this many times each, rotating")
    parser.add_argument("--train", action="store_true",
                        help="a training step (forward and backward) instead of an inference call")
    parser.add_argument("--child")
    parser.add_argument("--variant")
    parser.add_argument("--variants", default="")
    parser.add_argument("--model")
    parser.add_argument("--db")
    args = parser.parse_args()
    if args.child:
        args.tokens = int(args.tokens)
        if args.child == "first":
            budget = int(args.variant.split("@")[1]) if "@" in args.variant else int(args.budget.split(",")[-1])
            args.budget, args.db = budget, f"{args.db}.{store_of(args.variant, budget)}"
            first_call(args)
        else:
            steady(args)
        return
    summary = []
    token_counts = [int(t) for t in args.tokens.split(",")]
    for model in args.models.split(","):
        for tokens in token_counts:
            args.model, args.tokens = model, tokens
            db = os.path.join(tempfile.mkdtemp(prefix="kerntune-db-"), "results.db")
            tuned = [f"kerntune@{b}" for b in args.budget.split(",")]
            wide = [f"wide@{args.budget.split(',')[-1]}"] if args.wide else []
            args.variants = ",".join(["default"] + tuned + wide + (["brute"] if args.brute else []))
            firsts = {}
            fresh = [f"fresh@{args.budget.split(',')[-1]}"] if args.fresh_workers else []
            repeated = ["default", *tuned, *fresh]
            rounds = []
            for repetition in range(args.repeat):
                # Each repetition's kerntune runs start from an empty store; the first's is
                # the one "again" and the steady state use.
                base = db if repetition == 0 else os.path.join(tempfile.mkdtemp(prefix="kerntune-db-"), "results.db")
                turn = repetition % len(repeated)
                seconds = {}
                for variant in repeated[turn:] + repeated[:turn]:
                    out = child(args, "first", variant, base, fresh_env(base, variant), 1800)
                    seconds[variant] = out.get("first_call_s", float("nan"))
                    firsts.setdefault(variant, out)
                    print(f"{model} tokens={tokens} {variant} (repetition {repetition}): {json.dumps(out)}", flush=True)
                rounds.append(seconds)
            extra = wide + (["brute"] if args.brute else []) + (["exhaustive"] if args.exhaustive_s else [])
            for variant in ["again", *extra]:
                limit = args.exhaustive_s if variant == "exhaustive" else 1800
                firsts[variant] = child(args, "first", variant, db, fresh_env(db), limit)
                print(f"{model} tokens={tokens} {variant}: {json.dumps(firsts[variant])}", flush=True)
            steady_out = child(args, "steady", "all", db, fresh_env(db), 900).get("steady", {})
            print(f"{model} tokens={tokens} steady: {json.dumps(steady_out)}", flush=True)
            control = steady_out.get("eager again", {})
            model_label = f"{model}{'/train' if args.train else ''}"
            summary.append(f"{model_label:<6} {tokens:>6} {'eager again':<10} (A/A control)                         "
                           f"speedup vs eager {control.get('speedup', float('nan')):.3f} "
                           f"[{control.get('low', float('nan')):.3f}, {control.get('high', float('nan')):.3f}]")
            pairs = [(tuned[-1], "default")] + ([(fresh[0], tuned[-1])] if fresh else [])
            for top, bottom in pairs if args.repeat > 1 else []:
                ratios = sorted(r[top] / r[bottom] for r in rounds)
                summary.append(f"{model_label:<6} {tokens:>6} first call {top} / {bottom}: median "
                               f"{statistics.median(ratios):.3f} over {len(ratios)} rounds "
                               f"[{ratios[0]:.3f}, {ratios[-1]:.3f}]; medians "
                               f"{statistics.median(r[top] for r in rounds):.1f} s / "
                               f"{statistics.median(r[bottom] for r in rounds):.1f} s")
            for variant, first in firsts.items():
                totals = first.get("totals") or {}
                split = ", ".join(f"{what} {t['s']:.1f} s ({t['count']}x)" for what, t in totals.items())
                summary.append(f"{model_label:<6} {tokens:>6} {variant:<10} where the first call went: {split}")
                timed = steady_out.get(variant) or steady_out.get(tuned[-1] if variant in ("again", *fresh) else "", {})
                summary.append(f"{model_label:<6} {tokens:>6} {variant:<10} first call "
                               f"{first.get('first_call_s', float('nan')):7.1f} s  autotuned {first.get('autotuned', '-')!s:>3}  "
                               f"speedup vs eager {timed.get('speedup', float('nan')):.3f} "
                               f"[{timed.get('low', float('nan')):.3f}, {timed.get('high', float('nan')):.3f}]")
    print("\n=== inductor summary (first call: fresh caches; speedup: median per-round eager/compiled, 10-90%)")
    print("\n".join(summary))


if __name__ == "__main__":
    main()

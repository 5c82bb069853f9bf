"""kerntune on Triton's tutorial matmul (fp16, M = N = K = 4096) on one GPU, beside the
anchors measured on an H200 (shared/anchors/RESULTS.md: Triton's autotuner 65.2 s for 48
configurations; a 16-process compile pool plus do_bench: about 235 s for all 576, best
720.8 TFLOP/s). Every stage runs here, in one call:

1. brute force over all 576 configurations, cold store and cold Triton cache;
2. the `default` strategy, cold store, warm Triton cache cleared too (DEFAULT_FEVALS
   evaluations, default 100); stage `auto`: `default` with no budget, which stops by
   itself (and says why);
3. the same call again: answered by the store;
4. the best configurations timed by Triton's own launcher (do_bench) beside kerntune's
   medians, and torch.matmul;
5. parallel-compile scaling: the same 32 configurations compiled with 1, 2, 4, 8, 16
   workers (cold Triton cache each time).

6. stage `optima` (AB_ROUNDS rounds, default 3): `default` as shipped and with
   `optima_after = 0` (local steps from the best next configuration, as before the sixth
   session), DEFAULT_FEVALS evaluations each, fresh store and Triton cache, the order
   alternating by round; each best is read against the brute force's of the same call.
7. stage `repeat` (REPEAT_RUNS runs, default 6): `default` with DEFAULT_FEVALS evaluations
   and seeds REPEAT_FIRST_SEED, +1, ... (default 0), each with a fresh store and Triton
   cache: how often it comes within 0.99 of the brute force's best, and within 10 s. A
   single run says little: timing noise changes what the search sees, so the same seed
   takes another path from run to run. REPEAT_LABEL names the runs (to tell the runs of
   two builds apart when this stage runs once per build). With REPEAT_TIME_LIMIT=T the runs
   have no evaluation budget but a time limit of T seconds (a user's "tune for 10 s"). Each
   run also says when its best first came within 0.99, in seconds after its loop started.
   REPEAT_FINALISTS=N passes finalists=N (1: the search's best is not timed again), and
   REPEAT_COMPILE_WORKERS=N compile_workers=N (default: kerntune's, one per core but no more
   than a sixth of the budget, never fewer than 16), and REPEAT_OPTIONS='{"NAME": VALUE}'
   strategy_options (`default`'s options, as JSON). A run that never came
   within 0.99 keeps its results in $OUT/miss-LABEL-SEED.json.
8. stage `share` (AB_ROUNDS rounds, default 3): the brute force with the compile workers
   sharing the front end among configurations that differ only in num_warps and num_stages
   (as shipped) and without (KERNTUNE_SHARE_FRONT_END=0), fresh store and Triton cache, the
   order alternating by round: wall time and summed compile seconds, and the per-round
   ratios.

The brute force's store is exported as a Kernel Tuner cache, $OUT/triton_matmul_landscape.json
(configurations stopped early keep their time, marked `early_stopped`), so that strategies
can be replayed on this GPU's landscape (`kerntune simulate`, `compare-strategies`); a
`repeat` stage in a process without the brute force reads the best from that file.

Stages (arguments, default all but auto, optima, repeat and share): brute, default, auto, launcher, scaling, optima, repeat,
share.
COMPILE_TIMEOUT sets the tuning runs' compile timeout (the figures in docs/ use 10s).

Prints a table last; writes rows to $OUT/triton_matmul.json."""

import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "triton"))
import matmul  # noqa: E402

import kerntune  # noqa: E402

SIZE = int(os.environ.get("SIZE", "4096"))
OUT = os.environ.get("OUT", tempfile.gettempdir())
rows = {}


def fresh_triton_cache():
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")


def run(label, strategy, db, max_fevals=None, timing=None, restrictions=None, strategy_options=None, seed=0, time_limit=None,
        **extra):
    torch.manual_seed(0)
    a = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
    b = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
    c = torch.empty((SIZE, SIZE), device="cuda", dtype=torch.float16)
    answer = torch.matmul(a, b)
    start = time.perf_counter()
    result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS, restrictions, answer={"c_ptr": answer},
                           strategy=strategy, max_fevals=max_fevals, time_limit=time_limit, db=db, progress=False, timing=timing,
                           strategy_options=strategy_options, seed=seed, **extra,
                           objective=("TFLOP/s", f"2 * {SIZE}**3 / (time * 1e-3) / 1e12"))
    wall = time.perf_counter() - start
    statuses = {}
    for r in result.results:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    compiles = sorted(((r["costs"]["compile_s"], r["status"], r["config"], (r["reason"] or "")[:120]) for r in result.results), key=lambda c: -c[0])
    seconds = sorted(c[0] for c in compiles)
    rows[label] = dict(wall_s=wall, evaluations=result.evaluations, from_store=result.from_store, best=result.best_config,
                       best_tflops=result.best_objective, statuses=statuses, costs=result.costs, stop=result.stop,
                       compile_workers=result.compile_workers,
                       compile_percentiles={q: seconds[int(q / 100 * (len(seconds) - 1))] for q in (50, 90, 99, 100)} if seconds else {},
                       slowest_compiles=compiles[:8])
    print(label, json.dumps(rows[label]), flush=True)
    return result, (a, b, c)


LANDSCAPE = os.path.join(OUT, "triton_matmul_landscape.json")


def export_landscape(db, path=LANDSCAPE):
    """The brute force's store as a Kernel Tuner cache at `path`, through the CLI
    ($KERNTUNE); says whether it worked."""
    kerntune_bin = os.environ.get("KERNTUNE") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".device", "kerntune")
    done = subprocess.run([kerntune_bin, "export", db, "--format", "kernel-tuner", "-o", path], capture_output=True, text=True)
    print(f"landscape: {path}" if done.returncode == 0 else f"exporting the landscape failed: {done.stderr.strip()}", flush=True)
    return done.returncode == 0


def export_for_this_gpu(db, stem, label):
    """The landscape of `db` exported as OUT/STEM_GPU.json (the GPU's name without "NVIDIA ",
    spaces as underscores): its path; exits where the export fails."""
    gpu = torch.cuda.get_device_name().replace("NVIDIA ", "").replace(" ", "_")
    path = os.path.join(OUT, f"{stem}_{gpu}.json")
    if not export_landscape(db, path):
        raise SystemExit(f"exporting {label} failed")
    return path


def chosen(known, kind):
    """The names given on the command line (all of `known` without any), or an exit that
    lists the known ones."""
    names = sys.argv[1:] or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {kind}(s) {unknown}; known: {', '.join(known)}")
    return names


def brute_force_best():
    """The brute force's best TFLOP/s: this process's, else the exported landscape's."""
    if "brute_force" in rows:
        return rows["brute_force"]["best_tflops"]
    if os.path.exists(LANDSCAPE):
        with open(LANDSCAPE) as f:
            cache = json.load(f)["cache"].values()
        return max((e["TFLOP/s"] for e in cache if isinstance(e["TFLOP/s"], (int, float)) and not e.get("early_stopped")), default=None)
    return None


def triton_launcher_times(results, tensors, count=5, samples=51):
    """The best configurations launched by Triton's own launcher and timed with kerntune's
    protocol: an L2 flush of twice the L2 size, then events around the launch. The launch is
    replayed from a CUDA graph so that Python's launch overhead cannot leave the GPU idle
    inside the timed region (do_bench's figures, printed beside, include that gap). Also
    says whether Triton's JIT built the very cubin kerntune measured."""
    import base64

    a, b, c = tensors
    ok = sorted((r for r in results if r["status"] == "ok"), key=lambda r: r["time_ms"])[:count]
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    args = matmul.arguments(a, b, c)
    stand_ins = {k: (kerntune.Tensor("float16", tuple(v.shape), v.data_ptr()) if torch.is_tensor(v) else v) for k, v in args.items()}
    out = []
    for r in ok:
        config = dict(r["config"])
        fn = lambda: matmul.matmul_kernel.jit[matmul.grid](**args, **config)  # noqa: E731
        compiled = fn()
        torch.cuda.synchronize()
        ours = kerntune.compile(matmul.matmul_kernel, stand_ins, {k: [v] for k, v in config.items()}, compile_workers=1)[0]
        same_cubin = base64.b64decode(ours["cubin"]) == compiled.asm["cubin"]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        times = []
        for i in range(samples):
            flush.fill_(i % 256)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        ms = sorted(times)[len(times) // 2]
        bench_ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
        out.append(dict(config=config, kerntune_ms=r["time_ms"], triton_ms=ms, ratio=r["time_ms"] / ms, do_bench_ms=bench_ms, same_cubin=same_cubin))
    return out


def compile_scaling(count=32):
    configs = json.loads(kerntune._kerntune.valid_configs(json.dumps(matmul.PARAMS), ["num_warps >= 4", "BLOCK_SIZE_K <= 64"], None))
    chosen = configs[:: max(1, len(configs) // count)][:count]
    out = []
    tensor = kerntune.Tensor("float16", (SIZE, SIZE))
    args = dict(a_ptr=tensor, b_ptr=tensor, c_ptr=tensor, M=SIZE, N=SIZE, K=SIZE, stride_am=SIZE, stride_ak=1,
                stride_bk=SIZE, stride_bn=1, stride_cm=SIZE, stride_cn=1)
    # Compile exactly these configurations: restrict the space to them.
    keys = list(matmul.PARAMS)
    restriction = " or ".join("(" + " and ".join(f"{k} == {c[k]!r}" for k in keys) + ")" for c in chosen)
    for workers in (1, 2, 4, 8, 16):
        fresh_triton_cache()
        start = time.perf_counter()
        outcomes = kerntune.compile(matmul.matmul_kernel, args, matmul.PARAMS, [restriction], compile_workers=workers, compile_timeout=10)
        wall = time.perf_counter() - start
        out.append(dict(workers=workers, configs=len(outcomes), wall_s=wall, summed_s=sum(o.get("seconds", 0) for o in outcomes)))
        print("compile", workers, json.dumps(out[-1]), flush=True)
    return out


def main():
    stages = sys.argv[1:] or ["brute", "default", "launcher", "scaling"]
    workdir = tempfile.mkdtemp(prefix="kerntune-bench-")
    if "brute" in stages:
        fresh_triton_cache()
        result, tensors = run("brute_force", "brute_force", os.path.join(workdir, "brute.db"), timing={"compile_timeout": os.environ.get("COMPILE_TIMEOUT", "auto")})
        export_landscape(os.path.join(workdir, "brute.db"))
        run("brute_force_again", "brute_force", os.path.join(workdir, "brute.db"))
        a, b, _ = tensors
        torch_ms = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=25, rep=200, return_mode="median")
        rows["torch_tflops"] = 2 * SIZE**3 / (torch_ms * 1e-3) / 1e12
    if "launcher" in stages:
        fresh_triton_cache()
        corner = ["BLOCK_SIZE_M >= 128", "BLOCK_SIZE_N >= 128", "BLOCK_SIZE_K <= 64", "num_warps == 8"]
        result, tensors = run("corner", "brute_force", os.path.join(workdir, "corner.db"), restrictions=corner)
        rows["launcher"] = triton_launcher_times(result.results, tensors)
    if "default" in stages:
        fresh_triton_cache()
        run("default", "default", os.path.join(workdir, "default.db"), max_fevals=int(os.environ.get("DEFAULT_FEVALS", "100")), timing={"compile_timeout": os.environ.get("COMPILE_TIMEOUT", "auto")})
    if "auto" in stages:
        fresh_triton_cache()
        run("default_auto", "default", os.path.join(workdir, "auto.db"), timing={"compile_timeout": os.environ.get("COMPILE_TIMEOUT", "auto")})
    if "optima" in stages:
        rows["optima"] = []
        fevals = int(os.environ.get("DEFAULT_FEVALS", "100"))
        arms = [("shipped", None), ("optima_after=0", {"optima_after": 0})]
        for round_ in range(int(os.environ.get("AB_ROUNDS", "3"))):
            for name, options in (arms if round_ % 2 == 0 else arms[::-1]):
                fresh_triton_cache()
                label = f"ab {name} round {round_}"
                run(label, "default", os.path.join(workdir, f"ab{round_}{name}.db"), max_fevals=fevals,
                    timing={"compile_timeout": os.environ.get("COMPILE_TIMEOUT", "auto")}, strategy_options=options)
                rows["optima"].append(dict(arm=name, round=round_, wall_s=rows[label]["wall_s"],
                                           best_tflops=rows[label]["best_tflops"], best=rows[label]["best"]))
    if "repeat" in stages:
        rows["repeat"] = []
        fevals = int(os.environ.get("DEFAULT_FEVALS", "100"))
        limit = float(os.environ["REPEAT_TIME_LIMIT"]) if os.environ.get("REPEAT_TIME_LIMIT") else None
        first = int(os.environ.get("REPEAT_FIRST_SEED", "0"))
        name = os.environ.get("REPEAT_LABEL", "default")
        brute = brute_force_best()
        for seed in range(first, first + int(os.environ.get("REPEAT_RUNS", "6"))):
            fresh_triton_cache()
            label = f"repeat {name} seed {seed}"
            result, _ = run(label, "default", os.path.join(workdir, f"repeat{seed}.db"), max_fevals=None if limit else fevals,
                            time_limit=limit, timing={"compile_timeout": os.environ.get("COMPILE_TIMEOUT", "auto")}, seed=seed,
                            **({"finalists": int(os.environ["REPEAT_FINALISTS"])} if os.environ.get("REPEAT_FINALISTS") else {}),
                            strategy_options=json.loads(os.environ.get("REPEAT_OPTIONS") or "{}") or None,
                            **({"compile_workers": int(os.environ["REPEAT_COMPILE_WORKERS"])}
                               if os.environ.get("REPEAT_COMPILE_WORKERS") else {}))
            # When the search's best first came within 0.99 of the brute force's, in seconds
            # after its loop started (the call's wall time adds the start-up before it).
            hit = next((p["elapsed_s"] for p in result.trace if brute and p["best"] and p["best"] >= 0.99 * brute), None)
            retimed = (result.finalists or {}).get("report", {})
            if brute and hit is None:
                # A miss keeps its results, to see what the search measured where the best lies.
                with open(os.path.join(OUT, f"miss-{name}-{seed}.json"), "w") as f:
                    json.dump(result.results, f, default=str)
            rows["repeat"].append(dict(label=name, seed=seed, wall_s=rows[label]["wall_s"], best_tflops=rows[label]["best_tflops"],
                                       best=rows[label]["best"], statuses=rows[label]["statuses"], evaluations=result.evaluations,
                                       loop_s=result.trace[-1]["elapsed_s"] if result.trace else None, hit_s=hit,
                                       finalists_s=retimed.get("seconds"), finalists_reused=retimed.get("reused_search_workers"),
                                       compile_workers=rows[label]["compile_workers"]))
    if "share" in stages:
        rows["share"] = []
        for round_ in range(int(os.environ.get("AB_ROUNDS", "3"))):
            arms = [("shared", "1"), ("from_source", "0")]
            for name, switch in arms if round_ % 2 == 0 else arms[::-1]:
                os.environ["KERNTUNE_SHARE_FRONT_END"] = switch
                fresh_triton_cache()
                label = f"share {name} round {round_}"
                run(label, "brute_force", os.path.join(workdir, f"share-{name}-{round_}.db"),
                    timing={"compile_timeout": os.environ.get("COMPILE_TIMEOUT", "auto")})
                rows["share"].append(dict(arm=name, round=round_, wall_s=rows[label]["wall_s"],
                                          compile_s=rows[label]["costs"]["compile_s"], best_tflops=rows[label]["best_tflops"]))
        os.environ.pop("KERNTUNE_SHARE_FRONT_END")
    if "scaling" in stages:
        rows["scaling"] = compile_scaling()
    with open(os.path.join(OUT, "triton_matmul.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    print("\n=== summary")
    for label in ("brute_force", "brute_force_again", "default", "default_auto"):
        if label in rows:
            r = rows[label]
            print(f"{label:<18} wall {r['wall_s']:7.1f} s  evaluations {r['evaluations']:4d}  from store {r['from_store']:4d}  best {r['best_tflops']:.1f} TFLOP/s  "
                  f"{r.get('compile_workers')} compile workers  {r['statuses']}")
            print(f"{'':<18} best configuration {r['best']}; stopped: {r['stop']}")
            if r.get("compile_percentiles"):
                print(f"{'':<18} compile seconds p50/p90/p99/max: {r['compile_percentiles']}")
                for seconds, status, config, reason in r["slowest_compiles"][:4]:
                    print(f"{'':<18}   {seconds:6.1f} s {status} {config} {reason}")
    for r in rows.get("optima", []):
        brute = rows.get("brute_force", {}).get("best_tflops")
        share = f"{r['best_tflops'] / brute:.3f} of the brute force's best" if brute else "(no brute force in this call)"
        print(f"default {r['arm']:<15} round {r['round']}: {r['wall_s']:5.1f} s, best {r['best_tflops']:.1f} TFLOP/s, {share}")
    brute = brute_force_best()
    for r in rows.get("repeat", []):
        share = f"{r['best_tflops'] / brute:.3f} of the brute force's best" if brute else "(no brute force known)"
        hit = f"within 0.99 at {r['hit_s']:.1f} s of its {r['loop_s']:.1f} s loop" if r["hit_s"] is not None else "never within 0.99"
        retimed = ("" if r.get("finalists_s") is None else
                   f"; finalists {r['finalists_s']:.2f} s ({'search workers' if r['finalists_reused'] else 'fresh workers'})")
        print(f"repeat {r['label']} seed {r['seed']}: {r['wall_s']:5.1f} s, {r['evaluations']} evaluations, best {r['best_tflops']:.1f} TFLOP/s, "
              f"{share}; {hit}{retimed}; {r.get('compile_workers')} compile workers  {r['statuses']}")
    if rows.get("repeat") and brute:
        runs = rows["repeat"]
        hits = sum(r["best_tflops"] >= 0.99 * brute for r in runs)
        fast = sum(r["best_tflops"] >= 0.99 * brute and r["wall_s"] <= 10 for r in runs)
        walls = sorted(r["wall_s"] for r in runs)
        print(f"repeat {runs[0]['label']}: {hits} of {len(runs)} runs within 0.99 of the brute force's best, {fast} of them in 10 s or less; "
              f"wall median {walls[len(walls) // 2]:.1f} s, max {walls[-1]:.1f} s")
    share = rows.get("share", [])
    for r in share:
        print(f"brute force, front end {r['arm']:<11} round {r['round']}: {r['wall_s']:5.1f} s wall, "
              f"{r['compile_s']:6.1f} s compiling, best {r['best_tflops']:.1f} TFLOP/s")
    arm = {(r["arm"], r["round"]): r for r in share}
    rounds = sorted({r["round"] for r in share if ("shared", r["round"]) in arm and ("from_source", r["round"]) in arm})
    if rounds:
        for key in ("wall_s", "compile_s"):
            ratios = sorted(arm[("shared", k)][key] / arm[("from_source", k)][key] for k in rounds)
            print(f"shared / from source, {key}: median {ratios[len(ratios) // 2]:.3f} over {len(ratios)} rounds "
                  f"(range {ratios[0]:.3f}-{ratios[-1]:.3f})")
    if "torch_tflops" in rows:
        print(f"torch.matmul {rows['torch_tflops']:.1f} TFLOP/s; anchor best (do_bench brute force) 720.8 TFLOP/s")
    for r in rows.get("launcher", []):
        print(f"launcher check: kerntune {r['kerntune_ms']:.4f} ms, Triton's launcher {r['triton_ms']:.4f} ms, ratio {r['ratio']:.3f} "
              f"(do_bench {r['do_bench_ms']:.4f} ms), same cubin: {r['same_cubin']}  {r['config']}")
    for r in rows.get("scaling", []):
        print(f"compile {r['configs']} configs with {r['workers']:2d} workers: {r['wall_s']:6.1f} s wall ({r['summed_s']:.1f} s summed)")


if __name__ == "__main__":
    main()

"""vLLM's fused-MoE Triton kernel at real models' shapes, tuned by vLLM's own script
(benchmarks/kernels/benchmark_moe.py --tune) and by kerntune over the same configurations:
issue 35's real client.

    python3 bench/moe_real.py DIR [--shape mixtral|qwen3] [--dtype bf16|fp16|fp8] [--batch-sizes 1,2,...]
        [--calibrate] [--brute-force] [--kerntune] [--compare] [--configs START:END] [--gpus N|all]
        [--calibrate-configs N] [--calibrate-sizes 1,64,4096]
        [--max-fevals N] [--top N] [--confirm N] [--verify-sets N] [--rounds N] [--brute FILE ...]
        [--out FOLDER] [--any-vllm]

DIR holds vLLM's files (`.device/vllm/src`, git-ignored and carried to the GPU machine:
vLLM's code, never committed here; `.device/vllm/NOTES.md` says what they are). They are
checked against their sha256 at vLLM's commit 9aaf83ef (`--any-vllm` skips that) and
imported unchanged through a shim of what they import (bench/moe_vllm.py): vLLM itself
is not installed. Shapes, tensor parallel 2 as benchmark_moe.py derives them: `mixtral`
(Mixtral-8x7B: 8 experts, top 2, hidden 4096, shard 14336) and `qwen3` (Qwen3-30B-A3B:
128 experts, top 8, hidden 2048, shard 768). `bf16` is what the script tunes for both
(their checkpoints' dtype); `fp16` shares bf16's table; `fp8` is `--dtype fp8_w8a8`.
Batch sizes default to the script's 18 (1 to 4096).

The modes run in this order, any of them in one call:

* `--calibrate`: a few configurations (`--calibrate-configs`, 6) spread through the
  script's list, at batch sizes 1, 64 and 4096 (`--calibrate-sizes`), each timed by the
  script's `benchmark_config` twice (the first with its compile, the second warm), and the
  full brute force's cost per batch size extrapolated from them.
* `--brute-force`: the script's own tuning (`BenchmarkWorker.tune`: `benchmark_config`
  with CUDA graphs and `num_iters=20` over `get_configs_compute_bound`, skipping
  `OutOfResources`), over the slice `--configs START:END` of its list (default all 1920),
  the batch sizes spread round-robin over `--gpus` GPUs as its `_distribute` does, one
  process per GPU. Every configuration's time (or failure) and each batch size's wall
  time are written as they come, each GPU's process to its own file, so a brute force
  recorded in chunks (slices, batch sizes, calls, a call stopped at its time limit) adds
  up; each configuration's row has its place in the list (`index`), where a stopped chunk
  resumes.
* `--kerntune`: kerntune over the same list per batch size (bench/moe_kerntune.py), the
  winners confirmed by `benchmark_config` and written as vLLM's table, read back through
  vLLM's own `get_moe_configs` and `try_get_optimal_moe_config`.
* `--compare`: both winners of each batch size re-timed interleaved (`--rounds`, 7): the
  layer by `benchmark_config` (100 iterations) and the two GEMMs alone; the brute force's
  winners come from `--brute` files (default: the brute-force files in `--out`).

Output, in `--out` (default `moe-out`): JSON lines per mode, `calibrate-`, `kerntune-` and
`compare-SHAPE-DTYPE.jsonl` and `brute-SHAPE-DTYPE-START-END-gpuN.jsonl`; vLLM's table
under its own name and as `vllm-table-SHAPE-DTYPE.json`; kerntune's results store. Prints the rows and a summary after `=== moe_real summary`.
Exits 1 when a mode failed, a table does not load back, or a winner of kerntune's is over
2% slower than the brute force's (median interleaved ratio); 2 on bad arguments or files.
"""

import argparse
import glob
import json
import math
import os
import subprocess
import sys
import time

import moe_vllm

SHAPES = {"mixtral": {"E": 8, "topk": 2, "hidden": 4096, "shard": 14336},
          "qwen3": {"E": 128, "topk": 8, "hidden": 2048, "shard": 768}}
DTYPES = ("bf16", "fp16", "fp8")
BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
CALIBRATION_SIZES = (1, 64, 4096)
WITHIN = 1.02
SEED = 0
DEVICE_CALL_S = 540  # a device call's 10 minutes, less its start


class Model:
    """One shape and dtype, as the script's functions take them."""

    def __init__(self, shape: str, dtype: str):
        self.shape, self.dtype, self.name = shape, dtype, f"{shape}-{dtype}"
        self.E, self.topk, self.hidden, self.shard = (SHAPES[shape][k] for k in ("E", "topk", "hidden", "shard"))
        self.fp8 = dtype == "fp8"

    @property
    def torch_dtype(self):
        import torch

        return torch.float16 if self.dtype == "fp16" else torch.bfloat16

    def bench_args(self, m: int) -> tuple:
        """`benchmark_config`'s arguments after the configuration."""
        return m, self.E, self.shard, self.hidden, self.topk, self.torch_dtype, self.fp8, False, False


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.exit(f"moe_real.py: {message} (see --help)")


def _sizes(text: str) -> list:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of batch sizes") from None
    if any(m < 1 for m in sizes):
        raise argparse.ArgumentTypeError(f"batch sizes are positive, got {text}")
    twice = sorted({m for m in sizes if sizes.count(m) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{text} lists {', '.join(map(str, twice))} twice: give each batch size once")
    return sizes


def _span(text: str) -> slice:
    start, colon, end = text.partition(":")
    try:
        span = slice(int(start) if start else None, int(end) if end else None)
    except ValueError:
        span = None
    if not colon or span is None or (span.start or 0) < 0 or (span.stop is not None and span.stop <= (span.start or 0)):
        raise argparse.ArgumentTypeError(f"{text!r} is not START:END with 0 <= START < END (e.g. 0:480)")
    return span


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return int(text)


def parse(argv) -> argparse.Namespace:
    parser = _Parser(prog="moe_real.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="mixtral")
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--batch-sizes", type=_sizes)
    for mode in ("calibrate", "brute-force", "kerntune", "compare"):
        parser.add_argument(f"--{mode}", action="store_true")
    parser.add_argument("--configs", type=_span, default=slice(None))
    parser.add_argument("--gpus", default="1")
    parser.add_argument("--calibrate-configs", type=_positive, default=6)
    parser.add_argument("--calibrate-sizes", type=_sizes, default=list(CALIBRATION_SIZES))
    parser.add_argument("--max-fevals", type=_positive)
    parser.add_argument("--top", type=_positive, default=5)
    parser.add_argument("--confirm", type=_positive, default=4)
    parser.add_argument("--verify-sets", type=int, default=0)
    parser.add_argument("--rounds", type=_positive, default=7)
    parser.add_argument("--brute", nargs="+", default=[])
    parser.add_argument("--out", default="moe-out")
    parser.add_argument("--any-vllm", action="store_true")
    parser.add_argument("--worker-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not (args.calibrate or args.brute_force or args.kerntune or args.compare or args.worker_file):
        parser.error("give at least one of --calibrate, --brute-force, --kerntune, --compare")
    if args.gpus != "all" and not args.gpus.isdigit() or args.gpus == "0":
        parser.error(f"--gpus takes a number of GPUs or all, not {args.gpus!r}")
    for name in args.brute:
        if not os.path.isfile(name):
            parser.error(f"--brute {name}: no such file")
    return args


def _gpu_count(wanted: str) -> int:
    import torch

    present = torch.cuda.device_count()
    if present == 0:
        sys.exit("moe_real.py: torch finds no CUDA GPU: run this on the GPU machine")
    if wanted == "all":
        return present
    if int(wanted) > present:
        sys.exit(f"moe_real.py: --gpus {wanted}, but torch finds {present}")
    return int(wanted)


class Rows:
    """JSON lines written (and flushed) as they come, and printed."""

    def __init__(self, path: str, echo: bool = True):
        self.path, self.echo, self.rows = path, echo, []
        self.file = open(path, "a")

    def __call__(self, row: dict) -> None:
        text = json.dumps(row, default=str)
        self.file.write(text + "\n")
        self.file.flush()
        self.rows.append(row)
        if self.echo:
            print(text, flush=True)


def _short(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def _slice_text(span: slice) -> str:
    return f"{span.start or 0}:{'' if span.stop is None else span.stop}"


def brute_force_worker(bm, model, sizes, span, write) -> None:
    """The script's `BenchmarkWorker.tune` for each batch size, in this process (one GPU),
    with every `benchmark_config` call recorded (with the configuration's place in the
    script's list, from which a stopped chunk resumes)."""
    worker = bm.BenchmarkWorker(SEED)
    listed = bm.get_configs_compute_bound(not model.fp8, None)
    place = {json.dumps(config, sort_keys=True): index for index, config in enumerate(listed)}
    space = listed[span]
    original = bm.benchmark_config
    current = {}

    def recording(config, *args, **kwargs):
        start = time.perf_counter()
        row = {"kind": "config", "shape": model.shape, "dtype": model.dtype, "batch_size": current["m"],
               "index": place[json.dumps(config, sort_keys=True)], "config": dict(config)}
        try:
            row["us"] = original(config, *args, **kwargs)
        except BaseException as error:
            row["failure"] = _short(error)
            raise
        finally:
            row["s"] = round(time.perf_counter() - start, 3)
            write(row)
        return row["us"]

    bm.benchmark_config = recording
    for m in sizes:
        current["m"] = m
        start = time.perf_counter()
        try:
            best = worker.tune(*model.bench_args(m), space, None, False)
        except AssertionError:  # the script's `assert best_config is not None`: no valid one in the slice
            best = None
        write({"kind": "batch", "shape": model.shape, "dtype": model.dtype, "batch_size": m, "best": best,
               "slice": _slice_text(span), "configs": len(space), "wall_s": round(time.perf_counter() - start, 2)})


def brute_force(args, model, sizes, gpus) -> dict:
    """The brute force over `gpus` processes, each writing its own file as it goes (a call
    stopped at its time limit keeps what was recorded); returns its summary."""
    start = time.perf_counter()
    span = _slice_text(args.configs)
    children = []
    for gpu in range(gpus):
        mine = sizes[gpu::gpus]
        if not mine:
            continue
        path = os.path.join(args.out, f"brute-{model.name}-{span.replace(':', '-')}-gpu{gpu}.jsonl")
        argv = [sys.executable, os.path.abspath(__file__), args.dir, "--shape", model.shape, "--dtype", model.dtype,
                "--batch-sizes", ",".join(map(str, mine)), "--configs", span, "--out", args.out,
                "--worker-file", path] + (["--any-vllm"] if args.any_vllm else [])
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu), PYTHONUNBUFFERED="1")
        children.append((path, subprocess.Popen(argv, env=env)))
    failed = [path for path, child in children if child.wait() != 0]
    record = brute_record([path for path, _ in children])
    return {"mode": "brute-force", "model": model.name, "files": [path for path, _ in children], "gpus": gpus,
            "configs": span, "wall_s": round(time.perf_counter() - start, 1), "failed": failed, **record}


def brute_record(files) -> dict:
    """What brute-force files hold together (chunks add up; a chunk recorded twice counts
    once): per batch size, the fastest configuration ("winners"), the wall time of its
    chunks ("wall_s") and how many distinct configurations they covered ("covered")."""
    best, walls, seen = {}, {}, {}
    for name in files:
        with open(name) as f:
            for line in f:
                row = json.loads(line)
                m = row["batch_size"]
                if row["kind"] == "batch":
                    walls[m, row["slice"]] = row["wall_s"]
                    continue
                seen.setdefault(m, set()).add(json.dumps(row["config"], sort_keys=True))
                if row.get("us") is not None and (m not in best or row["us"] < best[m]["us"]):
                    best[m] = row
    wall_s = {}
    for (m, _), seconds in walls.items():
        wall_s[m] = round(wall_s.get(m, 0.0) + seconds, 2)
    return {"winners": {m: row["config"] for m, row in best.items()}, "wall_s": wall_s,
            "covered": {m: len(keys) for m, keys in seen.items()}}


def calibrate(bm, model, sizes, count, write) -> dict:
    """A few configurations timed twice each by the script's `benchmark_config` (the first
    time with their compile, the second warm), and the full brute force's cost
    extrapolated: at each of the script's batch sizes, the calibrated batch size nearest on
    a log scale stands for it, every configuration costing its first time (the brute force
    meets each once per batch size) or, for those that do not fit, their failure's."""
    import moe_kerntune

    space = bm.get_configs_compute_bound(not model.fp8, None)
    picks = space[::max(1, len(space) // count)][:count]
    measured = {}
    for m in sizes:
        first, warm, failures = [], [], []
        for config in picks:
            times = []
            start = time.perf_counter()
            try:
                for _ in range(2):
                    start = time.perf_counter()
                    us = moe_kerntune.script_time(bm, model, m, config, 20)
                    times.append(time.perf_counter() - start)
            except bm.triton.runtime.autotuner.OutOfResources as error:
                failures.append(time.perf_counter() - start)
                write({"kind": "calibrate", "model": model.name, "batch_size": m, "config": config,
                       "failure": _short(error), "s": round(failures[-1], 3)})
                continue
            first.append(times[0])
            warm.append(times[1])
            write({"kind": "calibrate", "model": model.name, "batch_size": m, "config": config, "us": us,
                   "first_s": round(times[0], 3), "warm_s": round(times[1], 3)})
        measured[m] = {"first_s": _mean(first), "warm_s": _mean(warm), "compile_s": _mean(first) - _mean(warm),
                       "failure_s": _mean(failures), "valid": 1 - len(failures) / len(picks)}
    estimate = {}
    for m in BATCH_SIZES:
        near = measured[min(measured, key=lambda c: abs(math.log(c) - math.log(m)))]
        estimate[m] = round(len(space) * (near["valid"] * near["first_s"] + (1 - near["valid"]) * near["failure_s"]))
    total = sum(estimate.values())
    return {"mode": "calibrate", "model": model.name, "configs": len(space), "measured": measured,
            "brute_force_s_per_batch_size": estimate, "brute_force_s": total,
            "device_calls_one_gpu": round(total / DEVICE_CALL_S, 1)}


def _mean(values) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def main(argv) -> int:
    args = parse(argv)
    model = Model(args.shape, args.dtype)
    try:
        fm, bm = moe_vllm.load(args.dir, args.any_vllm)
    except moe_vllm.VllmFilesError as error:
        print(f"moe_real.py: {error}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    if args.worker_file:
        brute_force_worker(bm, model, args.batch_sizes, args.configs, Rows(args.worker_file, echo=False))
        return 0
    import moe_kerntune

    sizes = args.batch_sizes or list(BATCH_SIZES)
    gpus = _gpu_count(args.gpus)
    args.gpus = gpus
    summary, failed = [], False
    if args.calibrate:
        rows = Rows(os.path.join(args.out, f"calibrate-{model.name}.jsonl"))
        summary.append(calibrate(bm, model, args.calibrate_sizes, args.calibrate_configs, rows))
    if args.brute_force:
        summary.append(brute_force(args, model, sizes, gpus))
        failed |= bool(summary[-1]["failed"])
    ours = {}
    if args.kerntune:
        start = time.perf_counter()
        rows = Rows(os.path.join(args.out, f"kerntune-{model.name}.jsonl"))
        ours = moe_kerntune.run(fm, bm, model, sizes, args, rows)
        table = moe_kerntune.write_table(fm, bm, model, ours, args.out) if ours else {"errors": ["no winner"]}
        summary.append({"mode": "kerntune", "model": model.name, "wall_s": round(time.perf_counter() - start, 1),
                        "batch_wall_s": {r["batch_size"]: r["wall_s"] for r in rows.rows},
                        "evaluations": sum(r["evaluations"] for r in rows.rows), "table": table})
        failed |= bool(table["errors"]) or len(ours) < len(sizes)
    if args.compare:
        files = args.brute or sorted(glob.glob(os.path.join(args.out, f"brute-{model.name}-*.jsonl")))
        record = brute_record(files)
        brute = {m: c for m, c in record["winners"].items() if m in sizes}
        kerntune_rows = {r["batch_size"]: r for r in _read(os.path.join(args.out, f"kerntune-{model.name}.jsonl"))
                         if r.get("winner") and r["batch_size"] in sizes}
        ours = ours or {m: r["winner"] for m, r in kerntune_rows.items()}
        if not brute or not ours:
            print(f"moe_real.py: --compare needs both winners: brute force for {sorted(brute)}, kerntune for "
                  f"{sorted(ours)} (run --brute-force and --kerntune, or give --brute FILE)", file=sys.stderr)
            return 2
        rows = Rows(os.path.join(args.out, f"compare-{model.name}.jsonl"))
        compared = moe_kerntune.compare(fm, bm, model, brute, ours, args.rounds, rows)
        space = len(bm.get_configs_compute_bound(not model.fp8, None))
        whole = [m for m in ours if m in kerntune_rows and record["covered"].get(m) == space and m in record["wall_s"]]
        summary.append({"mode": "compare", "model": model.name, "batch_sizes": [r["batch_size"] for r in compared],
                        "worst_layer_ratio": max(r["layer"]["median"] for r in compared),
                        "worst_gemm_ratio": max(r["gemm"]["median"] for r in compared),
                        "over_2_percent": [r["batch_size"] for r in compared if r["layer"]["median"] > WITHIN],
                        "wall_ratio": round(sum(kerntune_rows[m]["wall_s"] for m in whole)
                                            / sum(record["wall_s"][m] for m in whole), 4) if whole else None,
                        "wall_ratio_batch_sizes": whole,
                        "brute_covered": record["covered"]})
        failed |= bool(summary[-1]["over_2_percent"])
    print("=== moe_real summary")
    for row in summary:
        print(json.dumps(row, default=str))
    return 1 if failed else 0


def _read(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

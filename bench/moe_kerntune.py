"""kerntune's side of bench/moe_real.py: vLLM's fused-MoE kernel tuned per batch size over
the script's own configurations, its winners confirmed by the script's own timing, and
the table vLLM loads.

The layer's time is two launches of one kernel sharing one configuration: the w1 GEMM
(gate and up, `MUL_ROUTED_WEIGHT=False`, `top_k=topk`) and the w2 GEMM (down,
`MUL_ROUTED_WEIGHT=True`, `top_k=1`). BLOCK_SIZE_M also changes the kernel's inputs (the
alignment of tokens to experts), so for each BLOCK_SIZE_M the alignment is made once per
batch size and each launch is tuned over the script's configurations with that
BLOCK_SIZE_M (`tune_per_shape`). Each launch's best few are completed with the other
launch's time, the layer's time of a configuration being the sum, and the best
`confirm` of those are timed by the script's `benchmark_config`: the fastest there wins.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import moe_vllm

# The configuration keys of the script's space, in the order its tables write them.
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
LAUNCHES = ("w1", "w2")
# Warm launches back to back, as in the script's CUDA graph of ten layers.
TIMING = {"graph": True, "flush": "none"}
SEED = 0


def key_of(config) -> tuple:
    return tuple(config[k] for k in KEYS)


class Launches:
    """The two launches of one model's layer, as vLLM's `invoke_fused_moe_triton_kernel`
    makes them, on data scaled so that no output overflows bf16 or fp16 (weights with
    variance 1/K: every GEMM's output has variance about 1). fp8 weights keep unit values
    and carry the 1/sqrt(K) in their positive per-expert scales; activations' scale is 1."""

    def __init__(self, fm, model):
        import torch

        self.fm, self.model = fm, model
        E, n1, k = model.E, model.shard, model.hidden
        n2 = n1 // 2
        generator = torch.Generator(device="cuda").manual_seed(SEED)
        dtype = model.torch_dtype

        def weights(shape, fan_in):
            w = torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32)
            if model.fp8:
                return w.to(torch.float8_e4m3fn), torch.full((E,), fan_in ** -0.5, device="cuda")
            return (w * fan_in ** -0.5).to(dtype), None

        (self.w1, self.w1_scale), (self.w2, self.w2_scale) = weights((E, n1, k), k), weights((E, k, n2), n2)
        self.a_scale = torch.ones(1, device="cuda") if model.fp8 else None

    def _routing(self, m: int):
        """The same inputs and routing for every launch at batch size `m`."""
        import torch

        generator = torch.Generator(device="cuda").manual_seed(SEED + m)
        model = self.model
        x = torch.randn(m, model.hidden, generator=generator, device="cuda", dtype=model.torch_dtype)
        gating = torch.randn(m, model.E, generator=generator, device="cuda", dtype=torch.float32)
        weights, ids, _ = moe_vllm.fused_topk(x, gating, model.topk, True)
        h = torch.randn(m * model.topk, model.shard // 2, generator=generator, device="cuda", dtype=model.torch_dtype)
        return x, h, weights, ids

    def call(self, launch: str, m: int, config: dict):
        """vLLM's own call of the kernel for one launch: (positional args, keyword args,
        grid), captured from `invoke_fused_moe_triton_kernel` with the kernel replaced by a
        recorder while it runs."""
        import torch
        import triton.language as tl

        fm, model = self.fm, self.model
        x, h, weights, ids = self._routing(m)
        sorted_ids, expert_ids, padded = fm._prepare_expert_assignment(ids, config, m, model.topk, model.E, None,
                                                                       ignore_invalid_experts=True)
        quantize = torch.float8_e4m3fn if model.fp8 else None
        if launch == "w1":
            a, a_scale = fm.moe_kernel_quantize_input(x, self.a_scale, quantize, False, None)
            b, b_scale, c, top_k = self.w1, self.w1_scale, torch.empty(m, model.topk, model.shard, device="cuda",
                                                                        dtype=model.torch_dtype), model.topk
        else:
            a, a_scale = fm.moe_kernel_quantize_input(h, self.a_scale, quantize, False, None)
            b, b_scale, c, top_k = self.w2, self.w2_scale, torch.empty(m, model.topk, model.hidden, device="cuda",
                                                                        dtype=model.torch_dtype), 1
        compute_type = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}[model.torch_dtype]
        captured = []

        class Recorder:
            def __getitem__(self, grid):
                return lambda *args, **kwargs: captured.append((args, kwargs, grid))

        kernel = fm.fused_moe_kernel
        fm.fused_moe_kernel = Recorder()
        try:
            fm.invoke_fused_moe_triton_kernel(a, b, c, a_scale, b_scale, weights, sorted_ids, expert_ids, padded,
                                              launch == "w2", top_k, config, compute_type=compute_type,
                                              use_fp8_w8a8=model.fp8, use_int8_w8a8=False, use_int8_w8a16=False,
                                              use_int4_w4a16=False, per_channel_quant=False)
        finally:
            fm.fused_moe_kernel = kernel
        return captured[0]

    def tune_args(self, launch: str, m: int, block_m: int):
        """kerntune's `args` and `grid` for one launch: the captured call by the kernel's
        parameter names, without the tuned ones (the grid is vLLM's own, of the config)."""
        config = {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4,
                  "num_stages": 3}
        args, kwargs, grid = self.call(launch, m, config)
        named = dict(zip(self.fm.fused_moe_kernel.arg_names, args))
        named.update(kwargs)
        return {name: value for name, value in named.items() if name not in KEYS}, grid

    def gemm_us(self, m: int, config: dict, replays: int = 20) -> float:
        """Microseconds of the two launches alone on one alignment, per layer: a CUDA graph of
        ten layers' launches replayed `replays` times, the median replay over ten."""
        import torch

        calls = [self.call(launch, m, config) for launch in LAUNCHES]
        kernel = self.fm.fused_moe_kernel

        def run():
            for args, kwargs, grid in calls:
                kernel[grid](*args, **kwargs)

        run()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(10):
                run()
        times = []
        for _ in range(replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 100.0)  # ms per 10 layers -> us per layer
        graph.reset()
        return sorted(times)[len(times) // 2]


def script_time(bm, model, m: int, config: dict, iterations: int) -> float:
    """Microseconds of the layer by the script's `benchmark_config` (its tensors made on the
    GPU, as its workers make them), the random generators seeded first: every
    configuration timed this way sees the same weights and routing."""
    import torch

    bm.set_random_seed(SEED)
    with torch.device("cuda"):
        return bm.benchmark_config(config, *model.bench_args(m), num_iters=iterations)


def tune_per_shape(kernel, shapes, make_args, configs, options) -> dict:
    """One launch tuned at each shape (batch size) over `configs` in one many-shape run,
    each batch size learning from the nearest one tuned before it: {shape: (TuneResult,
    seconds)}. `make_args(shape)` gives the launch's `args` and `grid` there."""
    import functools

    import kerntune

    made = functools.lru_cache(maxsize=None)(make_args)
    results = kerntune.tune(kernel, lambda M: made(M)[0], lambda M: made(M)[1], configs=configs,
                            shapes=[{"M": m} for m in shapes], timing=TIMING, progress=False, finalists=1, **options)
    # Each size's own seconds in this process: arguments, reference runs and the run itself.
    return {m: (results[m], sum(results[m].phases.get(k, 0.0) for k in ("prepare_s", "reference_s", "tune_s")))
            for m in shapes}


def _times(result) -> dict:
    """{config key: ms} of the configurations that ran and verified."""
    return {key_of(r["config"]): r["objective"] for r in result.results if r["status"] == "ok"}


def run(fm, bm, model, sizes, args, write) -> dict:
    """kerntune per batch size (see the module's docstring); `write` takes each output row.
    Returns {batch size: winner config}."""
    launches = Launches(fm, model)
    space = bm.get_configs_compute_bound(not model.fp8, None)
    options = {"db": os.path.join(args.out, f"kerntune-{model.name}.db"), "verify_sets": args.verify_sets,
               "seed": SEED, "fresh": True}
    if args.max_fevals:
        options["max_fevals"] = args.max_fevals
    if args.gpus > 1:
        options["devices"] = list(range(args.gpus))
    block_ms = sorted({c["BLOCK_SIZE_M"] for c in space})
    found, spent = {}, {m: 0.0 for m in sizes}
    for block_m in block_ms:
        rows = [c for c in space if c["BLOCK_SIZE_M"] == block_m]
        for launch in LAUNCHES:
            tuned = tune_per_shape(fm.fused_moe_kernel, sizes,
                                   lambda m, launch=launch, block_m=block_m: launches.tune_args(launch, m, block_m),
                                   rows, options)
            for m, (result, seconds) in tuned.items():
                found[launch, block_m, m] = result
                spent[m] += seconds
    winners = {}
    for m in sizes:
        start = time.perf_counter()
        sums, evaluations = {}, 0
        for block_m in block_ms:
            times = {launch: _times(found[launch, block_m, m]) for launch in LAUNCHES}
            evaluations += sum(found[launch, block_m, m].evaluations for launch in LAUNCHES)
            for launch, other in (("w1", "w2"), ("w2", "w1")):
                best = sorted(times[launch], key=times[launch].get)[:args.top]
                missing = [dict(zip(KEYS, key)) for key in best if key not in times[other]]
                if missing:
                    extra = tune_per_shape(fm.fused_moe_kernel, [m],
                                           lambda m, other=other, block_m=block_m: launches.tune_args(other, m, block_m),
                                           missing, {**options, "max_fevals": len(missing)})
                    times[other].update(_times(extra[m][0]))
                    evaluations += extra[m][0].evaluations
            sums.update({key: times["w1"][key] + times["w2"][key] for key in times["w1"] if key in times["w2"]})
        confirmed = []
        for key in sorted(sums, key=sums.get)[:args.confirm]:
            config = dict(zip(KEYS, key))
            confirmed.append({"config": config, "gemm_sum_us": round(sums[key] * 1000, 3),
                              "us": script_time(bm, model, m, config, 20)})
        spent[m] += time.perf_counter() - start
        winner = min(confirmed, key=lambda c: c["us"]) if confirmed else None
        write({"kind": "kerntune", "shape": model.shape, "dtype": model.dtype, "batch_size": m,
               "winner": winner and winner["config"], "us": winner and winner["us"], "confirmed": confirmed,
               "evaluations": evaluations, "wall_s": round(spent[m], 2)})
        if winner:
            winners[m] = winner["config"]
    return winners


def write_table(fm, bm, model, winners: dict, folder: str) -> dict:
    """kerntune's winners as vLLM's table, read back through vLLM's own loader; returns
    {"file", "copy", "errors"} (errors empty when every tuned batch size loads its winner)."""
    os.makedirs(folder, exist_ok=True)
    dtype_str = bm._get_config_dtype_str(model.torch_dtype, use_fp8_w8a8=model.fp8)
    n = model.shard // 2
    table = {m: bm.sort_config(config) for m, config in sorted(winners.items())}
    # vLLM's own writer until kerntune's exporter of this format lands (issue 35, item 2):
    # the one place that writes the table.
    bm.save_configs(table, model.E, model.shard, model.hidden, model.topk, model.torch_dtype, model.fp8, False,
                    False, None, folder)
    name = fm.get_config_file_name(model.E, n, dtype_str)
    path = os.path.join(folder, name)
    errors = []
    with open(path) as f:
        if "triton_version" not in json.load(f):
            errors.append("the table has no triton_version")
    os.environ["VLLM_TUNED_CONFIG_FOLDER"] = folder
    fm.get_moe_configs.cache_clear()
    loaded = fm.get_moe_configs(model.E, n, dtype_str, 0, 0)
    if loaded != table:
        errors.append(f"get_moe_configs read {loaded}, not the table written")
    w1_shape, w2_shape = (model.E, model.shard, model.hidden), (model.E, model.hidden, n)
    for m, config in table.items():
        answer = fm.try_get_optimal_moe_config(w1_shape, w2_shape, model.topk, dtype_str, m)
        if answer != config:
            errors.append(f"batch size {m}: try_get_optimal_moe_config answered {answer}, not {config}")
    copy = os.path.join(folder, f"vllm-table-{model.name}.json")
    shutil.copy(path, copy)
    return {"file": name, "copy": copy, "errors": errors}


def ratios(values) -> dict:
    ordered = sorted(values)
    return {"median": round(ordered[len(ordered) // 2], 4), "min": round(ordered[0], 4), "max": round(ordered[-1], 4),
            "rounds": len(ordered)} if ordered else {}


def compare(fm, bm, model, brute: dict, ours: dict, rounds: int, write) -> list:
    """Both winners of each batch size re-timed interleaved, in alternating order, each with
    the same seed (the same weights and routing): the script's `benchmark_config` with its
    `benchmark` mode's 100 iterations, and the two GEMMs alone; rows of ratios ours/brute."""
    launches = Launches(fm, model)
    rows = []
    for m in sorted(set(brute) & set(ours)):
        pair = {"brute": brute[m], "kerntune": ours[m]}
        layer, gemm = [], []
        for r in range(rounds if key_of(pair["brute"]) != key_of(pair["kerntune"]) else 0):
            times = {}
            for who in (("brute", "kerntune") if r % 2 == 0 else ("kerntune", "brute")):
                times[who] = (script_time(bm, model, m, pair[who], 100), launches.gemm_us(m, pair[who]))
            layer.append(times["kerntune"][0] / times["brute"][0])
            gemm.append(times["kerntune"][1] / times["brute"][1])
        row = {"kind": "compare", "shape": model.shape, "dtype": model.dtype, "batch_size": m,
               "same": not layer, "layer": ratios(layer) or {"median": 1.0}, "gemm": ratios(gemm) or {"median": 1.0},
               "brute": pair["brute"], "kerntune": pair["kerntune"]}
        write(row)
        rows.append(row)
    return rows

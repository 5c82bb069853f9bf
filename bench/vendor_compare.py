"""kerntune's pick, Triton's pick and cuBLAS on Triton's tutorial matmul (fp16, M = N = K =
SIZE), in one process on one GPU, timed by one function and interleaved.

1. kerntune tunes examples/triton/matmul.py's kernel (KT_SPACE=space: the 576-configuration
   space with the `default` strategy and KT_FEVALS evaluations; KT_SPACE=tutorial: the 16
   configurations of Triton's tutorial, the list Triton gets, so both picks should agree);
   `triton.autotune` tunes the same kernel body over the tutorial's 16 configurations.
2. The three outputs are checked against each other (fp16 tolerances) before any timing.
3. ROUNDS rounds; each round times the three kernels in an order that cycles through all
   six permutations (every kernel in every position, and before every other, equally
   often), so drift and neighbour effects cancel. The per-round time ratios give, per pair,
   a median with a 95% interval from order statistics (distribution-free). The SM clock and
   temperature are read before and after every round; a move over 5% is flagged.
4. kerntune's own time for its winner (the tune result's median) is set against this
   independent measurement of the same configuration: target within 2%. With NCU=1 and
   `ncu` on PATH, Nsight Compute's gpu__time_duration of the winner gives a third opinion.

One timing path for all three (`sample_times`): a sleep kernel first, so that the host is
queued ahead of the GPU and no launch overhead (Python's, Triton's launcher's, torch's)
falls inside a timed region; then, per launch, an L2 flush with a buffer of twice the
device's L2 (kerntune's own protocol), CUDA events around the one launch, and the median of
LAUNCHES such launches. `triton.testing.do_bench` was not used: it chooses its sample count
from its own estimate (different per kernel), flushes a fixed 256 MB, and times each launch
from Python, whose overhead left the GPU idle inside its timed region (7-15% on 0.19 ms
matmuls, docs/benchmarks.md) and differs between Triton's launcher and torch's.

    python3 bench/vendor_compare.py              # needs a GPU, torch, triton, kerntune
    python3 bench/vendor_compare.py --self-test  # the statistics and ordering; no GPU

Environment: SIZE (4096), ROUNDS (18), LAUNCHES per kernel per round (25), KT_SPACE (space
or tutorial; default space), KT_FEVALS (100, for KT_SPACE=space; 48 missed Triton's pick), NCU (1 to run Nsight
Compute), GPU_INDEX (the NVML index for clocks; default the first of CUDA_VISIBLE_DEVICES,
else 0), OUT (where vendor_compare.json goes; default the temporary directory).

Prints the checks, one line per round, then a summary table; exits non-zero if the outputs
disagree. Writes every row and per-round sample to $OUT/vendor_compare.json.
"""

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples", "triton")
# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_stages, num_warps), GROUP_SIZE_M = 8: the 16
# configurations of Triton's matmul tutorial (as in examples/triton/tutorial_matmul.py).
TUTORIAL = [
    (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
    (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (256, 64, 128, 4, 4), (64, 256, 128, 4, 4),
    (128, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 32, 64, 4, 4),
]
NAMES = ("kerntune", "triton", "cublas")
PAIRS = (("kerntune", "cublas"), ("kerntune", "triton"), ("triton", "cublas"))
CLOCK_MOVE = 0.05
AGREEMENT_TARGET = 0.02


# ---- pure helpers (exercised by --self-test) ----

def round_order(names, round_index):
    """The order of round `round_index`: the rotations of `names`, then the rotations of
    `names` reversed. For three names that is all six permutations, so over six rounds every
    name takes every position twice and precedes every other name three times."""
    n = len(names)
    cycle = list(names) if (round_index // n) % 2 == 0 else list(reversed(names))
    shift = round_index % n
    return cycle[shift:] + cycle[:shift]


def median_interval(values, level=0.95):
    """Median of `values` and a distribution-free interval for it from order statistics:
    the widest symmetric ranks (k, n+1-k) whose binomial(n, 1/2) coverage is still at least
    `level`. Returns (median, low, high, coverage); with too few values for `level` the
    interval is the full range and `coverage` says what it really is."""
    x = sorted(values)
    n = len(x)
    if n == 0:
        raise ValueError("no values")
    below = lambda k: sum(math.comb(n, i) for i in range(k)) / 2**n  # P(Binomial(n, 1/2) < k)
    k = 1
    while k + 1 <= n // 2 and 1 - 2 * below(k + 1) >= level:
        k += 1
    coverage = 1 - 2 * below(k)
    return statistics.median(x), x[k - 1], x[n - k], coverage


def tflops(size, ms):
    return 2 * size**3 / (ms * 1e-3) / 1e12


def clock_moved(before, after, limit=CLOCK_MOVE):
    """Whether the SM clock moved by more than `limit` (relative) between two readings;
    False when either is missing."""
    if not before or not after or not before.get("sm_mhz") or not after.get("sm_mhz"):
        return False
    return abs(after["sm_mhz"] - before["sm_mhz"]) / before["sm_mhz"] > limit


def pair_ratios(rounds, a, b):
    return [r["median_ms"][a] / r["median_ms"][b] for r in rounds]


def parse_ncu_csv(text):
    """gpu__time_duration values, in ms, from `ncu --csv` output (units converted)."""
    import csv

    scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3}
    lines = [l for l in text.splitlines() if l.startswith('"')]
    out = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name", "").startswith("gpu__time_duration"):
            out.append(float(row["Metric Value"].replace(",", "")) * scale[row.get("Metric Unit", "nsecond").strip()])
    return out


def self_test():
    orders = [round_order(NAMES, r) for r in range(6)]
    assert orders[0] == list(NAMES) and len({tuple(o) for o in orders}) == 6, orders
    for name in NAMES:
        assert all(sum(o[p] == name for o in orders) == 2 for p in range(3)), (name, orders)
        for other in NAMES:
            if other != name:
                assert sum(o.index(name) < o.index(other) for o in orders) == 3, (name, other)
    assert round_order(NAMES, 6) == orders[0]
    # Ranks of the classical 95% interval for the median: n=15 -> (4, 12), n=18 -> (5, 14), n=20 -> (6, 15).
    for n, (lo, hi) in {15: (4, 12), 18: (5, 14), 20: (6, 15)}.items():
        med, low, high, coverage = median_interval(list(range(1, n + 1)))
        assert (low, high) == (lo, hi) and coverage >= 0.95 and med == (n + 1) / 2, (n, low, high, coverage)
    med, low, high, coverage = median_interval([3.0, 1.0, 2.0])
    assert (med, low, high) == (2.0, 1.0, 3.0) and coverage < 0.95
    assert median_interval([5.0]) == (5.0, 5.0, 5.0, 0.0)
    assert abs(tflops(4096, 0.2) - 687.2) < 0.1
    assert clock_moved({"sm_mhz": 1980}, {"sm_mhz": 1755}) and not clock_moved({"sm_mhz": 1980}, {"sm_mhz": 1950})
    assert not clock_moved(None, {"sm_mhz": 1980})
    rounds = [{"median_ms": {"kerntune": 0.2, "cublas": 0.19}}, {"median_ms": {"kerntune": 0.21, "cublas": 0.2}}]
    assert [round(r, 4) for r in pair_ratios(rounds, "kerntune", "cublas")] == [1.0526, 1.05]
    csv_text = ('==PROF== Connected\n"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
                '"0","matmul_kernel","gpu__time_duration.sum","nsecond","190,432"\n'
                '"1","matmul_kernel","gpu__time_duration.sum","usecond","191.5"\n')
    assert [round(v, 6) for v in parse_ncu_csv(csv_text)] == [0.190432, 0.1915]
    print("self-test passed")


# ---- the GPU side (torch, triton and kerntune imported here only) ----

def gpu_index():
    if "GPU_INDEX" in os.environ:
        return int(os.environ["GPU_INDEX"])
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def clock_reader():
    """A function returning {"sm_mhz", "temp_c", "via"} (None when nothing can be read):
    pynvml when importable, else nvidia-smi."""
    index = gpu_index()
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return lambda: {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                        "temp_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU), "via": "pynvml"}
    except Exception as error:  # no pynvml, or NVML refuses: fall back to nvidia-smi
        print(f"pynvml unavailable ({type(error).__name__}: {error}); reading clocks with nvidia-smi")
    if not shutil.which("nvidia-smi"):
        print("nvidia-smi not on PATH either: SM clock and temperature will not be read")
        return lambda: None

    def read():
        out = subprocess.run(["nvidia-smi", "-i", str(index), "--query-gpu=clocks.sm,temperature.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30)
        try:
            sm, temp = (float(v) for v in out.stdout.strip().splitlines()[0].split(","))
        except (ValueError, IndexError):
            return None
        return {"sm_mhz": sm, "temp_c": temp, "via": "nvidia-smi"}
    return read


def sample_times(fn, flush, launches):
    """The one timing path: LAUNCHES launches of `fn`, each after an L2 flush, each between
    two CUDA events; the host is queued ahead of the GPU by a sleep kernel, so no launch
    overhead is timed. Returns the per-launch times in ms."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(launches)]
    torch.cuda.synchronize()
    torch.cuda._sleep(20_000_000)  # about 10 ms at 2 GHz: the host enqueues everything meanwhile
    for i in range(launches):
        flush.zero_()
        starts[i].record()
        fn()
        stops[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, stops)]


def tutorial_configs():
    import triton

    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8}, num_stages=s, num_warps=w)
            for m, n, k, s, w in TUTORIAL]


def tune_kerntune(matmul, a, b, c, answer, size):
    import kerntune

    space = os.environ.get("KT_SPACE", "space")
    db = os.path.join(tempfile.mkdtemp(prefix="kerntune-vendor-"), "results.db")
    start = time.perf_counter()
    if space == "tutorial":
        result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, configs=tutorial_configs(),
                               answer={"c_ptr": answer}, db=db, progress=False)
    elif space == "space":
        result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS, answer={"c_ptr": answer},
                               strategy="default", max_fevals=int(os.environ.get("KT_FEVALS", "100")), db=db, progress=False)
    else:
        raise SystemExit(f"KT_SPACE must be 'space' or 'tutorial', not {space!r}")
    wall = time.perf_counter() - start
    best = next((r for r in result.results if r["status"] == "ok" and r.get("time_ms") == result.best_time_ms), None)
    return dict(space=space, wall_s=wall, evaluations=result.evaluations, config=result.best_config,
                time_ms=result.best_time_ms, samples=best.get("samples") if best else None)


def tune_triton(matmul, a, b, c, size):
    import torch
    import triton

    kernel = triton.autotune(configs=tutorial_configs(), key=["M", "N", "K"])(triton.jit(matmul.matmul_kernel.jit.fn))
    grid = lambda META: (triton.cdiv(size, META["BLOCK_SIZE_M"]) * triton.cdiv(size, META["BLOCK_SIZE_N"]),)  # noqa: E731
    start = time.perf_counter()
    kernel[grid](a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    best = kernel.best_config
    config = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
    own = getattr(kernel, "configs_timings", None) or {}
    own_ms = next((v for k, v in own.items() if k is best), None)
    return dict(space="tutorial", wall_s=wall, evaluations=len(TUTORIAL), config=config,
                time_ms=(own_ms[0] if isinstance(own_ms, (list, tuple)) else own_ms))


def ncu_opinion(config, size):
    """Nsight Compute's gpu__time_duration for the winner, in a child process, clocks left
    free (`--clock-control none`, as in the interleaved measurement) and caches flushed."""
    if os.environ.get("NCU") != "1":
        return {"skipped": "NCU is not 1"}
    if not shutil.which("ncu"):
        return {"skipped": "ncu is not on PATH"}
    command = ["ncu", "--metrics", "gpu__time_duration.sum", "--kernel-name", "regex:matmul_kernel", "--launch-skip", "3",
               "--launch-count", "10", "--clock-control", "none", "--cache-control", "all", "--csv",
               sys.executable, os.path.abspath(__file__), "--ncu-child", json.dumps(config)]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=600, env=dict(os.environ, SIZE=str(size)))
    except subprocess.TimeoutExpired:
        return {"skipped": "ncu ran past 600 s"}
    times = parse_ncu_csv(out.stdout)
    if out.returncode != 0 or not times:
        return {"skipped": f"ncu failed (exit {out.returncode}): {(out.stdout + out.stderr)[-600:]}"}
    return {"median_ms": statistics.median(times), "samples": times, "command": " ".join(command[:-1]) + " CONFIG"}


def ncu_child(config_text):
    """Launched under ncu: the winner, 13 times (3 skipped as warm-up)."""
    import torch

    sys.path.insert(0, EXAMPLES)
    import matmul

    size = int(os.environ.get("SIZE", "4096"))
    a, b, c = (torch.randn((size, size), device="cuda", dtype=torch.float16) for _ in range(3))
    config = json.loads(config_text)
    for _ in range(13):
        matmul.matmul_kernel.jit[matmul.grid](**matmul.arguments(a, b, c), **config)
    torch.cuda.synchronize()


def main():
    import torch

    sys.path.insert(0, EXAMPLES)
    import matmul

    size = int(os.environ.get("SIZE", "4096"))
    rounds_wanted = int(os.environ.get("ROUNDS", "18"))
    launches = int(os.environ.get("LAUNCHES", "25"))
    out_dir = os.environ.get("OUT", tempfile.gettempdir())
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    device = torch.cuda.get_device_properties(0)
    print(f"{device.name}, fp16 {size}^3, {rounds_wanted} rounds of {launches} launches each", flush=True)

    torch.manual_seed(0)
    a = torch.randn((size, size), device="cuda", dtype=torch.float16)
    b = torch.randn((size, size), device="cuda", dtype=torch.float16)
    outputs = {name: torch.empty((size, size), device="cuda", dtype=torch.float16) for name in NAMES}
    answer = torch.matmul(a, b)

    picks = {"kerntune": tune_kerntune(matmul, a, b, outputs["kerntune"], answer, size)}
    print(f"kerntune: {picks['kerntune']['evaluations']} evaluations in {picks['kerntune']['wall_s']:.1f} s, "
          f"pick {picks['kerntune']['config']}, its time {picks['kerntune']['time_ms']:.4f} ms", flush=True)
    picks["triton"] = tune_triton(matmul, a, b, outputs["triton"], size)
    print(f"triton.autotune: 16 configurations in {picks['triton']['wall_s']:.1f} s, pick {picks['triton']['config']}", flush=True)

    launch = {name: (lambda config, out: lambda: matmul.matmul_kernel.jit[matmul.grid](**matmul.arguments(a, b, out), **config))(
        picks[name]["config"], outputs[name]) for name in ("kerntune", "triton")}
    launch["cublas"] = lambda: torch.matmul(a, b, out=outputs["cublas"])

    # Correct before fast: the three products must agree before any of them is timed.
    agreement = {}
    for name in NAMES:
        outputs[name].fill_(float("nan"))
        launch[name]()
    torch.cuda.synchronize()
    failed = False
    for x, y in (("kerntune", "cublas"), ("triton", "cublas"), ("kerntune", "triton")):
        ok = torch.allclose(outputs[x].float(), outputs[y].float(), atol=1e-2, rtol=1e-2)
        worst = (outputs[x].float() - outputs[y].float()).abs().max().item()
        agreement[f"{x}/{y}"] = dict(allclose=ok, max_abs_diff=worst)
        print(f"outputs {x} vs {y}: allclose(atol=1e-2, rtol=1e-2) {ok}, largest difference {worst:.4g}")
        failed |= not ok
    if failed:
        raise SystemExit("the three products disagree: nothing timed")

    flush = torch.empty(2 * device.L2_cache_size, dtype=torch.uint8, device="cuda")
    read_clock = clock_reader()
    for name in NAMES:  # warm-up: compiled, loaded, clocks up
        sample_times(launch[name], flush, launches)
    rounds = []
    for index in range(rounds_wanted):
        order = round_order(NAMES, index)
        before = read_clock()
        samples = {name: sample_times(launch[name], flush, launches) for name in order}
        after = read_clock()
        median_ms = {name: statistics.median(samples[name]) for name in NAMES}
        moved = clock_moved(before, after)
        rounds.append(dict(order=order, clock_before=before, clock_after=after, clock_moved=moved, median_ms=median_ms, samples_ms=samples))
        clocks = f"SM {before['sm_mhz']:.0f}->{after['sm_mhz']:.0f} MHz, {before['temp_c']:.0f}->{after['temp_c']:.0f} C" if before and after else "clock not read"
        print(f"round {index + 1:2d} {''.join(n[0] for n in order)}: " + "  ".join(f"{n} {median_ms[n]:.4f} ms" for n in NAMES)
              + f"  ({clocks}){'  WARNING: SM clock moved more than 5%' if moved else ''}", flush=True)

    rows = {"size": size, "device": device.name, "rounds": rounds_wanted, "launches": launches, "picks": picks, "agreement": agreement,
            "timing": "sleep kernel, then per launch: L2 flush (2x L2) + CUDA events around one launch; median of the launches per round"}
    rows["kernels"] = {}
    for name in NAMES:
        med, low, high, coverage = median_interval([r["median_ms"][name] for r in rounds])
        rows["kernels"][name] = dict(median_ms=med, low_ms=low, high_ms=high, coverage=coverage, tflops=tflops(size, med),
                                     config=picks.get(name, {}).get("config"))
    rows["ratios"] = {}
    for x, y in PAIRS:
        values = pair_ratios(rounds, x, y)
        med, low, high, coverage = median_interval(values)
        rows["ratios"][f"{x}/{y}"] = dict(median=med, low=low, high=high, coverage=coverage, min=min(values), max=max(values), per_round=values)
    ours = picks["kerntune"]["time_ms"]
    measured = rows["kernels"]["kerntune"]["median_ms"]
    rows["self_agreement"] = dict(kerntune_ms=ours, interleaved_ms=measured, ratio=ours / measured,
                                  within_target=abs(ours / measured - 1) <= AGREEMENT_TARGET, kerntune_samples=picks["kerntune"]["samples"])
    rows["ncu"] = ncu_opinion(picks["kerntune"]["config"], size)
    readings = [c["sm_mhz"] for r in rounds for c in (r["clock_before"], r["clock_after"]) if c]
    rows["clock_range_mhz"] = [min(readings), max(readings)] if readings else None
    rows["rounds_detail"] = rounds
    path = os.path.join(out_dir, "vendor_compare.json")
    with open(path, "w") as f:
        json.dump(rows, f, indent=1, default=str)

    print(f"\n=== vendor_compare summary ({device.name}, fp16 {size}^3, {rounds_wanted} rounds interleaved, one timing path)")
    print(f"{'kernel':<10}{'median ms':>11}{'95% interval ms':>20}{'TFLOP/s':>9}  configuration")
    for name in NAMES:
        k = rows["kernels"][name]
        print(f"{name:<10}{k['median_ms']:>11.4f}{k['low_ms']:>10.4f}-{k['high_ms']:<9.4f}{k['tflops']:>9.1f}  {k['config'] or 'torch.matmul'}")
    print(f"{'ratio':<22}{'median':>8}{'95% interval':>18}{'coverage':>10}{'range':>18}")
    for pair, r in rows["ratios"].items():
        print(f"{pair:<22}{r['median']:>8.3f}{r['low']:>10.3f}-{r['high']:<7.3f}{r['coverage']:>10.3f}{r['min']:>10.3f}-{r['max']:.3f}")
    s = rows["self_agreement"]
    print(f"kerntune's own time for its pick {s['kerntune_ms']:.4f} ms / interleaved {s['interleaved_ms']:.4f} ms = {s['ratio']:.3f}: "
          f"{'within' if s['within_target'] else 'NOT within'} the 2% target")
    n = rows["ncu"]
    print(f"Nsight Compute gpu__time_duration of kerntune's pick: {n['median_ms']:.4f} ms (ratio to interleaved {n['median_ms'] / measured:.3f})"
          if "median_ms" in n else f"Nsight Compute: skipped ({n['skipped']})")
    if rows["clock_range_mhz"]:
        low, high = rows["clock_range_mhz"]
        spread = (high - low) / high
        print(f"SM clock over all rounds {low:.0f}-{high:.0f} MHz ({100 * spread:.1f}%)"
              + (": WARNING, more than 5%: the ratios are still interleaved, the absolute times are not comparable" if spread > CLOCK_MOVE else ""))
    print(f"rows and per-round samples: {path}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    elif sys.argv[1:2] == ["--ncu-child"]:
        ncu_child(sys.argv[2])
    else:
        main()

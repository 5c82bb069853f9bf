"""kerntune's energy figures and its CUDA-graph timing against independent measurements,
on the GPU (issue 16, items 2 and 4).

1. Energy: for two kernels (a memory-bound vector add and a compute-bound FMA loop),
   kerntune's energy per launch (`kerntune.tune(..., objective="energy")`: the NVML
   energy counter over a block of at least 200 ms aligned to counter updates, divided by
   its launches) against a long run of the same kernel (LONG_S seconds, launched by
   Triton back to back) whose energy is the counter's difference from before to after the
   run. The per-launch figure times the long run's launches should equal the counter's
   difference within a few percent.
2. Timing of a tiny kernel (a vector add of 4096 elements, about 2 us): kerntune's
   default timing (events around one launch, L2 flushed before it), `timing={"graph":
   True}` (a CUDA graph of many launches, time per launch), a reference of the same
   kernel replayed in a torch CUDA graph of 1000 launches, and Nsight Compute's
   `gpu__time_duration` where `ncu` is on PATH.

Usage: python3 bench/energy_timing.py [LONG_S]   (default 10)
The last lines (after "=== energy_timing summary") are the figures for docs/benchmarks.md.
"""
import ctypes
import csv
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import triton
import triton.language as tl

import kerntune

ADD_N = 1 << 26
FMA_N = 1 << 24
TINY_N = 4096


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)


@triton.jit
def fma_loop(x, out, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(x + offsets, mask=mask)
    for _ in range(ITERS):
        a = a * 0.999 + 0.5
    tl.store(out + offsets, a, mask=mask)


class Nvml:
    """The energy counter of the GPU torch uses, read through libnvidia-ml directly (no
    kerntune code), in millijoules."""

    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise RuntimeError("nvmlInit failed")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        address = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0".encode()
        self.handle = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByPciBusId_v2(address, ctypes.byref(self.handle)) != 0:
            raise RuntimeError(f"NVML has no device at {address.decode()}")

    def energy_mj(self) -> int:
        value = ctypes.c_ulonglong()
        if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(value)) != 0:
            raise RuntimeError("nvmlDeviceGetTotalEnergyConsumption failed")
        return value.value


def long_run(nvml, launch, seconds):
    """Launches back to back for `seconds` (after a second of warm-up); returns the
    counter's difference in J, the launches and the wall time."""
    warm_until = time.perf_counter() + 1.0
    while time.perf_counter() < warm_until:
        for _ in range(20):
            launch()
        torch.cuda.synchronize()
    before = nvml.energy_mj()
    start = time.perf_counter()
    launches = 0
    while time.perf_counter() - start < seconds:
        for _ in range(50):
            launch()
        launches += 50
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    return (nvml.energy_mj() - before) / 1e3, launches, elapsed


def kerntune_row(kernel, args, grid, params, answer, db, **options):
    result = kerntune.tune(kernel, args, grid, params=params, answer=answer, db=db, fresh=True, finalists=1,
                           progress=False, strategy="brute_force", **options)
    rows = [r for r in result.results if r["status"] == "ok"]
    if not rows:
        raise SystemExit(f"kerntune measured nothing: {[r.get('reason') for r in result.results]}")
    return result, rows[-1]


def energy_stage(nvml, seconds, db):
    torch.manual_seed(0)
    x = torch.randn(ADD_N, device="cuda")
    y = torch.randn(ADD_N, device="cuda")
    out = torch.empty_like(x)
    xf = torch.randn(FMA_N, device="cuda")
    outf = torch.empty_like(xf)
    ref = xf.clone()
    for _ in range(256):
        ref = ref * 0.999 + 0.5
    cases = [
        ("vector add 2^26", add, {"x": x, "y": y, "out": out, "n": ADD_N}, {"BLOCK": [1024]},
         {"out": x + y}, lambda: add[(triton.cdiv(ADD_N, 1024),)](x, y, out, ADD_N, BLOCK=1024)),
        ("FMA loop 2^24 x 256", fma_loop, {"x": xf, "out": outf, "n": FMA_N, "ITERS": 256}, {"BLOCK": [512]},
         {"out": ref}, lambda: fma_loop[(triton.cdiv(FMA_N, 512),)](xf, outf, FMA_N, ITERS=256, BLOCK=512)),
    ]
    rows = []
    for label, kernel, args, params, answer, launch in cases:
        grid = lambda META, n=args["n"]: (triton.cdiv(n, META["BLOCK"]),)
        _, row = kerntune_row(kernel, args, grid, params, answer, db, objective="energy")
        ours = row["observables"]
        joules, launches, elapsed = long_run(nvml, launch, seconds)
        rows.append((label, row["time_ms"], ours["energy_J"], ours["power_W"], joules / launches, joules / elapsed,
                     ours["energy_J"] * launches, joules))
    print(f"\n{'kernel':<22}{'time ms':>9}{'kerntune J':>12}{'long run J':>12}{'ratio':>8}"
          f"{'kerntune W':>12}{'long run W':>12}{'sum x N J':>11}{'counter J':>11}")
    for label, ms, ours_j, ours_w, theirs_j, theirs_w, summed, counter in rows:
        print(f"{label:<22}{ms:>9.4f}{ours_j:>12.4e}{theirs_j:>12.4e}{ours_j / theirs_j:>8.3f}"
              f"{ours_w:>12.1f}{theirs_w:>12.1f}{summed:>11.1f}{counter:>11.1f}")
    return rows


def graph_reference(launch, launches=1000, replays=20):
    """The tiny kernel replayed in a torch CUDA graph: median ms per launch."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            launch()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(launches):
            launch()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(replays):
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / launches)
    return statistics.median(times)


def ncu_duration_ms():
    """Nsight Compute's gpu__time_duration of the tiny kernel (median of 30 launches), or
    None without ncu."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return None
    command = [ncu, "--metrics", "gpu__time_duration.sum", "--clock-control", "none", "--cache-control", "none", "--csv",
               "--kernel-name", "regex:add", sys.executable,
               os.path.abspath(__file__), "--ncu-child"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith('"')]
    values = []
    for record in csv.DictReader(io.StringIO("\n".join(lines))):
        if record.get("Metric Name") == "gpu__time_duration.sum":
            scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0}.get(
                record.get("Metric Unit"), None)
            if scale is not None:
                values.append(float(record["Metric Value"].replace(",", "")) * scale)
    if not values:
        print(f"ncu gave no gpu__time_duration (exit {done.returncode}): {(done.stdout + done.stderr).strip()[-600:]}")
        return None
    return statistics.median(values[5:] or values)


def tiny_inputs():
    torch.manual_seed(0)
    x = torch.randn(TINY_N, device="cuda")
    y = torch.randn(TINY_N, device="cuda")
    return x, y, torch.empty_like(x)


def timing_stage(db):
    x, y, out = tiny_inputs()
    args = {"x": x, "y": y, "out": out, "n": TINY_N}
    grid = lambda META: (triton.cdiv(TINY_N, META["BLOCK"]),)
    params = {"BLOCK": [1024]}
    _, events = kerntune_row(add, args, grid, params, {"out": x + y}, db)
    _, graph = kerntune_row(add, args, grid, params, {"out": x + y}, db, timing={"graph": True})
    reference = graph_reference(lambda: add[(triton.cdiv(TINY_N, 1024),)](x, y, out, TINY_N, BLOCK=1024))
    ncu = ncu_duration_ms()
    anchor, anchor_name = (ncu, "ncu") if ncu is not None else (reference, "torch graph")
    print(f"\n{'tiny add (4096)':<32}{'us per launch':>15}{'/ ' + anchor_name:>14}")
    rows = [("kerntune, events (default)", events["time_ms"]), ("kerntune, timing graph", graph["time_ms"]),
            ("torch CUDA graph replay", reference)]
    if ncu is not None:
        rows.append(("ncu gpu__time_duration", ncu))
    for label, ms in rows:
        print(f"{label:<32}{ms * 1e3:>15.3f}{ms / anchor:>14.3f}")
    return rows, anchor_name


def main():
    if "--ncu-child" in sys.argv:
        x, y, out = tiny_inputs()
        for _ in range(30):
            add[(triton.cdiv(TINY_N, 1024),)](x, y, out, TINY_N, BLOCK=1024)
        torch.cuda.synchronize()
        return
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    nvml = Nvml()
    print(f"GPU: {torch.cuda.get_device_name()}; long runs of {seconds:.0f} s")
    clock = time.perf_counter()
    for _ in range(50):
        nvml.energy_mj()
    print(f"one read of NVML's energy counter: {(time.perf_counter() - clock) / 50 * 1e3:.3f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "bench.db")
        energy = energy_stage(nvml, seconds, db)
        timing, anchor = timing_stage(db)
    print("\n=== energy_timing summary")
    for label, _, ours_j, _, theirs_j, _, summed, counter in energy:
        print(f"energy {label}: kerntune {ours_j:.4e} J/launch, long run {theirs_j:.4e} J/launch, "
              f"ratio {ours_j / theirs_j:.3f} (summed {summed:.1f} J vs counter {counter:.1f} J)")
    anchor_ms = dict(timing)[{"ncu": "ncu gpu__time_duration", "torch graph": "torch CUDA graph replay"}[anchor]]
    for label, ms in timing:
        print(f"timing {label}: {ms * 1e3:.3f} us, {ms / anchor_ms:.3f} x {anchor}")
    worst = max(abs(ours_j / theirs_j - 1) for _, _, ours_j, _, theirs_j, _, _, _ in energy)
    if worst > 0.05:
        print(f"FAIL: an energy figure differs from the long run's by {100 * worst:.1f}% (> 5%)")
        sys.exit(1)


if __name__ == "__main__":
    main()

"""Whether a tuned Triton template replaces ATen's GEMM: both timed in this process,
interleaved, with L2 flushed before every timed call and the stream kept busy so that a
launch's host cost is not timed, and decided by the finalists' rule (a template wins only
when its interval lies wholly below ATen's own A/A control). Eager PyTorch runs ATen's GEMM,
so a compiled model never runs a template that did not beat it beyond noise.
"""

from __future__ import annotations

import json
import random
import statistics

import torch

from kerntune import _kerntune

ROUNDS = 30
BLOCKS = 6
#: Timed calls of each kernel in a round (its median is the round's time).
CALLS = 3


def _timer(l2_bytes: int):
    flush = torch.empty(max(l2_bytes, 1 << 20) * 2, dtype=torch.uint8, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def time(call) -> float:
        samples = []
        for _ in range(CALLS):
            flush.zero_()
            # The GPU waits here while the host prepares the launch, so the launch's host
            # cost (large for Triton's Python launcher) is not in the kernel's time.
            torch.cuda._sleep(200_000)
            start.record()
            call()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        return statistics.median(samples)

    return time


def versus_aten(template, aten, seed: int = 0) -> dict:
    """Times ``template`` and ``aten`` (calls that launch one GEMM each) against a second
    copy of ``aten``, in ``ROUNDS`` rounds of random order; returns the Rust verdict (the
    ratios with their intervals, ``replaces``) with each kernel's median time in ms."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    time = _timer(getattr(props, "L2_cache_size", 50 << 20))
    for call in (template, aten):
        call()
    torch.cuda.synchronize()
    order = random.Random(seed)
    times = {"incumbent": [], "copy": [], "contender": []}
    calls = {"incumbent": aten, "copy": aten, "contender": template}
    for _ in range(ROUNDS):
        names = list(calls)
        order.shuffle(names)
        for name in names:
            times[name].append(time(calls[name]))
    verdict = json.loads(_kerntune.replaces_incumbent(times["incumbent"], times["copy"], times["contender"], BLOCKS))
    verdict["aten_ms"] = statistics.median(times["incumbent"])
    verdict["template_ms"] = statistics.median(times["contender"])
    return verdict

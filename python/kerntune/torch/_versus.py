"""Whether a tuned Triton template replaces ATen's GEMM: both timed in this process,
interleaved, with L2 flushed before every timed call and the stream kept busy so that a
launch's host cost is not timed, and decided by the finalists' rule (a template wins only
when its interval lies wholly below ATen's own A/A control). Eager PyTorch runs ATen's GEMM,
so a compiled model never runs a template that did not beat it beyond noise. The same rule
decides whether a compiled graph runs eagerly instead (``versus_eager``).
"""

from __future__ import annotations

import json
import random
import statistics
import time

import torch

from kerntune import _kerntune

ROUNDS = 30
#: Rounds after which a check ends where its verdict already keeps the caller's safe side
#: beyond noise (``_interleaved``'s ``settled``): two rounds a block.
FIRST_ROUNDS = 12
BLOCKS = 6
#: Timed calls of each kernel in a round (its median is the round's time).
CALLS = 3


def _flush_buffer() -> torch.Tensor:
    """Twice the GPU's L2, zeroed before each timed sample so that none starts warm."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return torch.empty(max(getattr(props, "L2_cache_size", 50 << 20), 1 << 20) * 2, dtype=torch.uint8, device="cuda")


def _timer(calls: int, burst: int):
    """A timer of a call: the median of ``calls`` samples, each ``burst`` calls back to back
    (their mean) after an L2 flush, with the stream held busy while the host prepares the
    first launch, so that a launch's host cost (large for Triton's Python launcher) is not in
    the time unless it outlasts the GPU's work."""
    flush = _flush_buffer()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(call) -> float:
        samples = []
        for _ in range(calls):
            flush.zero_()
            torch.cuda._sleep(200_000)
            start.record()
            for _ in range(burst):
                call()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / burst)
        return statistics.median(samples)

    return timed


def _interleaved(timer, incumbent, contender, warm: int, seed: int, settled: str) -> tuple:
    """After ``warm`` calls of each, ``incumbent``, a second copy of it (the A/A control)
    and ``contender`` timed in rounds of random order: ``FIRST_ROUNDS``, then up to
    ``ROUNDS`` unless the verdict so far is ``settled``: the caller's safe side, held beyond
    the control's noise, which the full check would change only if the other side then led
    beyond it.
    Returns the Rust verdict with the rounds timed and the seconds the warm calls and the
    rounds took, and the incumbent's and the contender's median times (ms)."""
    started = time.perf_counter()
    for _ in range(warm):
        contender()
        incumbent()
    torch.cuda.synchronize()
    warmed = time.perf_counter()
    order = random.Random(seed)
    times = {"incumbent": [], "copy": [], "contender": []}
    calls = {"incumbent": incumbent, "copy": incumbent, "contender": contender}
    verdict = None
    for done in range(1, ROUNDS + 1):
        names = list(calls)
        order.shuffle(names)
        for name in names:
            times[name].append(timer(calls[name]))
        if done == FIRST_ROUNDS or done == ROUNDS:
            verdict = json.loads(_kerntune.replaces_incumbent(times["incumbent"], times["copy"], times["contender"],
                                                              BLOCKS))
            if verdict["verdict"] == settled:
                break
    verdict["rounds"] = len(times["incumbent"])
    verdict["warm_s"], verdict["rounds_s"] = warmed - started, time.perf_counter() - warmed
    return verdict, statistics.median(times["incumbent"]), statistics.median(times["contender"])


def versus_aten(template, aten, seed: int = 0) -> dict:
    """Times ``template`` and ``aten`` (calls that launch one GEMM each) against a second
    copy of ``aten``, in up to ``ROUNDS`` rounds of random order; returns the Rust verdict (the
    ratios with their intervals, ``replaces``) with each kernel's median time in ms."""
    # ATen ahead beyond noise after the first rounds keeps ATen; the full check would
    # replace it only if the template then led beyond noise.
    verdict, aten_ms, template_ms = _interleaved(_timer(CALLS, 1), aten, template, 1, seed, "lead_holds")
    return {**verdict, "aten_ms": aten_ms, "template_ms": template_ms}


#: Calls of a graph timed back to back in one sample, as a model's layers run: the host's
#: cost of a call overlaps the GPU's work unless it is larger.
BURST = 5


def versus_eager(compiled, eager, seed: int = 0) -> dict:
    """Times a compiled graph (``compiled``, a call) against the same graph run eagerly
    (``eager``) and a second copy of it, in up to ``ROUNDS`` rounds of random order, each sample
    ``BURST`` calls after an L2 flush; returns the Rust verdict (``lead_holds``: eager is
    faster beyond the A/A control's noise) with both median times in ms. The compiled
    graph's first calls (two, before the timing) tune its kernels where Inductor does so."""
    # The compiled graph ahead beyond noise after the first rounds keeps it compiled; the
    # full check would run eager only if eager then led beyond noise.
    verdict, eager_ms, compiled_ms = _interleaved(_timer(1, BURST), eager, compiled, 2, seed, "overtaken")
    return {**verdict, "eager_ms": eager_ms, "compiled_ms": compiled_ms}

"""Workers kept from one tuning to the next (kerntune._crew): when they are kept, and what
starting them ahead does on a machine that cannot. The GPU side (a second GEMM, a second
size, tuned on the first one's workers) is in test_torch_gpu.py and test_shapes.py."""

import json
import time

import pytest

from conftest import _gpu_available, child_processes
from kerntune import _crew, _kerntune


def test_workers_are_kept_inside_the_outermost_kept_only(monkeypatch):
    calls = []
    monkeypatch.setattr(_crew._kerntune, "keep_workers", calls.append)
    with _crew.kept():
        with _crew.kept():
            assert calls == [True]
        assert calls == [True], "an inner kept() ends without stopping the workers"
    assert calls == [True, False]
    monkeypatch.setenv("KERNTUNE_KEEP_WORKERS", "0")
    with _crew.kept():
        pass
    assert calls == [True, False], "KERNTUNE_KEEP_WORKERS=0 keeps nothing"


def test_held_workers_wait_for_the_next_kept_then_stop(monkeypatch):
    """hold() keeps the workers past the outermost kept() (a training graph's backward is
    compiled later): a kept() within the hold takes them over, and unclaimed they stop when
    the hold ends."""
    calls = []
    monkeypatch.setattr(_crew._kerntune, "keep_workers", calls.append)
    with _crew.kept():
        _crew.hold(2.0)
    assert calls == [True], "held: not stopped when the outermost kept() ends"
    with _crew.kept():
        pass
    assert calls == [True, True, False], "the next kept() took them over, then stopped them"
    time.sleep(2.5)
    assert calls == [True, True, False], "the hold's timer stops nothing once they were taken over"
    with _crew.kept():
        _crew.hold(0.2)
    assert calls == [True, True, False, True]
    deadline = time.monotonic() + 10
    while len(calls) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls == [True, True, False, True, False], "unclaimed, they stop when the hold ends"


@pytest.mark.skipif(_gpu_available(), reason="a GPU machine starts them: the GPU tests use that")
def test_workers_started_ahead_on_a_machine_without_a_gpu_say_why_and_start_nothing():
    from kerntune._job import triton_workers

    commands = triton_workers(90)
    before = child_processes()
    reason = _kerntune.start_workers(json.dumps(commands), json.dumps({"search": {"max_fevals": 60}}))
    assert reason is not None and "\n" not in reason, reason
    assert child_processes() == before
    # prestart is best effort: the same, silently.
    _crew.prestart(commands, {"search": {"max_fevals": 60}})
    assert child_processes() == before


"""Workers kept from one tuning to the next: inside ``kept()``, each tuning of this process
starts on the workers the one before it left (its compile workers, with Triton imported and
warm, and its benchmark workers, with their GPUs open) instead of starting its own, and
leaves its own for the next. A many-shape run's sizes and a model's GEMMs are tunings one
after another, and starting workers cost each of them seconds. When the outermost ``kept()``
ends, the workers stop, so that nothing holds a GPU or memory after the run.

``prestart()`` starts the workers of a tuning still to come, so that they start, and warm
their compiler up, while the caller does something else (``kerntune.torch`` traces and lowers
the model meanwhile); the first tuning inside ``kept()`` that asks for those workers gets them.
Workers started ahead that no tuning claims within ``UNCLAIMED_S`` stop.

``hold(seconds)`` inside ``kept()`` keeps the workers that long after the outermost ``kept()``
ends, for a tuning known to come soon (a training graph's backward, which Inductor compiles at
the first backward pass): the next ``kept()`` within that time gets them, and they stop after it
if it does not hold them again.

``KERNTUNE_KEEP_WORKERS=0`` starts every tuning's workers anew, at its start (the arm a
benchmark compares against). Which workers can be reused, and how, is
``kerntune_pipeline::Crew``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading

from kerntune import _kerntune

_lock = threading.Lock()
#: ``kept()`` blocks open now.
_depth = 0
#: Timers set so far, for workers started ahead or held (a timer stops only the workers it
#: was set for: none if a later timer or ``kept()`` took them over).
_started = 0
#: Seconds the workers are held after the outermost ``kept()`` ends (``hold``).
_held_s = 0.0

#: Seconds after which workers started ahead stop if no ``kept()`` is open by then.
UNCLAIMED_S = 120.0


def hold(seconds: float) -> None:
    """Keeps the workers for ``seconds`` after the outermost ``kept()`` open now ends, for a
    tuning expected within that time."""
    global _held_s
    with _lock:
        _held_s = max(_held_s, seconds)


def _stop_later(seconds: float) -> None:
    """Stops the workers after ``seconds`` unless a ``kept()`` is open then (call with the
    lock held)."""
    global _started
    _started += 1
    timer = threading.Timer(seconds, _stop_unclaimed, (_started,))
    timer.daemon = True
    timer.start()


def keeping() -> bool:
    return os.environ.get("KERNTUNE_KEEP_WORKERS", "1") != "0"


def prestart(commands: dict, request: dict) -> None:
    """Starts the workers (``commands``: see ``kerntune._job.triton_workers``) that a tuning
    of ``request`` will ask for, for the next ``kept()`` to use. Best effort: where they
    cannot start, the tuning starts its own and says why."""
    if not keeping():
        return
    if _kerntune.start_workers(json.dumps(commands), json.dumps(request, default=str)) is None:
        with _lock:
            _stop_later(UNCLAIMED_S)


def _stop_unclaimed(started: int) -> None:
    with _lock:
        if _depth == 0 and started == _started:
            _kerntune.keep_workers(False)


@contextlib.contextmanager
def kept():
    """Keeps each tuning's workers for the next one until the outermost ``kept()`` ends."""
    global _depth, _held_s, _started
    if not keeping():
        yield
        return
    with _lock:
        _depth += 1
        if _depth == 1:
            _started += 1  # the workers are claimed: no timer set before stops them
            _kerntune.keep_workers(True)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _held_s > 0:
                _stop_later(_held_s)
                _held_s = 0.0
            elif _depth == 0:
                _kerntune.keep_workers(False)

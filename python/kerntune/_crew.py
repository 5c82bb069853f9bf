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
#: Workers started ahead so far (a timer stops only the ones it was set for).
_started = 0

#: Seconds after which workers started ahead stop if no ``kept()`` is open by then.
UNCLAIMED_S = 120.0


def keeping() -> bool:
    return os.environ.get("KERNTUNE_KEEP_WORKERS", "1") != "0"


def prestart(commands: dict, request: dict) -> None:
    """Starts the workers (``commands``: see ``kerntune._job.triton_workers``) that a tuning
    of ``request`` will ask for, for the next ``kept()`` to use. Best effort: where they
    cannot start, the tuning starts its own and says why."""
    global _started
    if not keeping():
        return
    if _kerntune.start_workers(json.dumps(commands), json.dumps(request, default=str)) is None:
        with _lock:
            _started += 1
            timer = threading.Timer(UNCLAIMED_S, _stop_unclaimed, (_started,))
        timer.daemon = True
        timer.start()


def _stop_unclaimed(started: int) -> None:
    with _lock:
        if _depth == 0 and started == _started:
            _kerntune.keep_workers(False)


@contextlib.contextmanager
def kept():
    """Keeps each tuning's workers for the next one until the outermost ``kept()`` ends."""
    global _depth
    if not keeping():
        yield
        return
    with _lock:
        _depth += 1
        if _depth == 1:
            _kerntune.keep_workers(True)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _kerntune.keep_workers(False)

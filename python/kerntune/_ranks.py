"""One answer for every process of a job: ``@kerntune.autotune`` tunes each key once and
every process launches the same configuration (``triton.autotune`` on each rank of a
training job picks its own, and the ranks disagree).

- Under ``torch.distributed`` with more than one rank, rank 0 tunes and broadcasts the
  answer, or its failure, to the others (``broadcast_object_list`` over a gloo group of
  the job's ranks, whose timeout bounds the wait: ``KERNTUNE_RANK_TIMEOUT`` seconds,
  default 1800). A rank never waits for an answer that cannot come: a failure is sent as
  such, and a rank 0 that dies breaks the group's connections, which raises.
- Processes that share a store without ``torch.distributed`` take turns through a lock
  file beside the store: the first tunes, and each of the others, once it holds the lock,
  asks the same tuning again, which the store answers without measuring anything. A
  process that dies while tuning releases the lock with its death; the next one resumes
  the tuning from what the store kept.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import os
import time
from typing import Any, Callable, Optional

from kerntune._kerntune import KerntuneError

#: Seconds a process waits for another's tuning, by default.
DEFAULT_TIMEOUT_S = 1800.0


class RankTuningError(KerntuneError):
    """The process that tuned for this one failed, or did not answer in time."""


def timeout_s() -> float:
    """``KERNTUNE_RANK_TIMEOUT`` in seconds, else :data:`DEFAULT_TIMEOUT_S`."""
    text = os.environ.get("KERNTUNE_RANK_TIMEOUT")
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        return float(text)
    except ValueError:
        raise RankTuningError(f"KERNTUNE_RANK_TIMEOUT={text!r}: give a number of seconds") from None


def agree(what: str, lock_path: str, tune_once: Callable[[], Any], timeout: Optional[float] = None) -> Any:
    """The answer of ``tune_once()`` for ``what`` (a kernel and key, in words), computed by
    one process and the same in all: rank 0's under ``torch.distributed``, else the first
    holder's of the lock at ``lock_path`` (the others run ``tune_once`` after it, when the
    store answers it)."""
    timeout = timeout_s() if timeout is None else timeout
    dist = _distributed()
    if dist is None:
        with store_lock(lock_path, what, timeout):
            return tune_once()
    group = _group(dist, timeout)
    if dist.get_rank() == 0:
        try:
            with store_lock(lock_path, what, timeout):
                answer = tune_once()
        except BaseException as error:
            _send(dist, group, {"error": f"{type(error).__name__}: {error}"})
            raise
        _send(dist, group, {"answer": answer})
        return answer
    try:
        message = _send(dist, group, None)
    except Exception as error:  # the group's timeout, or rank 0 gone
        raise RankTuningError(f"{what}: no answer from rank 0, which tunes for every rank: {error}") from None
    if "error" in message:
        raise RankTuningError(f"{what}: rank 0, which tunes for every rank, failed: {message['error']}")
    return message["answer"]


def _distributed():
    """``torch.distributed`` when a job of more than one rank has initialised it."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return None
    return dist


_GROUPS: dict = {}


def _group(dist, timeout: float):
    """A gloo group of every rank, made once per process (every rank makes it at its first
    tuned key, as collectives require): gloo sends Python objects from the CPU whatever
    the job's own backend, and carries this timeout."""
    if timeout not in _GROUPS:
        _GROUPS[timeout] = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout))
    return _GROUPS[timeout]


def _send(dist, group, message):
    """Rank 0's ``message``, on every rank."""
    box = [message]
    dist.broadcast_object_list(box, src=0, group=group)
    return box[0]


class store_lock:
    """An exclusive lock on ``what`` in the lock folder ``lock_path``: a file lock, which
    the system releases when its holder dies. Raises :class:`RankTuningError` after
    ``timeout`` seconds of waiting."""

    def __init__(self, lock_path: str, what: str, timeout: float):
        os.makedirs(lock_path, exist_ok=True)
        name = hashlib.sha256(what.encode()).hexdigest()[:32]
        self.path = os.path.join(lock_path, f"{name}.lock")
        self.what = what
        self.timeout = timeout
        self.file = None

    def __enter__(self):
        self.file = open(self.path, "a+")
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self.file.close()
                    raise RankTuningError(
                        f"{self.what}: another process has been tuning it for more than {self.timeout:.0f} s "
                        f"(it holds {self.path}); wait for it, or raise KERNTUNE_RANK_TIMEOUT"
                    ) from None
                time.sleep(0.05)

    def __exit__(self, *exc):
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()
        return False


def lock_folder(db: Optional[str]) -> str:
    """The folder of a store's lock files: beside the store."""
    from kerntune._kerntune import default_db

    return os.fspath(db or default_db()) + ".locks"

"""A kerntune worker on a Ray cluster:
``python -m kerntune.ray_worker --address ADDR [--gpus N] [--env NAME]... [--ship FILE]... -- PROGRAM ARGS...``

kerntune's pools start this relay where they would start a worker process (see
docs/design-notes.md, "Ray: workers anywhere, through a relay"). The relay joins the
cluster as a driver and creates an actor (one CPU; with ``--gpus``, that many GPUs and no CPU) that
runs ``PROGRAM ARGS`` on whichever node Ray places it, then relays the worker's JSON lines
unchanged: each line on the relay's standard input goes to the worker's, each line the worker
writes comes out on the relay's standard output. ``--env NAME`` passes the relay's own
value of NAME to the worker; ``--ship FILE`` writes FILE at the same path on the actor's
node first (a Triton compile worker's setup). Under ``--gpus``, Ray picks the GPU and the
worker's ``--device N`` becomes 0, the one it sees.

When the worker, the actor or its node dies, the relay says so on standard error and exits:
to the pool it is a worker that died, and the configuration it held is run again elsewhere.
The actor belongs to the relay, so Ray ends it when the relay ends. Nothing here is imported
by ``import kerntune``; Ray is needed only on this path (``pip install 'kerntune[ray]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from typing import Optional, Sequence

#: What the pools run, before the relay's own arguments.
RELAY = ["-m", "kerntune.ray_worker"]


def command(python: str, address: str, argv: Sequence[str], env: Sequence[str] = (), ship: Sequence[str] = (),
            gpus: int = 0) -> list[str]:
    """The argv that runs ``argv`` as a worker on the Ray cluster at ``address``, as the
    CLI's ``--ray`` makes it (``kerntune_pipeline::RayRelay``)."""
    from kerntune import _kerntune

    return _kerntune.ray_command(python, address, list(argv), list(env), [os.fspath(p) for p in ship], gpus)


class _Worker:
    """The actor: one worker process on its node, read and written line by line."""

    def __init__(self, argv: list, env: dict, files: dict):
        for path, data in files.items():
            if not os.path.exists(path):
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env={**os.environ, **env})
        self.stderr = deque(maxlen=20)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip())

    def pid(self) -> int:
        """The actor's own process (tests kill it to stand for a lost node)."""
        return os.getpid()

    def write(self, line: bytes) -> None:
        self.process.stdin.write(line)
        self.process.stdin.flush()

    def read(self) -> bytes:
        """The worker's next line; empty once it has ended."""
        return self.process.stdout.readline()

    def close(self) -> None:
        self.process.stdin.close()

    def ending(self) -> tuple:
        """The worker's exit status and the last lines of its standard error."""
        return self.process.wait(), list(self.stderr)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kerntune.ray_worker", description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="the Ray cluster (auto, HOST:PORT or ray://HOST:PORT)")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs the worker needs (a benchmark worker: 1)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME", help="pass this variable on")
    parser.add_argument("--ship", action="append", default=[], metavar="FILE", help="copy this file to the node")
    parser.add_argument("--check", action="store_true", help="only join the cluster, and say if that fails")
    parser.add_argument("worker", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    options = parser.parse_args(argv)
    if options.worker[:1] == ["--"]:
        options.worker = options.worker[1:]
    if not options.worker and not options.check:
        parser.error("give the worker to run after --")
    return options


def _on_one_gpu(worker: list) -> list:
    """The worker's argv with ``--device N`` as 0: the one GPU Ray lets it see."""
    worker = list(worker)
    if "--device" in worker[:-1]:
        worker[worker.index("--device") + 1] = "0"
    return worker


def _unreachable(address: str, timeout: float = 5.0) -> Optional[str]:
    """Why a ``HOST:PORT`` address does not answer, checked with a plain connection (Ray's
    own connect retries for minutes); None when it does, or for other forms (``auto``,
    ``ray://``), which Ray checks quickly itself."""
    import socket

    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        return error.strerror or type(error).__name__
    return None


def connect(address: str):
    """Ray, joined to the cluster at ``address``; a one-line ``SystemExit`` that says what
    to do when Ray is missing or the cluster cannot be reached."""
    try:
        import ray
    except ImportError:
        raise SystemExit("kerntune: Ray is not installed: pip install 'kerntune[ray]'") from None
    unreachable = _unreachable(address)
    if unreachable is not None:
        raise SystemExit(f"kerntune: cannot reach the Ray cluster at {address!r} ({unreachable}); start one with "
                         f"`ray start --head` or give the address `ray status` prints")
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", configure_logging=False)
    except Exception as error:  # Ray raises ConnectionError, RuntimeError or its own kinds
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SystemExit(f"kerntune: cannot reach the Ray cluster at {address!r} ({first}); start one with "
                         f"`ray start --head` or give the address `ray status` prints") from None
    return ray


def main(argv: Optional[Sequence[str]] = None) -> int:
    # Like every worker, the relay leaves Ctrl-C to the tuner, which decides when it ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    options = _parse(sys.argv[1:] if argv is None else argv)
    # Standard output carries the worker's lines and nothing else: what Ray prints (its
    # messages about dead workers go to the driver's standard output) goes to standard error.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    ray = connect(options.address)
    if options.check:
        # How many GPUs the cluster has; whether that is enough, each front says in its words.
        have = int(ray.cluster_resources().get("GPU", 0))
        out.write(json.dumps({"gpus": have}).encode() + b"\n")
        out.flush()
        return 0
    worker = _on_one_gpu(options.worker) if options.gpus else options.worker
    env = {name: os.environ[name] for name in options.env if name in os.environ}
    files = {}
    for path in options.ship:
        with open(path, "rb") as f:
            files[os.path.abspath(path)] = f.read()
    # A benchmark worker asks for its GPU only: a compile pool given every CPU of the cluster
    # (as --compile-workers should be) would otherwise leave it no CPU, and Ray would hold
    # it back until a compile worker ended, which none does before the run.
    cpus = 0 if options.gpus else 1
    actor_class = ray.remote(num_cpus=cpus, num_gpus=options.gpus, max_concurrency=4, max_restarts=0)(_Worker)
    actor = actor_class.remote(worker, env, files)
    failure = []

    def forward_input():
        try:
            for line in sys.stdin.buffer:
                ray.get(actor.write.remote(line))
            ray.get(actor.close.remote())
        except Exception as error:  # the actor is gone: the output loop says so
            failure.append(error)

    threading.Thread(target=forward_input, daemon=True).start()
    try:
        while True:
            line = ray.get(actor.read.remote())
            if not line:
                break
            out.write(line)
            out.flush()
        code, stderr = ray.get(actor.ending.remote())
    except Exception as error:
        print(f"kerntune: the Ray actor running the worker died: {type(error).__name__}", file=sys.stderr)
        return 1
    for line in stderr:
        print(line, file=sys.stderr)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())

"""A kerntune worker on a Ray cluster:
``python -m kerntune.ray_worker --address ADDR [--gpus N] [--env NAME]... [--ship FILE]... -- PROGRAM ARGS...``

kerntune's pools start this relay where they would start a worker process (see
docs/design-notes.md, "Ray: workers anywhere, through a relay"). The relay does not join the
cluster itself: it hands the worker to the host of its tuning process, one process per tuning
process and cluster that joins the cluster as a driver once and runs each worker in an actor
of its own (one CPU; with ``--gpus``, that many GPUs and no CPU) on whichever node Ray places
it. The first relay starts the host; the others find it at a Unix socket named after the
tuning process and the address. The relay then passes the worker's JSON lines on unchanged:
each line on the relay's standard input goes to the worker's, each line the worker writes
comes out on the relay's standard output. ``--env NAME`` passes the relay's own value of
NAME to the worker; ``--ship FILE`` writes FILE at the same path on the actor's node first
(a Triton compile worker's setup). Under ``--gpus``, Ray picks the GPU and the worker's
``--device N`` becomes 0, the one it sees.

When the worker, the actor or its node dies, the relay says so on standard error and exits:
to the pool it is a worker that died, and the configuration it held is run again elsewhere.
When the relay ends first (a pool kills a hung worker's relay), the host ends the actor. The
host ends with its tuning process, or after a minute with no relay. Nothing here is imported
by ``import kerntune``; Ray is needed only on this path (``pip install 'kerntune[ray]'``), and
only in the host.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
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
    # The host's own arguments: the first relay starts it with them.
    parser.add_argument("--serve", metavar="SOCKET", help=argparse.SUPPRESS)
    parser.add_argument("--owner", type=int, help=argparse.SUPPRESS)
    parser.add_argument("worker", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    options = parser.parse_args(argv)
    if options.worker[:1] == ["--"]:
        options.worker = options.worker[1:]
    if not options.worker and not options.check and not options.serve:
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


# What crosses a relay's socket, one message a line, each led by a tag: from the relay, a
# line for the worker and the end of its input; from the host, a line of the worker, its
# end (exit status and last words) or the death of its actor.
LINE, CLOSED, ENDED, DIED = b"L", b"C", b"E", b"X"


def _json_line(value, tag: bytes = b"") -> bytes:
    """``value`` as one JSON message, led by ``tag`` where the message has one."""
    return tag + json.dumps(value).encode() + b"\n"


def _as_line(line: bytes) -> bytes:
    """A worker's line as a message: tagged, and ended even where its worker's last line was not."""
    return LINE + (line if line.endswith(b"\n") else line + b"\n")


#: How long a host waits with no relay before it ends.
IDLE_S = 60.0


def _host_socket(address: str, owner: int) -> str:
    """Where the host of the tuning process ``owner`` for the cluster at ``address`` listens."""
    key = hashlib.sha1(f"{address}\0{sys.executable}".encode()).hexdigest()[:12]
    name = os.path.join(f"kerntune-ray-{os.getuid()}", f"{owner}-{key}.sock")
    path = os.path.join(tempfile.gettempdir(), name)
    # A Unix socket's path holds 107 bytes at most.
    return path if len(path.encode()) < 100 else os.path.join("/tmp", name)


def _connected(path: str) -> Optional[socket.socket]:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:
        connection.close()
        return None
    return connection


def _last_words(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _host(address: str) -> socket.socket:
    """A connection to the host of this relay's tuning process (its parent) for the cluster
    at ``address``, started first when there is none; a one-line ``SystemExit`` when it
    cannot join the cluster. Relays started at once wait on a lock for the first to start it."""
    owner = os.getppid()
    path = _host_socket(address, owner)
    connection = _connected(path)
    if connection is not None:
        return connection
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        connection = _connected(path)
        if connection is not None:
            return connection
        log = path + ".log"
        with open(log, "wb") as stderr:
            host = subprocess.Popen([sys.executable, *RELAY, "--serve", path, "--owner", str(owner), "--address", address],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                    start_new_session=True)
        # The host listens once it has joined the cluster.
        while True:
            connection = _connected(path)
            if connection is not None:
                return connection
            if host.poll() is not None:
                last = _last_words(log)
                raise SystemExit(last if last.startswith("kerntune: ") else
                                 f"kerntune: the Ray relay's host ended ({last or 'no message'}); its log: {log}")
            time.sleep(0.02)


def _relay(options: argparse.Namespace, out) -> int:
    """Runs the worker through the host and passes its lines on; the worker's exit status."""
    worker = _on_one_gpu(options.worker) if options.gpus else options.worker
    env = {name: os.environ[name] for name in options.env if name in os.environ}
    ship = [os.path.abspath(path) for path in options.ship]
    for path in ship:
        if not os.path.isfile(path):
            print(f"kerntune: the Ray relay cannot ship {path}: no such file", file=sys.stderr)
            return 1
    connection = _host(options.address)
    header = {"argv": worker, "env": env, "ship": ship, "gpus": options.gpus}
    connection.sendall(_json_line(header))

    def forward_input():
        try:
            for line in sys.stdin.buffer:
                connection.sendall(_as_line(line))
            connection.sendall(CLOSED + b"\n")
        except OSError:  # the host is gone: the output loop says so
            pass

    threading.Thread(target=forward_input, daemon=True).start()
    for message in connection.makefile("rb"):
        tag, body = message[:1], message[1:]
        if tag == LINE:
            out.write(body)
            out.flush()
        elif tag == ENDED:
            end = json.loads(body)
            for line in end["stderr"]:
                print(line, file=sys.stderr)
            return end["code"] if end["code"] >= 0 else 128 - end["code"]
        elif tag == DIED:
            print(f"kerntune: the Ray actor running the worker died: {json.loads(body)['error']}", file=sys.stderr)
            return 1
    print("kerntune: the Ray relay's host ended before the worker", file=sys.stderr)
    return 1


def _check(options: argparse.Namespace, out) -> int:
    """How many GPUs the cluster has, asked of the host (started now, so that the run's
    relays find it joined); whether that is enough, each front says in its words."""
    connection = _host(options.address)
    connection.sendall(_json_line({"check": True}))
    answer = connection.makefile("rb").readline()
    if not answer:
        print("kerntune: the Ray relay's host ended before it answered", file=sys.stderr)
        return 1
    out.write(answer)
    out.flush()
    return 0


class _Relays:
    """The host's count of connected relays, and since when it has had none."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0
        self.idle_since = time.monotonic()

    def change(self, by: int) -> None:
        with self.lock:
            self.count += by
            if self.count == 0:
                self.idle_since = time.monotonic()

    def idle_for(self) -> float:
        with self.lock:
            return time.monotonic() - self.idle_since if self.count == 0 else 0.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        pass
    return True


def _serve_relay(ray, connection: socket.socket, actor_classes: dict) -> None:
    """One relay's worker: its actor, created from the relay's first line, then its lines
    both ways. The actor is ended when its worker ends and when the relay does."""
    actor = None
    ended = threading.Event()
    try:
        reader = connection.makefile("rb")
        first = reader.readline()
        if not first:
            return
        header = json.loads(first)
        if header.get("check"):
            gpus = int(ray.cluster_resources().get("GPU", 0))
            connection.sendall(_json_line({"gpus": gpus}))
            return
        files = {}
        for path in header["ship"]:
            with open(path, "rb") as f:
                files[path] = f.read()
        gpus = header["gpus"]
        if gpus not in actor_classes:
            # A benchmark worker asks for its GPU only: a compile pool given every CPU of
            # the cluster (as --compile-workers should be) would otherwise leave it no CPU,
            # and Ray would hold it back until a compile worker ended, which none does
            # before the run.
            actor_classes[gpus] = ray.remote(num_cpus=0 if gpus else 1, num_gpus=gpus, max_concurrency=4,
                                             max_restarts=0)(_Worker)
        actor = actor_classes[gpus].remote(header["argv"], header["env"], files)

        def forward_input():
            try:
                for message in reader:
                    if message[:1] == LINE:
                        ray.get(actor.write.remote(message[1:]))
                    elif message[:1] == CLOSED:
                        ray.get(actor.close.remote())
            except Exception:  # the actor is gone: the output loop says so
                pass
            if not ended.is_set():  # the relay is gone before its worker ended
                _end(ray, actor)

        threading.Thread(target=forward_input, daemon=True).start()
        while True:
            line = ray.get(actor.read.remote())
            if not line:
                break
            connection.sendall(_as_line(line))
        code, stderr = ray.get(actor.ending.remote())
        ended.set()
        connection.sendall(_json_line({"code": code, "stderr": stderr}, ENDED))
    except OSError:  # the relay is gone
        pass
    except Exception as error:  # the actor, its worker's node, or a shipped file
        ended.set()
        try:
            connection.sendall(_json_line({"error": type(error).__name__}, DIED))
        except OSError:
            pass
    finally:
        if actor is not None:
            _end(ray, actor)
        connection.close()


def _end(ray, actor) -> None:
    try:
        ray.kill(actor)
    except Exception:  # already gone
        pass


def _serve(options: argparse.Namespace) -> int:
    """The host: joins the cluster once, then serves every relay that connects, each in a
    thread; ends when its tuning process has, or after ``IDLE_S`` with no relay."""
    ray = connect(options.address)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.unlink(options.serve)
    except FileNotFoundError:
        pass
    server.bind(options.serve)
    server.listen(256)
    relays = _Relays()
    actor_classes: dict = {}

    def watch():
        while _alive(options.owner) and relays.idle_for() < IDLE_S:
            time.sleep(0.5)
        # The lock stays while the tuning process lives: a relay may be waiting on it.
        leftovers = [options.serve, options.serve + ".log"]
        if not _alive(options.owner):
            leftovers.append(options.serve + ".lock")
        for path in leftovers:
            try:
                os.unlink(path)
            except OSError:
                pass
        # Ray ends the actors of a driver that has gone.
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()

    def serve_one(connection):
        try:
            _serve_relay(ray, connection, actor_classes)
        finally:
            relays.change(-1)

    while True:
        connection, _ = server.accept()
        relays.change(1)
        threading.Thread(target=serve_one, args=(connection,), daemon=True).start()


def main(argv: Optional[Sequence[str]] = None) -> int:
    # Like every worker, the relay leaves Ctrl-C to the tuner, which decides when it ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    options = _parse(sys.argv[1:] if argv is None else argv)
    if options.serve:
        return _serve(options)
    # Standard output carries the worker's lines and nothing else.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if options.check:
        return _check(options, out)
    return _relay(options, out)


if __name__ == "__main__":
    sys.exit(main())

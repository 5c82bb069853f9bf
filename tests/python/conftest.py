"""Shared fixtures: the examples' folder on the import path, a results database per test,
and two guards: the suite's default results store is a temporary one (the user's
``~/.cache/kerntune`` is never read or written, and a run that writes it fails), and no test
opens a network connection (one that tries is skipped, naming the host, and fails in CI)."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "triton"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU with torch; skipped without one")


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def child_processes(containing: str = "") -> list:
    """The command lines of this process's children (whose command contains ``containing``)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if parent == os.getpid() and containing in command:
            found.append(command)
    return found


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    if os.environ.get("KERNTUNE_REQUIRE_GPU"):
        # Set on the GPU machine (gpu/check.sh): there a skipped GPU test is a failure.
        raise pytest.UsageError("KERNTUNE_REQUIRE_GPU is set, but torch finds no CUDA GPU")
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and torch")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def script_runner(tmp_path):
    """Runs Python source as a script file in ``tmp_path``, as a user runs a tutorial (a
    fresh process, a results store of its own); fails the test on a non-zero exit and
    returns what it printed."""
    def run(source: str) -> str:
        path = tmp_path / "script.py"
        path.write_text(source)
        env = dict(os.environ, KERNTUNE_DB=str(tmp_path / "results.db"))
        done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, env=env,
                              cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout
    return run


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "results.db")


@pytest.fixture
def kerntune_cli() -> str:
    """The CLI that the Rust tests built (scripts/test.sh runs them first), else one on PATH."""
    for candidate in (os.environ.get("KERNTUNE_BIN"), os.path.join(ROOT, "target", "debug", "kerntune"),
                      shutil.which("kerntune")):
        if candidate and os.path.isfile(candidate):
            return candidate
    pytest.skip("no kerntune command to make a store with (cargo build, or set KERNTUNE_BIN)")


def _users_store_folder() -> str:
    """Where ``Store::default_path`` puts the user's store when ``KERNTUNE_DB`` is unset."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "kerntune")


def _snapshot(folder: str) -> dict:
    if not os.path.isdir(folder):
        return {}
    return {entry.name: (entry.stat().st_mtime_ns, entry.stat().st_size) for entry in os.scandir(folder)}


@pytest.fixture(scope="session", autouse=True)
def private_default_store():
    """Every call that names no ``db`` (and every process the tests start) writes a store of
    the session's own; after the session the user's store folder must be as it was."""
    users = _users_store_folder()
    before = _snapshot(users)
    folder = tempfile.mkdtemp(prefix="kerntune-tests-")
    previous = os.environ.get("KERNTUNE_DB")
    os.environ["KERNTUNE_DB"] = os.path.join(folder, "default.db")
    yield os.environ["KERNTUNE_DB"]
    if previous is None:
        del os.environ["KERNTUNE_DB"]
    else:
        os.environ["KERNTUNE_DB"] = previous
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    after = _snapshot(users)
    if after != before:
        changed = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
        pytest.fail(f"the tests wrote the user's results store: {users} ({', '.join(changed)} changed)")


def _local_name(host) -> bool:
    if host is None:
        return True
    host = host.decode() if isinstance(host, bytes) else str(host)
    if host in ("localhost", "", socket.gethostname()):
        return True
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host.split("%")[0])
        return True  # a numeric address: resolving it asks no one
    except OSError:
        return False


def _local_address(family, host) -> bool:
    """Loopback, or an address of this machine (Ray's own services listen on those):
    binding to it succeeds only when it is one of this machine's."""
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
        return True
    except OSError:
        return False


def _refuse_network(what: str):
    message = f"needs the network ({what}): the tests never open a network connection"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session", autouse=True)
def no_network():
    """Resolving a remote name or connecting a stream socket to another machine skips the
    test (fails it in CI, where ``CI`` is set), from the first fixture on (module fixtures
    included). pytest's skip is not an ``Exception``, so a library's ``except Exception``
    does not swallow it."""
    resolve, connect = socket.getaddrinfo, socket.socket.connect

    def guarded_getaddrinfo(host, port, *args, **kwargs):
        if not _local_name(host):
            _refuse_network(f"{host}:{port}")
        return resolve(host, port, *args, **kwargs)

    def guarded_connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and self.type == socket.SOCK_STREAM:
            if not _local_address(self.family, address[0]):
                _refuse_network(f"{address[0]}:{address[1]}")
        return connect(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
        patch.setattr(socket.socket, "connect", guarded_connect)
        yield

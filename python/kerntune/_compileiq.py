"""CompileIQ as kerntune's search over compiler controls (ACF files).

CompileIQ (``pip install compileiq``, NVIDIA's licence: the user's own install, never
bundled) proposes ptxas Advanced Compiler Control files with an ask/tell search: each
``ask`` gives a generation of candidates (an encrypted ACF each, as hex), each ``tell``
returns their scores. kerntune compiles and times the candidates itself (compile pool,
benchmark worker, verification), so CompileIQ only proposes.

``AcfSearch`` wraps that loop and writes each candidate to a file that
``--apply-controls=FILE`` reads. ``serve`` is the worker process that the run's
compiler-controls stage starts (``python -m kerntune._worker __worker controls``, for
``kerntune.tune(..., controls="compileiq")`` and ``kerntune tune SPEC --controls
compileiq`` alike): it answers the stage's ``ask`` and ``tell`` lines
(``kerntune_pipeline::controls``), while the stage compiles, checks and times the
candidates in its one compile pool and benchmark worker. docs/design-notes.md says why it
lives here.

CompileIQ's ptxas search space (a ``.bin`` per ptxas version, published with CompileIQ's
releases and not on PyPI) is found in ``search_space`` (a file), else
``$KERNTUNE_CIQ_SEARCH_SPACE``, else CompileIQ's own lookup (``$CIQ_SEARCH_SPACES_DIR``, its
cache, or its download).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Optional

SEARCH_SPACE_ENV = "KERNTUNE_CIQ_SEARCH_SPACE"


class CompileIQUnavailable(RuntimeError):
    """CompileIQ or its ptxas search space is not on this machine; the message says which."""


def available() -> Optional[str]:
    """None when CompileIQ can be imported, else why not (one line)."""
    try:
        import compileiq.ciq  # noqa: F401
    except ImportError as error:
        return f"CompileIQ is not installed (pip install compileiq): {error}"
    return None


def search_space(ptxas_version: str = "13.3", path: Optional[str] = None):
    """The search space CompileIQ searches: the file ``path`` or ``$KERNTUNE_CIQ_SEARCH_SPACE``,
    else CompileIQ's provider for ptxas ``major.minor`` of ``ptxas_version``."""
    from compileiq.search_spaces.compilers import LocalSearchSpaceBin, PtxasSearchSpace

    path = path or os.environ.get(SEARCH_SPACE_ENV)
    if path:
        if not os.path.isfile(path):
            raise CompileIQUnavailable(f"CompileIQ search space {path}: no such file")
        return LocalSearchSpaceBin(path)
    release = ".".join(ptxas_version.split(".")[:2])
    provider = PtxasSearchSpace(version=release)
    try:
        provider.retrieve()
    except Exception as error:  # network, manifest or missing release: one line says which
        raise CompileIQUnavailable(
            f"CompileIQ's ptxas {release} search space is not on this machine ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}); set {SEARCH_SPACE_ENV} to its .bin file"
        ) from None
    return provider


class AcfSearch:
    """CompileIQ's ask/tell search over ACF files for one ptxas.

    ``ask()`` returns ``[(id, path)]``: a generation of candidate ACF files written into
    ``directory``; ``tell({id: time_ms or None})`` scores them (lower is better; None is a
    failure). ``pool_size`` candidates per generation (CompileIQ asks for 6 or more)."""

    def __init__(self, ptxas_version: str = "13.3", pool_size: int = 6, generations: int = 1000,
                 directory: Optional[str] = None, search_space_path: Optional[str] = None):
        missing = available()
        if missing:
            raise CompileIQUnavailable(missing)
        import pathlib

        from compileiq.ciq import Search
        from compileiq.types import WorkerTypes

        self.directory = directory or tempfile.mkdtemp(prefix="kerntune-acf-")
        os.makedirs(self.directory, exist_ok=True)
        space = search_space(ptxas_version, search_space_path)
        self._search = Search(
            objective_function=_never_called,
            search_space=space,
            search_config={"generations": generations, "pool_size": max(pool_size, 6)},
            worker_type=WorkerTypes.MANUAL,
            disable_progress_bar=True,
            exit_on_failure=False,
            cache_folder=pathlib.Path(self.directory) / "compileiq",
        )
        self._pending: dict[str, object] = {}

    def ask(self) -> list[tuple[str, str]]:
        candidates = self._search.ask()
        asked = []
        for candidate in candidates:
            key = str(candidate.param_id)
            path = os.path.join(self.directory, f"{key}.acf")
            with open(path, "wb") as f:
                f.write(bytes.fromhex(candidate.params))
            self._pending[key] = candidate.param_id
            asked.append((key, path))
        return asked

    def tell(self, times: dict) -> int:
        from compileiq.utils.validation import Score

        scores = []
        for key, time_ms in times.items():
            if key not in self._pending:
                raise ValueError(f"candidate {key} was not asked, or was told already")
            score = "*" if time_ms is None else float(time_ms)  # "*": CompileIQ's failure
            scores.append(Score(score=score, param_id=self._pending.pop(key), num_objectives=1))
        if scores:
            self._search.tell(scores)
        return len(scores)


def _never_called(_params):
    raise RuntimeError("kerntune compiles and times the candidates itself")


def serve(argv) -> int:
    """The CompileIQ worker: ``--ptxas-version V --pool-size N``, then one JSON object a line
    on standard input (``{"type": "ask"}``, ``{"type": "tell", "scores": [{"id", "time_ms"}]}``)
    answered on standard output (``ready``, ``asked``, ``told``; ``fatal`` with one line when
    it cannot go on). CompileIQ's own printing goes to standard error."""
    parser = argparse.ArgumentParser(prog="kerntune._worker __worker controls")
    parser.add_argument("--ptxas-version", required=True)
    parser.add_argument("--pool-size", type=int, default=6)
    args = parser.parse_args(argv)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def say(message: dict) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    try:
        search = AcfSearch(args.ptxas_version, args.pool_size)
    except CompileIQUnavailable as error:
        say({"type": "fatal", "message": str(error)})
        return 1
    say({"type": "ready", "directory": search.directory})
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("type") == "ask":
            say({"type": "asked", "candidates": [{"id": key, "path": path} for key, path in search.ask()]})
            continue
        if request.get("type") != "tell":
            say({"type": "fatal", "message": f"the CompileIQ worker cannot answer {line.strip()}"})
            return 1
        try:
            count = search.tell({score["id"]: score["time_ms"] for score in request["scores"]})
        except ValueError as error:
            say({"type": "fatal", "message": str(error)})
            return 1
        say({"type": "told", "count": count})
    return 0

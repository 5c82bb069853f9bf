"""CompileIQ as kerntune's search over compiler controls (ACF files).

CompileIQ (``pip install compileiq``, NVIDIA's licence: the user's own install, never
bundled) proposes ptxas Advanced Compiler Control files with an ask/tell search: each
``ask`` gives a generation of candidates (an encrypted ACF each, as hex), each ``tell``
returns their scores. kerntune compiles and times the candidates itself (compile pool,
benchmark worker, verification), so CompileIQ only proposes.

``AcfSearch`` wraps that loop and writes each candidate to a file that
``--apply-controls=FILE`` reads; ``search_controls`` runs it over generations that the
caller compiles and times (``kerntune.tune(..., controls="compileiq")`` does so through
ordinary tunings of the best configuration with each candidate as its ``acf``, and
bench/controls.py through the CLI). docs/design-notes.md says why it lives here.

CompileIQ's ptxas search space (a ``.bin`` per ptxas version, published with CompileIQ's
releases and not on PyPI) is found in ``search_space`` (a file), else
``$KERNTUNE_CIQ_SEARCH_SPACE``, else CompileIQ's own lookup (``$CIQ_SEARCH_SPACES_DIR``, its
cache, or its download).
"""

from __future__ import annotations

import os
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


def search_controls(evaluate, budget: int, ptxas_version: str, pool_size: int = 6,
                    directory: Optional[str] = None, search_space_path: Optional[str] = None) -> dict:
    """CompileIQ's search over ACF files, ``budget`` candidates in generations of
    ``pool_size``: ``evaluate(paths)`` compiles and times a generation (one time in ms, or
    None for a failure, per path). Returns the report: ``evaluations``, ``failed``,
    ``generations``, ``best_acf`` and ``best_ms`` (None when every candidate failed), and
    the first few failures' reasons where ``evaluate`` gave them (``(time, reason)`` pairs)."""
    search = AcfSearch(ptxas_version, pool_size, directory=directory, search_space_path=search_space_path)
    report = {"evaluations": 0, "failed": 0, "generations": 0, "best_acf": None, "best_ms": None,
              "failures": [], "directory": search.directory}
    while report["evaluations"] < budget:
        asked = search.ask()[: budget - report["evaluations"]]
        outcomes = evaluate([path for _, path in asked])
        told = {}
        for (key, path), outcome in zip(asked, outcomes):
            time_ms, reason = outcome if isinstance(outcome, tuple) else (outcome, None)
            told[key] = time_ms
            if time_ms is None:
                report["failed"] += 1
                if reason and len(report["failures"]) < 5:
                    report["failures"].append(reason)
            elif report["best_ms"] is None or time_ms < report["best_ms"]:
                report["best_ms"], report["best_acf"] = time_ms, path
        search.tell(told)
        report["evaluations"] += len(asked)
        report["generations"] += 1
    return report

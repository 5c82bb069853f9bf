"""The result of a tuning run."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from kerntune._kerntune import BackendError, export_text, write_report
from kerntune._space import launch_options, without_compilers_choice


class NoValidConfigError(BackendError):
    """A tuning run found no configuration that runs and passes its check. The message says
    why (the reason every configuration shared, with a hint when it is a known one);
    ``result`` holds the run's ``TuneResult`` (from ``tune``), every failure's reason
    included; ``tune_kernel`` gives none, as its results are Kernel Tuner's list."""

    def __init__(self, message: str, result: Optional["TuneResult"] = None):
        super().__init__(message)
        self.result = result


@dataclass
class TuneResult:
    """What a tuning run found.

    ``best_config`` holds every tuned parameter of the best configuration, constexprs and
    compile options alike (``maxnreg = 0`` and an empty ``ptx_options`` are left out, so it
    can be passed to a Triton launch as keyword arguments). ``results`` has one entry per
    configuration observed: its config, status (``ok``, ``compile_failed``,
    ``invalid_output``, ``early_stopped``...), reason, objective, median time and samples.
    """

    best_config: Optional[dict]
    best_objective: Optional[float]
    best_time_ms: Optional[float]
    objective: str
    higher_is_better: bool
    evaluations: int
    failed: int
    from_store: int
    stop: str
    wall_s: float
    db: str
    results: list = field(default_factory=list)
    trace: list = field(default_factory=list)
    costs: dict = field(default_factory=dict)
    #: The finalists timed again after the search (their configurations, the search's best
    #: first, and the interleaved ratios with the A/A control and the verdict), else None.
    finalists: Optional[dict] = None
    #: Why the finalists could not be timed again (a kernel that hung or crashed there);
    #: the search's best stands. None when they were, or when there were none.
    finalists_failed: Optional[str] = None
    #: The schedule stage's report (``tune(..., schedule=True)``), else None.
    schedule: Optional[dict] = None
    #: Whether every configuration's outputs were checked against a reference.
    verified: bool = True
    #: On how many input sets each configuration was checked: 0 when outputs were not
    #: checked, 1 for the call's own tensors (an ``answer``, or a reference computed from
    #: them), more where a reference kernel also checked redrawn random inputs. Each entry
    #: of ``results`` says in its metrics how many sets that configuration passed.
    verified_sets: int = 1
    #: The other sizes each configuration was also checked at (``n = 4095``): the CUDA
    #: spec's ``[verify] sizes``, or ``tune(..., edge_args=...)`` for Triton. A
    #: configuration wrong at one is ``invalid_output``, its reason naming the size.
    verified_sizes: list = field(default_factory=list)
    #: For Triton's ``edge_args``: how many of the best configurations were checked at the
    #: edge sizes, best first, until enough passed (None where every configuration was).
    edge_checked: Optional[int] = None
    #: The compiler-controls stage's report (``tune(..., controls="compileiq")``), else None.
    controls: Optional[dict] = None
    #: The ptxas the caller chose (``ptxas=``), with its version and path, else None.
    compiler: Optional[str] = None
    #: Why nothing was found, when nothing was (see ``NoValidConfigError``).
    failure: Optional[str] = None
    #: Seconds spent in this process before and around the search: ``prepare_s`` (the
    #: kernel captured, tensors copied out), ``reference_s`` (the reference runs through
    #: Triton), ``tune_s`` (the search, workers started included).
    phases: dict = field(default_factory=dict)
    #: The tuning's number in the store ``db`` (``kerntune report DB --tuning N``).
    tuning: Optional[int] = None
    #: Compile workers the run started (None when the store answered every configuration).
    compile_workers: Optional[int] = None
    #: How the run's workers came to be ready: ``reused`` (kept from the tuning before it,
    #: see ``kerntune._crew``) and ``ready_s`` (seconds until every GPU was set up with the
    #: run's data, which the search does not wait for; None if it ended first); None when
    #: the store answered every configuration.
    workers: Optional[dict] = None
    #: In a many-shape run (``tune(..., shapes=...)``), this size's line of the report:
    #: ``shape``, ``evaluations``, ``measured``, ``wall_s``, ``best``, ``best_config``,
    #: ``found_at`` (the evaluation that first measured the winner), ``started_from`` (the
    #: size it learned from) and ``tuning``.
    shape: Optional[dict] = None

    @classmethod
    def from_json(cls, text: str) -> "TuneResult":
        data = json.loads(text)
        best = data.get("best") or {}
        config = best.get("config")
        if config is not None:
            config = without_compilers_choice(config)
        return cls(
            best_config=config,
            best_objective=best.get("objective"),
            best_time_ms=best.get("time_ms"),
            objective=data["objective"],
            higher_is_better=data["higher_is_better"],
            evaluations=data["evaluations"],
            failed=data["failed"],
            from_store=data["from_store"],
            stop=data["stop"],
            wall_s=data["wall_s"],
            db=data["db"],
            results=data["results"],
            trace=data["trace"],
            costs=data["costs"],
            failure=data.get("failure"),
            verified=data["verified"],
            verified_sets=data.get("verified_sets", int(data["verified"])),
            verified_sizes=data.get("verified_sizes", []),
            edge_checked=data.get("edge_checked"),
            finalists=data.get("finalists"),
            finalists_failed=data.get("finalists_failed"),
            schedule=data.get("schedule"),
            controls=data.get("controls"),
            tuning=data.get("tuning"),
            compiler=data.get("compiler"),
            compile_workers=data.get("compile_workers"),
            workers=data.get("workers"),
            shape=data.get("shape"),
        )

    def __repr__(self) -> str:
        best = "none" if self.best_config is None else f"{self.best_objective:.6g} {self.objective} with {self.best_config}"
        return (
            f"TuneResult(best: {best}; {self.evaluations} evaluations, {self.failed} failed, "
            f"{self.from_store} from the store; stopped: {self.stop})"
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def report(self, path: Union[str, os.PathLike] = "report.html") -> str:
        """Writes the HTML report of this tuning (every evaluation the store holds for it,
        earlier runs' included) to ``path``; returns the path. See ``kerntune.report``."""
        return report(self.db, path, tuning=self.tuning)


def report(db: Union[str, os.PathLike], path: Union[str, os.PathLike] = "report.html",
           tuning: Optional[int] = None) -> str:
    """Writes the HTML report of the results store ``db`` to ``path`` (one self-contained
    page: the best configurations, best so far against evaluations and time, the objective
    against each parameter, failures, a time/energy Pareto front where both were measured,
    the device and the costs) and returns the path. ``tuning`` picks one tuning by its
    number (``kerntune results`` lists them); default: every tuning in the store.
    ``kerntune.StoreError`` when the store has no tunings or no such tuning."""
    if tuning is not None and (isinstance(tuning, bool) or not isinstance(tuning, int)):
        from kerntune._errors import ArgumentTypeError

        raise ArgumentTypeError(f"tuning: give a tuning's number (an int), not {tuning!r}")
    write_report(os.fspath(db), os.fspath(path), tuning)
    return os.fspath(path)


def export(db: Union[str, os.PathLike], path: Union[str, os.PathLike], format: str = "t4",
           kernel: Optional[str] = None) -> str:
    """Writes the tuning in the results store ``db`` to ``path`` as a T4 results file
    (``format="t4"``) or a Kernel Tuner cache file (``"kernel_tuner"``), byte for byte what
    ``kerntune export DB --format t4|kernel-tuner`` writes, and returns the path. ``kernel``
    picks the tuning by its kernel's name where the store holds several.
    ``kerntune.StoreError`` when the store has no such tuning."""
    if kernel is not None and not isinstance(kernel, str):
        from kerntune._errors import ArgumentTypeError

        raise ArgumentTypeError(f"kernel: give a kernel's name (a string), not {kernel!r}")
    text = export_text(os.fspath(db), format, kernel)
    with open(path, "w") as f:
        f.write(text)
    return os.fspath(path)

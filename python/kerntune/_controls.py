"""The compiler-controls stage of ``kerntune.tune(..., controls="compileiq")``: after the
source search, CompileIQ proposes ACF files for the best configuration; each generation is
an ordinary tuning of that configuration with the candidates as its ``acf`` values
(compiled in parallel by the compile pool, checked and timed by the benchmark worker), and
the fastest candidate is then timed against the configuration without an ACF by the
finalists' interleaved A/B with its A/A control. The candidate is kept only when its
interval lies wholly below the control's.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from kerntune import _compileiq
from kerntune._errors import ArgumentError
from kerntune._space import OPTION_DEFAULTS

NO_ACF = "none"


def times_of(results: list, key: str, values: list) -> list:
    """Per value of ``key`` (in ``values``' order): ``(time_ms, None)`` of the result row
    whose config has it, or ``(None, reason)`` when that configuration failed."""
    rows = {row["config"].get(key): row for row in results}
    outcomes = []
    for value in values:
        row = rows.get(value)
        if row is None:
            outcomes.append((None, f"{value}: no result"))
        elif row["status"] != "ok" or row.get("time_ms") is None:
            outcomes.append((None, f"{row['status']}: {row.get('reason') or ''}".strip()))
        else:
            outcomes.append((float(row["time_ms"]), None))
    return outcomes


def full_config(result) -> dict:
    """The best configuration with every compile option spelled out (a result leaves out
    those at the compiler's choice)."""
    best = dict(result.best_config)
    for row in result.results:
        if all(row["config"].get(k) == v for k, v in best.items()):
            return {k: v for k, v in row["config"].items()}
    for name, value in OPTION_DEFAULTS.items():
        best.setdefault(name, value)
    return best


def compileiq_stage(result, retune: Callable[..., Any], budget: int, ptxas: Optional[Mapping[str, str]]) -> dict:
    """Runs the stage on ``result`` (the source tuning's); ``retune(configs=..., **options)``
    tunes a listed space with the caller's kernel, arguments and store. Returns the report
    (CompileIQ's search, and ``ab``: the finalists' report of the winner against the
    configuration without an ACF, with ``kept``)."""
    if ptxas is None:
        raise ArgumentError("controls=\"compileiq\" needs ptxas= (ACF files are read by a ptxas of their own version)")
    if budget < 1:
        raise ArgumentError(f"controls_budget = {budget}: give the number of candidate ACF files (1 or more)")
    best = full_config(result)
    best.pop("acf", None)

    def evaluate(paths):
        generation = retune(configs=[{**best, "acf": path} for path in paths], finalists=1)
        return times_of(generation.results, "acf", paths)

    report = _compileiq.search_controls(evaluate, budget, ptxas["version"])
    report["ab"], report["kept"] = None, False
    if report["best_acf"] is not None:
        final = retune(configs=[{**best, "acf": NO_ACF}, {**best, "acf": report["best_acf"]}],
                       finalists=2, finalists_within=1e9)
        report["ab"] = final.finalists
        report["kept"] = acf_wins(final.finalists, report["best_acf"])
    return report


def acf_wins(finalists: Optional[dict], acf: str) -> bool:
    """Whether the interleaved timing of the two finalists (the ACF's configuration and the
    one without) found the ACF's faster beyond the A/A control: as the leader, with the lead
    holding; as the contender, overtaking. A tie keeps no ACF."""
    if not finalists:
        return False
    leader_has_acf = finalists["configs"][0].get("acf") == acf
    verdict = finalists["report"]["verdict"]
    return verdict == ("lead_holds" if leader_has_acf else "overtaken")

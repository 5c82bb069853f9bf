"""Compiler controls on the GPU, in one call (issue 15): for the tuned Triton matmul (fp16,
4096³) and the tuned CUDA shared-memory matmul (examples/cuda/matmul_sram, through the
kerntune CLI), with the nvidia-cuda-nvcc wheel's ptxas 13.3:

1. the source search (its best configuration is the baseline);
2. a CompileIQ-guided search of a fixed budget (BUDGET, default 24) over the ACF files of
   that configuration, through the product's own stage (`controls="compileiq"`, and for
   CUDA `kerntune tune --controls compileiq`): each generation compiled by the compile pool,
   checked and timed by the benchmark worker; the fastest candidate then timed against the
   baseline by the finalists' interleaved A/B, with the baseline against itself as the A/A
   control;
3. a sweep of the known ptxas knobs (-O levels, the register limit, and for CUDA the
   "cutlass" kernel-name effect), each value timed against
   the baseline the same way.

A ratio below 1 is faster; "beats" means its whole interval lies below the A/A control's.
Needs in .device/wheels the wheels gpu/prepare.sh downloads (nvidia-cuda-nvcc 13.3,
compileiq and its dependencies: no internet there), and CompileIQ's ptxas 13.3 search space
at .device/compileiq/ptxas13.3.bin (or $KERNTUNE_CIQ_SEARCH_SPACE): without it step 2 is
skipped and says so. Stages (arguments, default both): triton, cuda. Prints a table last;
writes $OUT/controls.json.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.environ.get("OUT", tempfile.gettempdir())
BUDGET = int(os.environ.get("BUDGET", "24"))
SIZE = int(os.environ.get("SIZE", "4096"))
KERNTUNE = os.environ.get("KERNTUNE", os.path.join(ROOT, ".device", "kerntune"))
SPACE = os.path.join(ROOT, ".device", "compileiq", "ptxas13.3.bin")
if os.path.isfile(SPACE):
    os.environ.setdefault("KERNTUNE_CIQ_SEARCH_SPACE", SPACE)
sys.path.insert(0, os.path.join(ROOT, "examples", "triton"))

from kerntune import _compileiq, _ptxas  # noqa: E402

TRITON_KNOBS = [("opt_level", 3, 1), ("opt_level", 3, 2), ("maxnreg", 0, 128), ("maxnreg", 0, 168)]
CUDA_KNOBS = [("opt_level", 3, 1), ("opt_level", 3, 2), ("maxrregcount", 0, 64), ("maxrregcount", 0, 128), ("cutlass_name", False, True)]
rows = []


def times_of(results, key, values):
    """Per value of ``key``: ``(time_ms, None)`` of the result row whose config has it, or
    ``(None, reason)`` when that configuration failed or has no row."""
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


def controls_verdict(report):
    """The compiler-controls stage's A/B (the configuration without an ACF leads, the
    fastest candidate contends) as ``verdict`` words it, with the search's figures."""
    figures = dict(failed=report["failed"], search_best_ms=report["best_ms"], failures=report["failures"])
    if not report["ab"]:
        return {"error": "no interleaved timing: every candidate failed", **figures}
    ratio, control = report["ab"]["contenders"][0], report["ab"]["control"]
    return dict(ratio=ratio["ratio"], low=ratio["low"], high=ratio["high"], control_low=control["low"],
                control_high=control["high"], beats=report["kept"], **figures)


def verdict(result_rows, finalists, key, neutral, value):
    """The interleaved A/B's ratio (challenger / baseline), its interval, the control's, and
    whether the challenger beats the control; or, when one of the two failed its compile or
    its check, which one and why (there is no interleaved timing then)."""
    if not finalists:
        # A result row leaves out a control at the compiler's choice: the baseline's may lack the key.
        rows = [{**row, "config": {key: neutral, **row["config"]}} for row in result_rows]
        failed = [f"{key}={v}: {why}" for v, (_, why) in zip((neutral, value), times_of(rows, key, [neutral, value])) if why]
        return {"error": "no interleaved timing: " + ("; ".join(failed) or "see the store")}
    report = finalists["report"]
    leader_is_challenger = finalists["configs"][0].get(key) == value
    ratio = report["contenders"][0]
    if leader_is_challenger:  # the report times the baseline against the challenger: invert
        ratio = {"ratio": 1 / ratio["ratio"], "low": 1 / ratio["high"], "high": 1 / ratio["low"]}
    control = report["control"]
    beats = report["verdict"] == ("lead_holds" if leader_is_challenger else "overtaken")
    return dict(ratio=ratio["ratio"], low=ratio["low"], high=ratio["high"],
                control_low=control["low"], control_high=control["high"], beats=beats)


def fresh_db(name):
    """A store of this run's own: a verdict answered from an earlier run's is no measurement."""
    path = os.path.join(OUT, name)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path


def record(kernel, what, outcome, **extra):
    row = dict(kernel=kernel, what=what, **outcome, **extra)
    rows.append(row)
    print(json.dumps(row), flush=True)


def triton_stage(ptxas):
    import torch

    import kerntune
    import matmul

    torch.manual_seed(0)
    a = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
    b = torch.randn((SIZE, SIZE), device="cuda", dtype=torch.float16)
    c = torch.empty((SIZE, SIZE), device="cuda", dtype=torch.float16)
    answer = {"c_ptr": torch.matmul(a, b)}
    db = fresh_db("controls-triton.db")
    common = dict(answer=answer, db=db, progress=False, ptxas=ptxas["path"])
    source = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, matmul.PARAMS,
                           max_fevals=int(os.environ.get("SOURCE_FEVALS", "60")), **common)
    best = {k: v for k, v in source.best_config.items()}
    best.setdefault("maxnreg", 0)
    record("triton matmul", "source search", {"best_ms": source.best_time_ms, "config": best})

    def pair(key, neutral, value):
        configs = [{**best, key: neutral}, {**best, key: value}]
        result = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, configs=configs,
                               finalists=2, finalists_within=1e9, strategy="brute_force", **common)
        return verdict(result.results, result.finalists, key, neutral, value)

    if _compileiq_ready(ptxas):
        found = kerntune.tune(matmul.matmul_kernel, matmul.arguments(a, b, c), matmul.grid, configs=[best], finalists=1,
                              strategy="brute_force", controls="compileiq", controls_budget=BUDGET, **common).controls
        record("triton matmul", f"CompileIQ best of {found['evaluations']} ACFs", controls_verdict(found))
    for key, neutral, value in TRITON_KNOBS:
        record("triton matmul", f"{key}={value}", pair(key, neutral, value))


def kerntune_cli(spec, db, *extra):
    run = subprocess.run([KERNTUNE, "tune", spec, "--db", db, "--json", *extra], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"kerntune tune {spec}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def cuda_stage(ptxas):
    example = os.path.join(ROOT, "examples", "cuda", "matmul_sram")
    workdir = tempfile.mkdtemp(prefix="controls-cuda-")
    with open(os.path.join(example, "spec.toml")) as f:
        text = f.read()
    for name in os.listdir(example):
        if name != "spec.toml":
            os.symlink(os.path.join(example, name), os.path.join(workdir, name))
    db = fresh_db("controls-cuda.db")
    source = kerntune_cli(os.path.join(example, "spec.toml"), db, "--max-fevals", os.environ.get("SOURCE_FEVALS", "60"))
    best = source["best"]["config"]
    record("cuda matmul_sram", "source search", {"best_ms": source["best"].get("time_ms"), "config": best})
    fixed = "\n".join(f"{k} = [{json.dumps(v)}]" for k, v in best.items())
    params = re.sub(r"\[params\]\n(.*?\n)(?=\[)", lambda _: f"[params]\n{fixed}\n\n", text, count=1, flags=re.S)

    def spec_with(controls):
        path = os.path.join(workdir, "spec.toml")
        lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in controls.items())
        with open(path, "w") as f:
            f.write(f"{params}\n[compiler]\nptxas = {json.dumps(ptxas['path'])}\n[compiler.controls]\n{lines}\n")
        return path

    def pair(key, neutral, value):
        result = kerntune_cli(spec_with({key: [neutral, value]}), db, "--strategy", "brute_force", "--finalists", "2",
                              "--finalists-within", "1e9")
        return verdict(result["results"], result["finalists"], key, neutral, value)

    if _compileiq_ready(ptxas):
        found = kerntune_cli(spec_with({}), db, "--strategy", "brute_force", "--finalists", "1", "--controls", "compileiq",
                             "--controls-budget", str(BUDGET))["controls"]
        record("cuda matmul_sram", f"CompileIQ best of {found['evaluations']} ACFs", controls_verdict(found))
    for key, neutral, value in CUDA_KNOBS:
        record("cuda matmul_sram", f"{key}={value}", pair(key, neutral, value))


def _compileiq_ready(ptxas):
    why = _compileiq.available()
    if why is None:
        try:
            _compileiq.search_space(ptxas["version"])
        except _compileiq.CompileIQUnavailable as error:
            why = str(error)
    if why:
        record("-", "CompileIQ search skipped", {"why": why})
    return why is None


def main(stages):
    ptxas = _ptxas.resolve("pip")
    print(f"ptxas {ptxas['version']} at {ptxas['path']}", flush=True)
    failed = []
    for stage, run in (("triton", triton_stage), ("cuda", cuda_stage)):
        if stage in stages:
            try:
                run(ptxas)
            except Exception as error:  # one stage's failure must not hide the other's figures
                failed.append(stage)
                record(stage, "stage failed", {"error": f"{type(error).__name__}: {error}"[:2000]})
    with open(os.path.join(OUT, "controls.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("\n=== controls summary")
    print(f"{'kernel':<18}{'what':<34}{'ratio':>8}{'interval':>18}{'A/A control':>18}  beats")
    for row in rows:
        if "ratio" in row:
            print(f"{row['kernel']:<18}{row['what']:<34}{row['ratio']:>8.4f}  [{row['low']:.4f}, {row['high']:.4f}]"
                  f"  [{row['control_low']:.4f}, {row['control_high']:.4f}]  {'yes' if row['beats'] else 'no'}")
        elif "best_ms" in row:
            print(f"{row['kernel']:<18}{row['what']:<34}  baseline {row['best_ms']} ms  {row['config']}")
        else:
            print(f"{row['kernel']:<18}{row['what']:<34}  {row.get('why') or row.get('error') or row}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["triton", "cuda"]))

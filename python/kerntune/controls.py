"""CompileIQ's search over ACF files for a CUDA C kernel spec (the CLI's
``kerntune tune SPEC --controls compileiq``, and ``python -m kerntune.controls SPEC``).

The same stage as ``kerntune.tune(..., controls="compileiq")`` for Triton
(``kerntune._controls.compileiq_stage``), driven through the ``kerntune`` CLI: the spec's
source search gives the best configuration; each CompileIQ generation is a tuning of a copy
of the spec with every parameter fixed to that configuration and the candidates as the
values of ``[compiler.controls] acf`` (compiled by the compile pool, checked and timed by the
benchmark worker, stored in the same results store); the fastest candidate is then timed
against the configuration without an ACF by the finalists' interleaved A/B with its A/A
control, and kept only when it wins beyond that control.

The spec must name its ptxas (``[compiler] ptxas``): ACF files are read by a ptxas of their
own version (13.3 for CompileIQ 1.1). Needs Python 3.11 or newer (``tomllib``) and
``pip install compileiq`` with its ptxas search space (``$KERNTUNE_CIQ_SEARCH_SPACE``).

    python -m kerntune.controls SPEC [--budget N] [--db DB] [--kerntune PATH] [--config JSON] [--json]
        [more options of `kerntune tune`, for the source search]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from types import SimpleNamespace
from typing import Any, Optional

from kerntune import _compileiq, _ptxas
from kerntune._controls import compileiq_stage
from kerntune._errors import ArgumentError


def tune_spec(spec: str, budget: int = 24, db: Optional[str] = None, kerntune: Optional[str] = None,
              source_options: tuple = (), config: Optional[dict] = None) -> dict:
    """Tunes ``spec`` (``source_options``: more arguments of its ``kerntune tune``), or takes
    ``config`` as its best configuration (the CLI's `--controls compileiq` has just tuned
    it), then searches ACF files for that configuration with CompileIQ. Returns the best and
    the stage's report (``evaluations``, ``best_acf``, ``best_ms``, ``ab``, ``kept``)."""
    program = _kerntune_program(kerntune)
    document = _read_spec(spec)
    ptxas = _spec_ptxas(document, spec)
    why = _compileiq.available()
    if why:
        raise ArgumentError(why)
    folder = tempfile.mkdtemp(prefix="kerntune-controls-")
    store = db or os.path.join(folder, "results.db")  # without db, a store removed at the end
    try:
        if config is None:
            source = _cli(program, spec, store, *source_options)
        else:
            source = {"best": {"config": config}, "results": [{"config": config}]}
        best = source["best"]["config"] if source.get("best") else None
        if best is None:
            raise ArgumentError(f"{spec}: no configuration passed, so there is none to search controls for")
        for name in os.listdir(os.path.dirname(os.path.abspath(spec))):  # what the spec's paths name
            os.symlink(os.path.join(os.path.dirname(os.path.abspath(spec)), name), os.path.join(folder, name))

        def retune(configs, finalists=1, finalists_within=None):
            derived = os.path.join(folder, "controls-spec.toml")
            with open(derived, "w") as f:
                f.write(_with_fixed(document, best, [config["acf"] for config in configs]))
            extra = ["--strategy", "brute_force", "--finalists", str(finalists)]
            if finalists_within is not None:
                extra += ["--finalists-within", repr(float(finalists_within))]
            tuned = _cli(program, derived, store, *extra)
            return SimpleNamespace(results=tuned["results"], finalists=tuned.get("finalists"))

        result = SimpleNamespace(best_config=best, results=source["results"])
        report = compileiq_stage(result, retune, budget, ptxas)
        return {"spec": spec, "db": db, "best": source["best"], "ptxas": ptxas, "controls": report}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kerntune_program(path: Optional[str]) -> str:
    program = path or os.environ.get("KERNTUNE_BIN") or shutil.which("kerntune")
    if not program or not os.access(program, os.X_OK):
        raise ArgumentError("the kerntune CLI was not found: put it on PATH, or give --kerntune / $KERNTUNE_BIN")
    return program


def _read_spec(spec: str) -> dict:
    try:
        import tomllib
    except ImportError:
        raise ArgumentError("the controls search of a spec needs Python 3.11 or newer (tomllib)") from None
    try:
        with open(spec, "rb") as f:
            return tomllib.load(f)
    except OSError as error:
        raise ArgumentError(f"{spec}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ArgumentError(f"{spec}: not TOML: {error}") from None


def _spec_ptxas(document: dict, spec: str) -> dict:
    choice = document.get("compiler", {}).get("ptxas")
    if not choice:
        raise ArgumentError(f"{spec}: ACF files need a ptxas of their version: name it in [compiler] ptxas "
                            "(\"pip\" for the nvidia-cuda-nvcc==13.3.* wheel's, or a path)")
    if choice != "pip" and not os.path.isabs(choice):
        choice = os.path.join(os.path.dirname(os.path.abspath(spec)), choice)
    return _ptxas.resolve(choice)


def _cli(program: str, spec: str, db: str, *extra: str) -> dict:
    done = subprocess.run([program, "tune", spec, "--db", db, "--json", *extra], capture_output=True, text=True)
    if done.returncode != 0:
        raise ArgumentError(f"kerntune tune {os.path.basename(spec)}: {done.stderr.strip() or done.returncode}")
    return json.loads(done.stdout)


def _with_fixed(document: dict, config: dict, acfs: list) -> str:
    """The spec as TOML with each parameter and control fixed to ``config``'s value and
    ``[compiler.controls] acf`` set to ``acfs``."""
    fixed = json.loads(json.dumps(document))
    params = fixed.get("params", {})
    controls = fixed.setdefault("compiler", {}).setdefault("controls", {})
    for name, value in config.items():
        if name in params:
            params[name] = [value]
        elif name != "acf":
            controls[name] = [value]
    controls["acf"] = list(acfs)
    return _toml(fixed)


def _toml(document: dict) -> str:
    """A TOML text of ``document`` (tables, arrays of tables, and values as inline TOML)."""
    lines: list = []

    def table(prefix: str, values: dict):
        plain = {k: v for k, v in values.items() if not _is_table(v) and not _is_table_array(v)}
        if plain or not prefix:
            if prefix:
                lines.append(f"[{prefix}]")
            lines.extend(f"{_key(k)} = {_value(v)}" for k, v in plain.items())
            lines.append("")
        for k, v in values.items():
            name = f"{prefix}.{_key(k)}" if prefix else _key(k)
            if _is_table(v):
                table(name, v)
            elif _is_table_array(v):
                for item in v:
                    lines.append(f"[[{name}]]")
                    lines.extend(f"{_key(ik)} = {_value(iv)}" for ik, iv in item.items())
                    lines.append("")

    table("", document)
    return "\n".join(lines)


def _is_table(value: Any) -> bool:
    return isinstance(value, dict)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise ArgumentError(f"cannot write {value!r} as TOML")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kerntune.controls", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    parser.add_argument("--budget", type=int, default=24, help="candidate ACF files (default 24)")
    parser.add_argument("--db", help="the results store (default: a temporary one)")
    parser.add_argument("--kerntune", help="the kerntune CLI (default: $KERNTUNE_BIN, else on PATH)")
    parser.add_argument("--config", type=json.loads, help="the best configuration, as JSON (no source search then)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args, source_options = parser.parse_known_args(argv)
    try:
        report = tune_spec(args.spec, args.budget, args.db, args.kerntune, tuple(source_options), args.config)
    except (ArgumentError, _compileiq.CompileIQUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, default=str))
        return 0
    controls = report["controls"]
    print(f"best configuration: {report['best']['config']} ({report['best'].get('time_ms')} ms)")
    print(f"CompileIQ: {controls['evaluations']} ACF files in {controls['generations']} generations, "
          f"{controls['failed']} failed; fastest {controls['best_ms']} ms")
    print("kept: " + (controls["best_acf"] if controls["kept"] else "no ACF (none beat the A/A control)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

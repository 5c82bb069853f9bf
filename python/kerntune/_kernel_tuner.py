"""``kerntune.tune_kernel``: Kernel Tuner's entry point, for CUDA C kernels and numpy arrays,
so that a Kernel Tuner user can switch by changing the import.

It writes a kernel spec (see docs/spec.md) with the arguments saved as ``.npy`` files and
tunes it with kerntune's CUDA backend: NVRTC compile workers, a crash-isolated benchmark
worker, verification against ``answer`` on poisoned outputs, honest timing.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any, Optional, Sequence

from kerntune import _kerntune

_NUMPY_DTYPES = {
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
}

# Kernel Tuner arguments that change nothing here, accepted so that calls keep working.
_IGNORED = {"iterations", "verbose", "quiet", "simulation_mode", "observers", "log", "cache", "lang"}


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def _expressions(value, what: str) -> list[str]:
    """Kernel Tuner's problem sizes and grid divisors: numbers, strings, or lists of them."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if callable(item):
            raise TypeError(f"{what}: callables are not supported; write the expression as a string")
        out.append(str(item))
    return out


def tune_kernel(
    kernel_name: str,
    kernel_source: str,
    problem_size,
    arguments: Sequence[Any],
    tune_params: dict,
    grid_div_x=None,
    grid_div_y=None,
    grid_div_z=None,
    restrictions=None,
    answer: Optional[Sequence[Any]] = None,
    atol: float = 1e-6,
    rtol: float = 0.0,
    verify=None,
    block_size_names: Optional[Sequence[str]] = None,
    strategy: str = "default",
    strategy_options: Optional[dict] = None,
    compiler_options: Optional[Sequence[str]] = None,
    metrics: Optional[dict] = None,
    objective: str = "time",
    objective_higher_is_better: Optional[bool] = None,
    device: int = 0,
    db: Optional[str] = None,
    **ignored,
):
    """Tunes a CUDA C kernel with Kernel Tuner's arguments; returns ``(results, env)`` as
    Kernel Tuner does: one dict per configuration with its parameters, ``time`` (the median
    in ms, or the failure's name) and ``times``, and a dict describing the run.

    ``arguments`` are numpy arrays (device buffers) and numpy scalars, in the kernel's order;
    ``answer`` lists the expected contents of the outputs (None for the others), checked with
    ``atol``/``rtol``. ``metrics`` is ``{name: "expression"}`` over the parameters and
    ``time`` (ms); ``objective`` may name one of them. Strategy options ``max_fevals`` and
    ``time_limit`` (seconds) bound the search as in Kernel Tuner. A custom ``verify``
    function cannot run inside kerntune's GPU worker and is refused.
    """
    import numpy as np

    unknown = set(ignored) - _IGNORED
    if unknown:
        raise TypeError(f"tune_kernel() got unexpected arguments: {', '.join(sorted(unknown))}")
    if verify is not None:
        raise _kerntune.SpecError("a custom verify function is not supported: give answer with atol/rtol")
    if callable(restrictions):
        raise _kerntune.SpecError("restrictions must be strings (Python expressions), not a function")
    workdir = tempfile.mkdtemp(prefix="kerntune-kt-")
    source = kernel_source
    if os.path.isfile(str(kernel_source)):
        with open(kernel_source) as f:
            source = f.read()
    with open(os.path.join(workdir, "kernel.cu"), "w") as f:
        f.write(source)

    lines = []
    restriction_list = [restrictions] if isinstance(restrictions, str) else list(restrictions or [])
    lines.append("restrictions = " + json.dumps(restriction_list))
    lines += ["", "[kernel]", f"name = {json.dumps(kernel_name)}", 'source = "kernel.cu"']
    if compiler_options:
        lines.append("options = " + json.dumps(list(compiler_options)))
    lines += ["", "[params]"]
    for name, values in tune_params.items():
        lines.append(f"{name} = [{', '.join(_toml_value(v) for v in values)}]")
    lines += ["", "[launch]", "problem_size = " + json.dumps(_expressions(problem_size, "problem_size"))]
    for axis, div in (("x", grid_div_x), ("y", grid_div_y), ("z", grid_div_z)):
        if div is not None:
            lines.append(f"grid_div_{axis} = " + json.dumps(_expressions(div, f"grid_div_{axis}")))
    if block_size_names:
        lines.append("block_size_names = " + json.dumps(list(block_size_names)))

    outputs = []
    for index, argument in enumerate(arguments):
        name = f"arg{index}"
        lines += ["", "[[args]]", f'name = "{name}"']
        array = np.asarray(argument)
        dtype = _NUMPY_DTYPES.get(array.dtype.name)
        if dtype is None:
            raise _kerntune.SpecError(f"argument {index}: numpy dtype {array.dtype} is not supported")
        lines.append(f'dtype = "{dtype}"')
        if array.ndim == 0:
            lines.append(f"value = {_toml_value(array.item())}")
            continue
        path = os.path.join(workdir, f"{name}.npy")
        np.save(path, np.ascontiguousarray(array))
        lines += [f"size = {array.size}", f'init = {{ file = "{name}.npy" }}']
        expected = None if answer is None else answer[index]
        if expected is not None:
            lines.append("output = true")
            np.save(os.path.join(workdir, f"{name}.expected.npy"), np.ascontiguousarray(np.asarray(expected, dtype=array.dtype)))
            outputs.append(name)
    if outputs:
        files = ", ".join(f'{n} = "{n}.expected.npy"' for n in outputs)
        lines += ["", "[verify]", f"reference = {{ outputs = {{ {files} }} }}", f"atol = {float(atol)!r}", f"rtol = {float(rtol)!r}"]
    if metrics and objective in metrics:
        if callable(metrics[objective]):
            raise _kerntune.SpecError(f"objective '{objective}' must be an expression string over the parameters and time")
        higher = objective_higher_is_better
        lines += ["", "[objective]", f"name = {json.dumps(objective)}", f"expression = {json.dumps(str(metrics[objective]))}"]
        if higher is not None:
            lines.append(f"higher_is_better = {'true' if higher else 'false'}")
    spec_path = os.path.join(workdir, "spec.toml")
    with open(spec_path, "w") as f:
        f.write("\n".join(lines) + "\n")

    options = dict(strategy_options or {})
    max_fevals = options.pop("max_fevals", None)
    time_limit = options.pop("time_limit", None)
    from kerntune._tune import default_budget, worker_env

    text = _kerntune.tune_spec(
        spec_path,
        [sys.executable, "-m", "kerntune._worker"],
        list(worker_env().items()),
        strategy,
        json.dumps(options),
        default_budget(strategy, max_fevals, time_limit, None),
        time_limit,
        None,
        0,
        db,
        False,
        os.cpu_count() or 4,
        device,
        None,
    )
    data = json.loads(text)
    failures = {"compile_failed": "CompilationFailedConfig", "invalid_config": "InvalidConfig"}
    results = []
    for entry in data["results"]:
        row = dict(entry["config"])
        ok = entry["status"] in ("ok", "early_stopped")
        row["time"] = entry["time_ms"] if ok else failures.get(entry["status"], "RuntimeFailedConfig")
        row["times"] = entry["samples"]
        row["status"] = entry["status"]
        if ok and metrics:
            for name, metric in metrics.items():
                values = {**entry["config"], "time": entry["time_ms"]}
                row[name] = metric(values) if callable(metric) else eval(str(metric), {"__builtins__": {}}, values)
        results.append(row)
    env = {"strategy": strategy, "db": data["db"], "evaluations": data["evaluations"], "stop": data["stop"], "best": data["best"]}
    return results, env

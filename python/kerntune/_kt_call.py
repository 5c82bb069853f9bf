"""One ``tune_kernel`` call's arguments, checked and turned into the Rust tuner's job: a
kernel spec (docs/spec.md) with the arguments saved as ``.npy`` files, and the search
settings; then the rows of Kernel Tuner's results list made from the run's answer.
``kerntune._kernel_tuner`` holds the entry points that make a call.
"""

from __future__ import annotations

import glob
import hashlib
import inspect
import json
import os
import sys
import time
from collections import Counter

from kerntune import _kerntune, _kt_cache
from kerntune._errors import ArgumentError, ArgumentTypeError, check_device, check_strategy, compile_target
from kerntune._kt_arguments import callable_text, constants, metrics_of, names_in, options, restrictions_of, source_of
from kerntune._kt_conventions import Conventions, describe, evaluate, restriction_of_threads
from kerntune._request import KERNEL_TUNER_DEFAULTS as _DEFAULTS, request as _request
from kerntune._results import NoValidConfigError
from kerntune.observers.nvml import OBSERVABLES
from kerntune.util import error_of, get_best_config, get_config_string

_NUMPY_DTYPES = {"float16": "f16", "float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "uint8": "u8"}
# Kernel Tuner's objectives whose direction it knows.
_HIGHER_IS_BETTER = {"time": False, "energy": False, "fitness": True, "cost": False, "loss": False,
                     "nvml_energy": False, "nvml_power": False, "edp": False, "power": False}
# Objectives kerntune measures itself (see kerntune.observers.nvml), besides the time.
_MEASURED_OBJECTIVES = {"energy", "edp", "power", *OBSERVABLES, *OBSERVABLES.values()}
_COSTS = {"compile_time": "compile_s", "verification_time": "verify_s", "benchmark_time": "benchmark_s",
          "framework_time": "framework_s", "strategy_time": "strategy_s"}


def direction(objective, higher_is_better, metrics) -> bool:
    """Whether higher values of the objective are better: as given, or Kernel Tuner's
    default for the objectives it knows."""
    if not isinstance(objective, str):
        raise ArgumentTypeError("objective: give one objective's name ('time', 'nvml_energy' or a key of metrics)")
    if objective != "time" and objective not in _MEASURED_OBJECTIVES and not (isinstance(metrics, dict)
                                                                             and objective in metrics):
        raise ArgumentError(f"objective '{objective}' is neither 'time', a measured value ('nvml_energy', "
                            "'nvml_power', 'energy', 'edp'...) nor a key of metrics")
    if higher_is_better is not None:
        if not isinstance(higher_is_better, bool):
            raise ArgumentTypeError("objective_higher_is_better: give True or False")
        return higher_is_better
    if objective in _HIGHER_IS_BETTER:
        return _HIGHER_IS_BETTER[objective]
    if objective.endswith(("/s", "/W", "/J")):
        return True
    raise ArgumentError(f"objective '{objective}': give objective_higher_is_better=True or False")


class Call:
    """One call's arguments, checked and turned into the Rust tuner's job."""

    def __init__(self, kernel_name, kernel_source, problem_size, arguments, params, grid_div, restrictions, answer,
                 atol, rtol, verify, smem_args, cmem_args, compiler_options, defines, block_size_names, iterations,
                 metrics, objective, workdir, observed=None):
        if not isinstance(kernel_name, str) or not kernel_name.strip():
            raise ArgumentTypeError("kernel_name: give the name of the __global__ function (a string)")
        self.kernel_name = kernel_name
        self.params = params
        self.workdir = workdir
        self.metrics = metrics_of(metrics)
        self.objective = objective
        # Kernel Tuner's result key -> kerntune's metric key, of what observers asked for.
        self.observed = dict(observed or {})
        source, self.include_dirs = source_of(kernel_source)
        self.conventions = Conventions(kernel_name, source, problem_size, grid_div, block_size_names, defines,
                                       smem_args, list(params))
        self.problem_size = problem_size
        self.restrictions = restrictions_of(restrictions)
        self.arrays, self.args = self._arguments(arguments)
        # The expected outputs enter the results' identity (the inputs' contents do not:
        # new inputs come with a new answer).
        self.answer_digest = hashlib.blake2b(digest_size=16)
        self.answer, self.verify = self._answer(answer, verify, atol, rtol)
        self.atol, self.rtol = atol, rtol
        self.constants = constants(cmem_args)
        self.compiler_options = options(compiler_options) + [f"--include-path={d}" for d in self.include_dirs]
        if not isinstance(iterations, int) or iterations < 1:
            raise ArgumentError(f"iterations={iterations!r}: give a positive int (timed runs per configuration)")
        self.iterations = iterations
        template = source if isinstance(source, str) else callable_text(source)
        with open(os.path.join(workdir, "kernel.cu"), "w") as f:
            f.write(template)
        self.identity = {
            "problem_size": describe(problem_size), "grid_div": describe(list(grid_div)),
            "block_size_names": describe(block_size_names), "defines": describe(defines),
            "smem_args": describe(smem_args), "cmem_args": sorted(self.constants_names),
            "verify": describe(verify), "answer": self.answer_digest.hexdigest(),
        }

    @property
    def constants_names(self):
        return [name for name, _ in self.constants]

    def _arguments(self, arguments):
        import numpy as np

        if not isinstance(arguments, (list, tuple)) or not arguments:
            raise ArgumentTypeError("arguments: give the kernel's arguments as a list of numpy arrays and numpy scalars")
        arrays, args = [], []
        for index, argument in enumerate(arguments):
            name = f"arg{index}"
            if isinstance(argument, np.ndarray):
                dtype = _NUMPY_DTYPES.get(argument.dtype.name)
                if dtype is None:
                    raise ArgumentTypeError(f"arguments[{index}]: numpy dtype {argument.dtype} is not supported "
                                            f"({', '.join(_NUMPY_DTYPES)})")
                np.save(os.path.join(self.workdir, f"{name}.npy"), np.ascontiguousarray(argument))
                args.append({"name": name, "dtype": dtype, "size": int(argument.size), "init": {"file": f"{name}.npy"}})
                arrays.append(argument)
            elif isinstance(argument, np.generic):
                dtype = _NUMPY_DTYPES.get(argument.dtype.name)
                if dtype is None:
                    raise ArgumentTypeError(f"arguments[{index}]: numpy scalar type {argument.dtype} is not supported "
                                            f"({', '.join(_NUMPY_DTYPES)})")
                args.append({"name": name, "dtype": dtype, "value": argument.item()})
                arrays.append(None)
            else:
                raise ArgumentTypeError(
                    f"arguments[{index}]: {type(argument).__name__}; give numpy arrays, and numpy scalars such as "
                    "numpy.int32(n) or numpy.float32(x) so the kernel receives the right type")
        return arrays, args

    def _answer(self, answer, verify, atol, rtol):
        import numpy as np

        if verify is not None and not callable(verify):
            raise ArgumentTypeError("verify: give a function verify(answer, result, atol=None) -> bool")
        if answer is None:
            if verify is not None:
                # Kernel Tuner's reading: without an answer every array may be an output, so
                # each is restored before the checked run and handed to verify afterwards.
                for index, argument in enumerate(self.arrays):
                    if argument is not None:
                        self.args[index].update(output=True, poison=False)
            return None, verify
        if not isinstance(answer, (list, tuple)) or len(answer) != len(self.args):
            raise ArgumentError(f"answer: give a list of {len(self.args)} entries (one per argument, None for inputs)")
        if not isinstance(atol, (int, float)) or not isinstance(rtol, (int, float)):
            raise ArgumentTypeError("atol and rtol: give numbers")
        for index, expected in enumerate(answer):
            if expected is None:
                continue
            argument = self.arrays[index]
            if argument is None and verify is not None:
                continue  # a scalar: the custom check receives None for it, as in Kernel Tuner
            if argument is None:
                raise ArgumentError(f"answer[{index}]: argument {index} is a scalar, which the kernel cannot write; "
                                    "give None there")
            self.args[index]["output"] = True
            if verify is not None:
                # Kernel Tuner resets outputs to their initial contents before the checked
                # run, and a custom check may read every element: no poison.
                self.args[index]["poison"] = False
                continue
            expected = np.asarray(expected)
            if expected.size != argument.size:
                raise ArgumentError(f"answer[{index}] has {expected.size} elements; argument {index} has {argument.size}")
            expected = np.ascontiguousarray(expected.astype(argument.dtype))
            np.save(os.path.join(self.workdir, f"arg{index}.expected.npy"), expected)
            self.answer_digest.update(expected.tobytes())
        if verify is None and not any(a is not None for a in answer):
            raise ArgumentError("answer: every entry is None; give the expected contents of at least one output")
        return list(answer), verify

    def spec(self, max_threads: int, max_shared: int, higher_is_better: bool) -> dict:
        restrictions = list(self.restrictions)
        threads = restriction_of_threads(self.conventions.block_names, list(self.params), max_threads)
        if threads:
            restrictions.append(threads)
        if isinstance(self.conventions.shared, str):
            restrictions.append(f"({self.conventions.shared}) <= {max_shared}")
        spec = {
            "restrictions": restrictions,
            "kernel": {"name": self.kernel_name, "source": "kernel.cu", "options": self.compiler_options},
            "params": self.params,
            "args": self.args,
            "timing": {"min_samples": self.iterations, **({"energy": True} if self.observed else {})},
            "kernel_tuner": self.identity,
        }
        if self.answer is not None and self.verify is None:
            outputs = {f"arg{i}": f"arg{i}.expected.npy" for i, e in enumerate(self.answer) if e is not None}
            spec["verify"] = {"reference": {"outputs": outputs}, "atol": float(self.atol), "rtol": float(self.rtol)}
        expression = self.metrics.get(self.objective)
        measured = {"time"} | _MEASURED_OBJECTIVES
        if self.objective in _MEASURED_OBJECTIVES and self.objective not in self.metrics:
            spec["objective"] = {"name": self.objective, "expression": self.objective,
                                 "higher_is_better": higher_is_better}
        elif isinstance(expression, str) and names_in(expression) <= set(self.params) | measured:
            spec["objective"] = {"name": self.objective, "expression": expression, "higher_is_better": higher_is_better}
        return spec

    def job(self, spec: dict, db, parallel) -> dict:
        from kerntune._job import worker_env

        workers = parallel if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel > 0 else None
        return {
            "spec": spec,
            "base": self.workdir,
            "worker": [sys.executable, "-m", "kerntune._worker"],
            "worker_env": list(worker_env().items()),
            "request": _request(compile_workers=workers, db=None if db is None else os.fspath(db)),
        }

    def compile(self, arch, db, parallel, higher_is_better):
        target = compile_target(arch)
        arch = target["arch"]
        spec = self.spec(target["max_threads_per_block"], target["max_shared_per_block_optin"], higher_is_better)
        job = self.job(spec, db, parallel)
        job["request"]["arch"] = arch
        rows = json.loads(_kerntune.compile_kernel_tuner(json.dumps(job), self.conventions.instance))
        compiled = sum(row["status"] == "compiled" for row in rows)
        if compiled == 0:
            raise NoValidConfigError(_no_valid_message(rows, "compiled"))
        env = {"arch": arch, "compiled": compiled, "configurations": len(rows), "db": job["request"].get("db") or _kerntune.default_db()}
        return rows, env

    def tune(self, *, device, strategy, strategy_options, seed, cache, db, parallel, higher_is_better, verbose, quiet,
             started, devices=None, ray=None, ray_gpus=None, transfer=None):
        from kerntune._job import RayCheck, check_ray_gpus

        ray_gpus = check_ray_gpus(ray_gpus, ray, devices)
        if ray is not None:  # before the GPU: an unreachable cluster is one line, GPU or not
            ray_gpus = RayCheck(ray, ray_gpus).bench_gpus()
        if devices is not None:
            devices = ",".join(str(d) for d in devices) if isinstance(devices, (list, tuple)) else str(devices)
            first = devices.split(",")[0].strip()
            device = int(first) if first.isdigit() else 0  # the Rust side checks the whole list
        check_device(device)
        info = json.loads(_kerntune.device_info(device))
        if not quiet:
            print(f"Using: {info['name']}")
        spec = self.spec(info["max_threads_per_block"], info["max_shared_per_block_optin"], higher_is_better)
        if strategy_options is not None and not isinstance(strategy_options, dict):
            raise ArgumentTypeError("strategy_options: give a dict such as {'max_fevals': 100}")
        options = dict(strategy_options or {})
        max_fevals = options.pop("max_fevals", None)
        time_limit = options.pop("time_limit", None)
        strategy = check_strategy(strategy, _DEFAULTS["strategy"])
        job = self.job(spec, db, parallel)
        if ray is not None:
            from kerntune import ray_worker

            env = [n for n, _ in job["worker_env"]]
            job["compile_worker"] = ray_worker.command(sys.executable, ray, job["worker"], env=env)
            if ray_gpus:
                # Every file a benchmark worker reads: the arguments and the expected outputs.
                files = sorted(glob.glob(os.path.join(self.workdir, "*.npy")))
                job["bench_worker"] = ray_worker.command(sys.executable, ray, job["worker"], env=env, ship=files, gpus=1)
                job["bench_workers"] = ray_gpus
        path, document = None, None
        if cache is not None:
            path = _kt_cache.cache_path(cache)
            document = _kt_cache.read(path)
            if document is not None:
                _kt_cache.check(document, path, self.kernel_name, list(self.params), self._cached_size(), info["name"])
        outputs_dir = None
        if self.verify is not None:
            outputs_dir = os.path.join(self.workdir, "outputs")
            os.makedirs(outputs_dir)
        job["request"].update(_request(strategy=strategy, strategy_options=options, max_fevals=max_fevals,
                                       time_limit=time_limit, seed=None if seed is None else int(seed),
                                       devices=devices or str(device), transfer=transfer))
        job["tune"] = {"cache": document, "outputs_dir": outputs_dir}
        text = _kerntune.tune_kernel_tuner(json.dumps(job), self.conventions.instance,
                                           self._check if self.verify is not None else None, self.constants)
        data = json.loads(text)
        cached = (document or {}).get("cache", {})
        # Kernel Tuner lists results in the order it evaluated them, which for brute force
        # is the order of the space; kerntune's arrive in parallel. The space's order it is.
        data["results"].sort(key=self._position)
        results = [self._row(entry, cached) for entry in data["results"]]
        if verbose:
            for row, entry in zip(results, data["results"]):
                if entry["status"] not in ("ok", "early_stopped"):
                    print(f"skipping config {get_config_string(entry['config'])}: {entry['reason']}")
        best = get_best_config(results, self.objective, higher_is_better)
        if best is None:
            raise NoValidConfigError(_no_valid_message(data["results"], "valid"))
        if path is not None:
            self._write_cache(path, document, results, info["name"])
        if not quiet:
            print(f"best performing configuration:\n{get_config_string(best, list(self.params) + [self.objective])}")
        env = {
            "device_name": info["name"], "best_config": best, "objective": self.objective, "strategy": strategy,
            "db": data["db"], "tuning": data.get("tuning"), "evaluations": data["evaluations"], "from_store": data["from_store"],
            "stop": data["stop"], "best": data["best"], "shape": data.get("shape"),
            "iterations": self.iterations, "compiler_options": self.compiler_options,
            "overhead_time": 1000 * (time.perf_counter() - started),
        }
        return results, env

    def _cached_size(self):
        size = self.problem_size
        return "callable" if callable(size) else describe(size)

    def _check(self, values, files):
        """The caller's verify on the outputs the benchmark worker wrote: None when they
        pass, else why not."""
        import numpy as np

        result = [None] * len(self.arrays)
        for position, path in files:
            array = self.arrays[position]
            result[position] = np.fromfile(path, dtype=array.dtype).reshape(array.shape)
        verify = self.verify
        accepts_atol = "atol" in inspect.signature(verify).parameters
        passed = verify(self.answer, result, atol=self.atol) if accepts_atol else verify(self.answer, result)
        return None if passed else "the custom verify function returned False"

    def _position(self, entry) -> tuple:
        """A result's place in the space: its values' positions in ``tune_params``, in order."""
        config = entry["config"]
        return tuple(values.index(config[name]) if config.get(name) in values else len(values)
                     for name, values in self.params.items())

    def _row(self, entry: dict, cached: dict) -> dict:
        row = dict(entry["config"])
        valid = entry["status"] in ("ok", "early_stopped")
        row["time"] = entry["time_ms"] if valid else error_of(entry["status"])
        row["times"] = entry["samples"]
        if entry["status"] == "early_stopped":
            # Timed fewer times than asked and clearly slower than the best: marked as in
            # kerntune's own exports, so a replay of the cache knows it cannot win.
            row["early_stopped"] = True
        if valid and row["time"] is None:
            # Measured by Kernel Tuner: its cache entry has the time.
            measured = cached.get(_kt_cache.key_of(row, list(self.params)), {})
            row["time"], row["times"] = measured.get("time"), measured.get("times", [])
        costs = entry.get("costs") or {}
        for name, ours in _COSTS.items():
            row[name] = 1000 * costs.get(ours, 0.0)
        row["timestamp"] = time.strftime("%Y-%m-%d %H:%M:%S")
        # What observers asked for, under Kernel Tuner's keys; absent where not measured.
        observables = entry.get("observables") or {}
        for name, key in self.observed.items():
            if valid and key in observables:
                row[name] = observables[key]
        if valid and self.objective in _MEASURED_OBJECTIVES and self.objective not in self.metrics:
            row[self.objective] = entry.get("objective")
        if valid:
            values = dict(row)
            for name, metric in self.metrics.items():
                row[name] = values[name] = self._metric(name, metric, values)
        row["status"] = entry["status"]
        # Input sets the outputs matched the reference on: 0 unchecked (or wrong), 1 the call's arrays.
        row["verified_sets"] = entry.get("verified_sets")
        if not valid:
            row["reason"] = entry["reason"]
        return row

    def _metric(self, name, metric, values):
        """One metric of a result; a function that reads a key the result lacks is one line
        saying which, and why it is absent where kerntune knows."""
        if not callable(metric):
            return evaluate(metric, values, f"metrics['{name}']")
        try:
            return metric(values)
        except KeyError as error:
            key = error.args[0] if error.args else None
            if key in OBSERVABLES and key not in self.observed:
                why = f"; measure it with observers=[NVMLObserver(['{key}'])] (kerntune.observers.nvml)"
            elif key in OBSERVABLES:
                why = ("; NVML does not report it on this GPU, or the store answered with a measurement "
                       "taken without it (db= a fresh store measures again)")
            else:
                why = f"; a result holds {', '.join(values)}"
            raise ArgumentError(f"metrics['{name}'] reads {key!r}, which the result of "
                                f"{get_config_string(values, list(self.params))} lacks{why}") from error

    def _write_cache(self, path, document, results, device_name):
        header = {
            "device_name": device_name, "kernel_name": self.kernel_name, "problem_size": self._cached_size(),
            "tune_params_keys": list(self.params), "tune_params": self.params, "objective": self.objective,
            "cache": (document or {}).get("cache", {}),
        }
        _kt_cache.write(path, header, results)


def _no_valid_message(entries, what: str) -> str:
    """Why no configuration was valid: the most common reason, and a hint."""
    reasons = Counter(_first_line(e.get("reason") or e.get("status")) for e in entries)
    reason, count = reasons.most_common(1)[0] if reasons else ("the space is empty", 0)
    hint = ""
    low = reason.lower()
    if "cumodulegetglobal" in low:
        hint = " Hint: a name in cmem_args is not a __constant__ variable of the kernel's source."
    elif "names no __global__" in low or "finding the kernel" in low or "name expression" in low:
        hint = (" Hint: the kernel's name was not found in the module; check kernel_name (a templated kernel is "
                "named with its arguments, e.g. 'kernel<float, 4>').")
    elif "threads per block" in low or "shared memory" in low:
        hint = " Hint: the blocks are too large for the device; restrict the block sizes."
    elif "verify" in low or "elements wrong" in low:
        hint = " Hint: every output differed from answer; check answer, atol and the output arguments."
    return f"no configuration is {what}: {count} of {len(entries)} failed with: {reason}.{hint}"


def _first_line(text) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""

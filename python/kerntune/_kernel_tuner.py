"""``kerntune.tune_kernel`` and ``kerntune.run_kernel``: Kernel Tuner's entry points, for
CUDA C kernels and numpy arrays, so that a Kernel Tuner user switches by changing the
import. docs/kernel-tuner.md lists every argument and what it means here.

The call becomes one JSON job for the Rust tuner (``_kt_call``): a kernel spec (docs/spec.md)
with the arguments saved as ``.npy`` files, and the search settings. Kernel Tuner's conventions for
each configuration's source and launch (``_kt_conventions``) and a custom ``verify`` run
in this process, called back from the Rust run loop; everything else (NVRTC compile
workers, the crash-isolated benchmark worker, the store) is kerntune's.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time

from kerntune import _kerntune, _kt_cache, _shapes
from kerntune._errors import ArgumentError, ArgumentTypeError, check_search, check_strategy, warn_unchecked
from kerntune._kt_arguments import restrictions_of
from kerntune._kt_call import Call, direction
from kerntune._kt_conventions import describe
from kerntune._request import KERNEL_TUNER_DEFAULTS as _DEFAULTS
from kerntune._results import NoValidConfigError
from kerntune.observers.nvml import OBSERVABLES, check_tunables, observed_keys
from kerntune.util import error_of, get_best_config, get_config_string

_LANGS = ("cuda", "cupy", "nvcuda")

#: ``tune_kernel``'s arguments that each size of a many-shape run gives its own.
_PER_SIZE = ("problem_size", "arguments", "answer", "shapes", "share")


def _found(result) -> _shapes.Found:
    """What one size's ``(results, env)`` gives a many-shape run."""
    _, env = result
    best = (env.get("best") or {}).get("config")
    return _shapes.Found(env.get("shape"), best, env.get("tuning"))


def tune_kernel(kernel_name, kernel_source, problem_size, arguments, tune_params, grid_div_x=None, grid_div_y=None,
                grid_div_z=None, restrictions=None, answer=None, atol=1e-6, verify=None, verbose=False, lang=None,
                device=0, platform=0, smem_args=None, cmem_args=None, texmem_args=None, compiler=None,
                compiler_options=None, defines=None, log=None, iterations=7, block_size_names=None, quiet=False,
                strategy=None, strategy_options=None, cache=None, metrics=None, simulation_mode=None, parallel=None,
                observers=None, objective=None, objective_higher_is_better=None, objectives=None, seed=None, *,
                rtol=1e-5, compile_only=False, arch=_DEFAULTS["arch"], db=None, devices=None, ray=None, ray_gpus=None,
                shapes=None, share=True):
    """Tunes a CUDA C kernel with Kernel Tuner 1.5's arguments and returns ``(results,
    env)`` as Kernel Tuner does: one dict per configuration evaluated (its parameters,
    ``time`` in ms or the failure's name, ``times``, the costs in ms, the metrics) and a
    dict describing the run (``best_config``, ``device_name``...).

    kerntune's own keywords: ``rtol`` (with ``atol``, for ``answer``; 1e-5 as in
    ``numpy.allclose``, which Kernel Tuner uses), ``db`` (the results
    store), and ``compile_only=True`` with ``arch`` ("sm_90"), which compiles every
    configuration without a GPU and returns one dict per configuration with its
    parameters, ``status`` ("compiled" or the failure) and ``symbol`` (the kernel's name
    in the cubin). ``devices`` ("all" or "0,1": one benchmark worker per GPU, all of one
    model; ``device`` when not given), ``ray`` (a Ray cluster's address: the compile
    workers run there as actors; ``pip install 'kerntune[ray]'``) and ``ray_gpus`` (a count
    or ``"all"``: the benchmark workers run on that many of the cluster's GPUs, one each,
    shipped the arguments' files; with ``verify``, the outputs it reads are written where
    they run, so those nodes share this machine's file system) are ``kerntune.tune``'s.
    Ctrl-C, tuning or compiling, raises ``KeyboardInterrupt`` within a fraction of a second
    and keeps in ``db`` what was measured or compiled: the same call resumes from there.

    ``shapes`` (a list of dicts of the variables that differ, ``[{"n": 2**20}, {"n":
    2**24}]``) tunes the kernel at every size, each learning from the size tuned nearest to
    it (see ``kerntune.tune``); ``problem_size``, ``arguments`` and ``answer`` may then be
    functions of a size's variables (``arguments=lambda n: [...]``). Returns a
    ``kerntune.ShapeResults`` whose values are each size's ``(results, env)``;
    ``share=False`` tunes each size on its own.
    """
    if shapes is not None and not isinstance(shapes, _shapes.OneShape):
        given = {name: value for name, value in locals().items() if name not in _PER_SIZE}
        makers = {"problem_size": problem_size, "arguments": arguments, "answer": answer}
        sizes = _shapes.check(shapes, makers, "arguments=lambda n: [...]")

        def one_size(size_arguments, one, problem_size, answer):
            return tune_kernel(problem_size=problem_size, arguments=size_arguments, answer=answer, shapes=one,
                               **given)

        def per_size(shape):
            value = lambda v: v(**shape) if callable(v) else v  # noqa: E731
            return {"problem_size": value(problem_size), "answer": value(answer)}

        made = arguments if callable(arguments) else (lambda **_: arguments)
        return _shapes.run(one_size, made, sizes, share, kernel_name, per_size, _found)
    transfer = shapes.transfer if isinstance(shapes, _shapes.OneShape) else None
    started = time.perf_counter()
    _start_log(kernel_name, log)
    _check_unsupported(lang, objectives, texmem_args, compiler, strategy)
    check_search(strategy, strategy_options, _DEFAULTS["strategy"], kernel_tuner=True)
    observed = observed_keys(observers)
    check_tunables(tune_params if isinstance(tune_params, dict) else {})
    params = _tune_params(tune_params)
    objective = objective or "time"
    objective_higher_is_better = direction(objective, objective_higher_is_better, metrics)
    if objective in OBSERVABLES:
        observed[objective] = OBSERVABLES[objective]
    if simulation_mode:
        return _simulate(kernel_name, problem_size, params, restrictions, strategy, cache, objective,
                         objective_higher_is_better, quiet)
    workdir = tempfile.mkdtemp(prefix="kerntune-kt-")
    try:
        call = Call(kernel_name, kernel_source, problem_size, arguments, params, (grid_div_x, grid_div_y, grid_div_z),
                     restrictions, answer, atol, rtol, verify, smem_args, cmem_args, compiler_options, defines,
                     block_size_names, iterations, metrics, objective, workdir, observed)
        if compile_only:
            return call.compile(arch, db, parallel, objective_higher_is_better)
        if answer is None and verify is None:
            warn_unchecked(kernel_name, "neither answer nor verify is given",
                           "give answer= (the expected contents of each output, None for inputs) to check them", 2)
        return call.tune(device=device, strategy=strategy, strategy_options=strategy_options, seed=seed, cache=cache,
                         db=db, parallel=parallel, higher_is_better=objective_higher_is_better, verbose=verbose,
                         quiet=quiet, started=started, devices=devices, ray=ray, ray_gpus=ray_gpus, transfer=transfer)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_kernel(kernel_name, kernel_source, problem_size, arguments, params, grid_div_x=None, grid_div_y=None,
               grid_div_z=None, lang=None, device=0, platform=0, smem_args=None, cmem_args=None, texmem_args=None,
               compiler=None, compiler_options=None, defines=None, block_size_names=None, quiet=False, log=None):
    """Compiles the kernel for one configuration (``params``: one value per parameter),
    runs it once on the GPU and returns every argument after the run, as Kernel Tuner
    does: numpy arrays for arrays, the scalars as given."""
    if not isinstance(params, dict) or not params:
        raise ArgumentTypeError("params: give a dict of parameter name -> one value")
    _start_log(kernel_name, log)
    _check_unsupported(lang, None, texmem_args, compiler, None)
    one = _tune_params({name: [value] for name, value in params.items()})
    workdir = tempfile.mkdtemp(prefix="kerntune-run-")
    try:
        import numpy as np

        outputs = {}
        arrays = [a for a in arguments if isinstance(a, np.ndarray)]

        def keep(answer, result_host, atol=None):
            outputs.update(enumerate(result_host))
            return True

        answer = [a if isinstance(a, np.ndarray) else None for a in arguments]
        call = Call(kernel_name, kernel_source, problem_size, arguments, one, (grid_div_x, grid_div_y, grid_div_z),
                     None, answer if arrays else None, 0.0, 0.0, keep if arrays else None, smem_args, cmem_args,
                     compiler_options, defines, block_size_names, 1, None, "time", workdir)
        call.tune(device=device, strategy=None, strategy_options=None, seed=None, cache=None,
                  db=os.path.join(workdir, "run.db"), parallel=None, higher_is_better=False, verbose=False,
                  quiet=True, started=time.perf_counter())
        return [outputs.get(i) if outputs.get(i) is not None else a for i, a in enumerate(arguments)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _start_log(kernel_name, level):
    """Kernel Tuner's ``log``: a logging level, to a file named after the kernel and the time."""
    if level:
        logging.basicConfig(filename=f"{kernel_name}{time.strftime('%Y%m%d-%H:%M:%S')}.log", level=level)


def _check_unsupported(lang, objectives, texmem_args, compiler, strategy):
    if lang is not None and (not isinstance(lang, str) or lang.lower() not in _LANGS):
        raise ArgumentError(f"lang={lang!r}: kerntune tunes CUDA C; use lang='CUDA' (or 'cupy', 'nvcuda', or leave it out)")
    if objectives:
        raise ArgumentError("objectives: kerntune optimises one objective; give objective= and objective_higher_is_better=")
    if texmem_args:
        raise ArgumentError("texmem_args: texture memory arguments are not supported; pass the data as an array argument")
    if compiler is not None:
        raise ArgumentError("compiler: only for lang='C' in Kernel Tuner; kerntune compiles CUDA C with NVRTC")
    check_strategy(strategy, _DEFAULTS["strategy"])


def _tune_params(tune_params) -> dict:
    if not isinstance(tune_params, dict) or not tune_params:
        raise ArgumentTypeError("tune_params: give a dict of parameter name -> list of values")
    out = {}
    for name, values in tune_params.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ArgumentError(f"tune_params: '{name}' is not a valid identifier")
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ArgumentTypeError(f"tune_params['{name}']: give a list of values, not {values!r}")
        plain = [_plain(v) for v in values]
        for value in plain:
            if not isinstance(value, (int, float, bool, str)):
                raise ArgumentTypeError(f"tune_params['{name}']: {value!r}; values are ints, floats, bools or strings")
        if not plain:
            raise ArgumentError(f"tune_params['{name}'] has no values")
        out[name] = plain
    return out


def _plain(value):
    """A numpy scalar as the Python number it holds."""
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 0) == 0 else value


def _simulate(kernel_name, problem_size, params, restrictions, strategy, cache, objective, higher_is_better, quiet):
    """Replays a Kernel Tuner cache as the measurements of a brute-force search."""
    if cache is None:
        raise ArgumentError("simulation_mode needs cache=: the Kernel Tuner cache file to replay")
    if strategy not in (None, "brute_force"):
        raise ArgumentError(f"simulation_mode with strategy '{strategy}': replay other strategies with "
                            "`kerntune simulate CACHE.json --strategy NAME`")
    path = _kt_cache.cache_path(cache)
    document = _kt_cache.read(path)
    if document is None:
        raise ArgumentError(f"simulation_mode needs an existing cache file; {path} does not exist")
    size = "callable" if callable(problem_size) else describe(problem_size)
    _kt_cache.check(document, path, kernel_name, list(params), size, None)
    configs = json.loads(_kerntune.valid_configs(json.dumps(params), restrictions_of(restrictions)))
    results = []
    for config in configs:
        entry = document["cache"].get(_kt_cache.key_of(config, list(params)))
        if entry is not None:
            row = dict(entry)
            if isinstance(row.get(objective), str):
                row[objective] = _error_from_name(row[objective])
            results.append(row)
    best = get_best_config(results, objective, higher_is_better)
    if best is None:
        raise NoValidConfigError(f"simulation_mode: {path} holds no valid configuration of this space")
    if not quiet:
        print(f"best performing configuration:\n{get_config_string(best, list(params) + [objective])}")
    return results, {"device_name": document.get("device_name"), "best_config": best, "simulation_mode": True}


def _error_from_name(name: str):
    return error_of({"CompilationFailedConfig": "compile_failed", "InvalidConfig": "invalid_config"}.get(name, "failed"))

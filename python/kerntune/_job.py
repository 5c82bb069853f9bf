"""The tuning job of a Triton call, which the extension hands to the run: the arguments
described, the compile worker's setup written, the kernel fingerprinted, the objective, the
worker programs, and their Ray wiring."""

from __future__ import annotations

import json
import os
import sys
from typing import Mapping, Optional, Sequence, Union

from kerntune import _kerntune
from kerntune._arguments import _describe, _specialization, _tensor_of
from kerntune._errors import ArgumentError, ArgumentTypeError
from kerntune._kernel_source import capture


def worker_env() -> dict:
    """The environment workers need on top of ours: this interpreter's import path, so that
    they import kerntune and the user's modules as this process does."""
    return {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))}


def worker_command(extra: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "kerntune._worker", *extra]


def triton_workers(arch: int, ptxas: Optional[dict] = None) -> dict:
    """The worker programs of a Triton tuning for sm_``arch`` (with the chosen ``ptxas``):
    ``compile_worker``, ``bench_worker`` and ``worker_env``. A tuning's workers and workers
    started ahead for it (``kerntune._crew.prestart``) are the same only if both come from
    here. The setup is named in each compile request, not in the command: a worker kept
    from another tuning loads it (``kerntune._crew``)."""
    env = worker_env()
    if ptxas is not None:
        env["TRITON_PTXAS_PATH"] = ptxas["path"]
    return {"compile_worker": worker_command(["--triton", "--triton-arch", str(arch)]),
            "bench_worker": worker_command([]), "worker_env": env}


def _first_valid_config(params: Mapping[str, Sequence], restrictions: Sequence[str], limit: int = 64) -> list[dict]:
    return json.loads(_kerntune.valid_configs(json.dumps(params), list(restrictions), limit))


def check_ptx_options(params, chosen: Optional[dict] = None) -> None:
    """ACF files (``--apply-controls`` in ``ptx_options``, or an ``acf`` parameter) need
    ptxas 13.3 or newer: a clear error otherwise, naming the ptxas (``chosen``, or Triton's)."""
    acfs = [v for v in params.get("acf", []) if v not in ("", "none")]
    if not acfs and not any("apply-controls" in str(v) for v in params.get("ptx_options", [])):
        return
    if chosen is None:
        from triton.backends.nvidia.compiler import get_ptxas

        ptxas = get_ptxas(90)
        version, path = str(ptxas.version), ptxas.path
    else:
        version, path = chosen["version"], chosen["path"]
    found = tuple(int(x) for x in version.split(".")[:2])
    if found < (13, 3):
        raise _kerntune.SpecError(
            f"ACF files (--apply-controls) need ptxas 13.3 or newer; this Triton uses ptxas {version} "
            f"({path}); pass ptxas=\"pip\" (with nvidia-cuda-nvcc 13.3 installed) or a newer ptxas's path"
        )
    for acf in acfs:
        if not os.path.isfile(str(acf)):
            raise ArgumentError(f"acf = {acf!r}: no such file")


def check_ray(address: str, gpus: int = 0) -> int:
    """Checks, in a process of its own, that Ray is there, the cluster at ``address``
    answers and has ``gpus`` GPUs at least, else raises one line saying what to do."""
    return RayCheck(address, gpus).result()


class RayCheck:
    """``check_ray`` started now and answered later: joining a cluster takes its process a
    few seconds, which a run spends preparing its reference meanwhile. ``ray_gpus`` is what
    the call asked for (None, a count, or ``"all"``)."""

    def __init__(self, address: str, ray_gpus: Union[int, str, None] = None):
        from concurrent.futures import ThreadPoolExecutor

        self.address, self.ray_gpus = address, ray_gpus
        count = ray_gpus if isinstance(ray_gpus, int) else 0
        # The relay's check, as the CLI's --ray runs it (kerntune_pipeline::RayRelay), on a
        # thread of its own: the extension lets go of the GIL while it waits.
        pool = ThreadPoolExecutor(1)
        self.answer = pool.submit(_kerntune.ray_check, sys.executable, address, count, ray_gpus == "all")
        pool.shutdown(wait=False)

    def result(self) -> int:
        """How many of the cluster's GPUs measure (0: none asked for), or the check's
        one-line error."""
        try:
            return self.answer.result()
        except _kerntune.BackendError as error:
            raise _kerntune.BackendError(f"ray={self.address!r}: {error}") from None

    def bench_gpus(self) -> Optional[int]:
        """How many of the cluster's GPUs measure: ``ray_gpus`` resolved (``"all"``: every
        one), None for this machine's."""
        gpus = self.result()
        return gpus if self.ray_gpus is not None else None


def check_ray_gpus(ray_gpus, ray, devices=None) -> Union[int, str, None]:
    """``ray_gpus``: None, ``"all"`` or a count of 1 or more, only with ``ray`` and not with
    ``devices``."""
    if ray_gpus is None:
        return None
    if ray is None:
        raise ArgumentError("ray_gpus= measures on a Ray cluster's GPUs: give ray= (the cluster's address) too")
    if devices is not None:
        raise ArgumentError("give devices= (this machine's GPUs) or ray_gpus= (the Ray cluster's), not both")
    if ray_gpus == "all" or (isinstance(ray_gpus, int) and not isinstance(ray_gpus, bool) and ray_gpus >= 1):
        return ray_gpus
    raise ArgumentError(f"ray_gpus = {ray_gpus!r}: give a number of GPUs (1 or more) or \"all\"")


def _through_ray(job: dict, address: str) -> None:
    """Runs the job's compile workers as actors of the Ray cluster at ``address`` (through
    ``kerntune.ray_worker``, which ships them their setup file); call ``check_ray`` first."""
    from kerntune import ray_worker

    job["compile_worker"] = ray_worker.command(sys.executable, address, job["compile_worker"],
                                               env=list(job["worker_env"]), ship=[job["compile_setup"]])


def _bench_through_ray(job: dict, address: str) -> None:
    """Runs the job's benchmark workers as Ray actors holding one GPU each, shipped every
    file they read (the arguments, the expected outputs, the extra input sets): a node that
    lacks one gets it written at the same path."""
    from kerntune import ray_worker

    files = [entry["file"] for entry in job["args"] if entry.get("file")]
    files += [entry["file"] for entry in job.get("reference") or []]
    for extra in job.get("extra_sets") or []:
        files += [path for _, path in extra["inputs"]] + list(extra["expected"])
    job["bench_worker"] = ray_worker.command(sys.executable, address, job["bench_worker"], env=list(job["worker_env"]),
                                             ship=files, gpus=1)


def _job(fn, call, params, listed, restrictions, arch, shared_limit, workdir, ptxas=None):
    """The tuning job every call shares: arguments described, the compile worker's setup
    file written, the kernel fingerprinted. ``ptxas`` is the chosen one (``_ptxas.resolve``)."""
    import triton

    check_ptx_options(params, ptxas)

    configs = listed.rows if listed is not None else _first_valid_config(params, restrictions)
    if not configs:
        raise _kerntune.SpaceError("no configuration satisfies the restrictions")
    specialization = _specialization(fn, call, configs[0], arch)
    job_args, describe = _describe(fn, call, params, specialization)
    setup_path = os.path.join(workdir, "triton-setup.json")
    with open(setup_path, "w") as f:
        json.dump({
            "kernel": capture(fn),
            "args": describe,
            "arch": arch,
            "shared_limit": shared_limit,
        }, f)
    problem = {
        "args": {d["name"]: (f"{d['dtype']}{list(_tensor_of(call[d['name']]).shape)}" if d["kind"] in ("tensor", "tensordesc")
                             else d.get("value")) for d in describe if d["kind"] != "tuned"},
        "specialization": [list(s) for s in specialization if s[0] != "constexpr"],
    }
    identity = [fn.cache_key, triton.__version__, problem["specialization"]]
    if ptxas is not None:
        identity.append(f"ptxas {ptxas['version']}")  # another ptxas makes other binaries
    fingerprint = _kerntune.fingerprint([json.dumps(identity, default=str)])
    job = {
        "kernel_name": fn.__name__,
        "params": params,
        "restrictions": list(restrictions),
        "configs": None if listed is None else listed.rows,
        "args": job_args,
        "fingerprint": fingerprint,
        "problem": problem,
        **triton_workers(arch, ptxas),
        "compile_setup": setup_path,
        "ptxas": ptxas,
    }
    return job, describe, configs


def _measured_identity(job: dict, edge_sizes: Sequence[str] = ()) -> str:
    """The job's fingerprint, with what changes the measured values folded in: the
    objective, graph timing, energy measurement, the edge sizes checked. A store then never
    answers an energy objective with rows measured for time alone, nor a run without edge
    sizes with rows found wrong at one."""
    timing = job.get("timing") or {}
    measured = {key: timing[key] for key in ("graph", "energy") if timing.get(key)}
    objective = job.get("objective")
    if objective is None and not measured and not edge_sizes:
        return job["fingerprint"]
    parts = [objective, measured] + ([list(edge_sizes)] if edge_sizes else [])
    text = json.dumps(parts, sort_keys=True, default=str)
    return _kerntune.fingerprint([job["fingerprint"], text])


def _objective(objective, higher_is_better) -> Optional[dict]:
    """The job's objective from ``objective=`` (a name or expression, or a ``(name,
    expression)`` pair) and ``objective_higher_is_better=``; ``None`` for the time."""
    if higher_is_better is not None and not isinstance(higher_is_better, bool):
        raise ArgumentTypeError("objective_higher_is_better: give True or False")
    if objective is None or objective == "time":
        if higher_is_better:
            raise ArgumentError("objective_higher_is_better=True: the time is better lower; give objective= as well")
        return None
    if isinstance(objective, str):
        name, expression = objective, None
    elif isinstance(objective, tuple) and len(objective) == 2 and all(isinstance(x, str) for x in objective):
        name, expression = objective
    else:
        raise ArgumentTypeError("objective: give a name or expression ('energy', 'edp', 'energy*time**2') or a "
                                "(name, expression) pair of strings")
    if not name.strip():
        raise ArgumentError("objective: give a name (time, energy, edp) or an expression such as energy*time**2")
    return {"name": name, "expression": expression, "higher_is_better": higher_is_better}

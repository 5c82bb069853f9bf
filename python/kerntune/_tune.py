"""``kerntune.tune``: tune a ``@triton.jit`` kernel on the GPU, and ``kerntune.compile``:
compile every configuration without one.

The kernel is compiled by worker processes on the CPU (one per core), each specializing a
configuration exactly as Triton's JIT would specialize this call; the benchmark worker
owns copies of the call's tensors and launches the cubins from Rust with Triton's ABI.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, Union

from kerntune import _edges, _kerntune, _pointer_tables, _ptxas, _shapes
from kerntune._arguments import (_bind, _buffer_entry, _grid_function, _is_tensor, _storage_span, _tensor_of,
                                 _write_tensor, jit_function, kernel_defaults)
from kerntune._errors import (ArgumentError, ArgumentTypeError, arch_number, check_device, check_devices, check_search,
                              check_strategy, compile_target, warn_unchecked)
from kerntune._hooks import Hooks, _descriptor_blocks
from kerntune._job import (RayCheck, _bench_through_ray, _job, _measured_identity, _objective, _through_ray, check_ray,
                           check_ray_gpus, worker_command)
from kerntune._progress import _Progress
from kerntune._reference import (VERIFY_SETS, _default_tolerance, _extra_sets, _named_tensor, _position,
                                 _reference_outputs)
from kerntune._request import DEFAULTS, request as _request
from kerntune._results import NoValidConfigError, TuneResult
from kerntune._space import config_dict, names_of, space_of


def compile(
    kernel,
    args: Mapping[str, Any],
    params: Optional[Mapping[str, Sequence]] = None,
    restrictions: Optional[Sequence[str]] = None,
    *,
    configs: Optional[Sequence] = None,
    arch: str = DEFAULTS["arch"],
    shared_limit: Optional[int] = None,
    db: Optional[str] = None,
    compile_workers: Optional[int] = None,
    compile_timeout: Optional[float] = None,
    ptxas: Optional[str] = None,
    ray: Optional[str] = None,
) -> list:
    """Compiles every configuration of a Triton kernel for ``arch`` without a GPU, with
    the specialization Triton's JIT would give this call. ``args`` may hold
    ``kerntune.Tensor`` stand-ins instead of tensors. The space is ``params`` (with
    ``restrictions``) or ``configs`` (a list of ``triton.Config``). Configurations that need
    more shared memory than ``shared_limit`` bytes (default: what a block of ``arch`` may opt
    into) are refused before they are compiled. Returns one entry per configuration
    (``config``, ``status``, ``reason``, ``launch``: the kernel's name, dynamic shared
    memory, warps, CTAs and parameters, and ``cubin``, base64); with ``db`` the cubins and
    failures are kept in the results store as each compile ends, and a second call answers
    from it what it holds (``from_store``) and compiles only the rest. Ctrl-C stops within a
    fraction of a second and raises ``KeyboardInterrupt``, keeping what was compiled. A
    compile that outlasts ``compile_timeout`` seconds fails that configuration; by default the limit is 60 s, and once 16 compiles succeeded, 4 times the
    90th percentile of the run's compile times (at least 10 s). ``ptxas`` (a path, or
    ``"pip"`` for the nvidia-cuda-nvcc wheel's) assembles instead of Triton's own; compiler
    controls (``acf``, ``opt_level`` parameters,
    ``ptx_options``) reach it. ``ray`` (a Ray cluster's address, with
    ``pip install 'kerntune[ray]'``) runs the compile workers as actors on its nodes; give
    ``compile_workers`` then (the default counts this machine's cores)."""
    fn = jit_function(kernel)
    params, listed = space_of(params, configs, kernel_defaults(fn))
    restrictions = names_of(restrictions, "restrictions")
    call = _bind(fn, args, params)
    target = compile_target(arch)
    number = arch_number(target)
    if shared_limit is None:
        shared_limit = target["max_shared_per_block_optin"]
    with tempfile.TemporaryDirectory(prefix="kerntune-") as workdir:
        job, _, _ = _job(fn, call, params, listed, restrictions, number, shared_limit, workdir, _ptxas.resolve(ptxas))
        if ray is not None:
            check_ray(ray)
            _through_ray(job, ray)
        if compile_timeout is not None:
            job["timing"] = {"compile_timeout": f"{compile_timeout}s"}
        # The limit decides which configurations are refused: under another, the store's
        # answers are not this call's.
        job["problem"]["shared_limit"] = shared_limit
        hooks = Hooks.of(listed)
        asked = _request(arch=f"sm_{number}", compile_workers=compile_workers, db=db)
        text = _kerntune.compile_triton(json.dumps(job, default=str), json.dumps(asked, default=str),
                                        _descriptor_blocks(call, list(params), hooks))
    return json.loads(text)


def tune(
    kernel,
    args: Mapping[str, Any],
    grid: Union[Callable, str, Sequence[int]],
    params: Optional[Mapping[str, Sequence]] = None,
    restrictions: Optional[Sequence[str]] = None,
    answer: Optional[Mapping[str, Any]] = None,
    atol: Optional[float] = None,
    rtol: Optional[float] = None,
    strategy: str = DEFAULTS["strategy"],
    max_fevals: Optional[int] = None,
    time_limit: Optional[float] = None,
    db: Optional[str] = None,
    *,
    target: Optional[float] = None,
    strategy_options: Optional[Mapping[str, Any]] = None,
    objective: Optional[Union[str, tuple]] = None,
    objective_higher_is_better: Optional[bool] = None,
    timing: Optional[Mapping[str, Any]] = None,
    restore_value: Sequence[str] = (),
    reset_to_zero: Sequence[str] = (),
    configs: Optional[Sequence] = None,
    seed: int = 0,
    fresh: bool = False,
    compile_workers: Optional[int] = None,
    device: Optional[int] = None,
    devices: Union[str, Sequence[int], None] = None,
    ray: Optional[str] = None,
    ray_gpus: Union[int, str, None] = None,
    progress: bool = True,
    finalists: int = DEFAULTS["finalists"],
    finalists_within: float = DEFAULTS["finalists_within"],
    schedule: bool = False,
    schedule_options: Optional[Mapping[str, Any]] = None,
    hooks: Optional["Hooks"] = None,
    verify_sets: int = VERIFY_SETS,
    edge_args: Optional[Sequence] = None,
    ptxas: Optional[str] = None,
    controls: Optional[str] = None,
    controls_budget: int = DEFAULTS["controls_budget"],
    shapes: Optional[Sequence[Mapping[str, Any]]] = None,
    share: bool = True,
    first: Optional[Sequence] = None,
) -> Union[TuneResult, _shapes.ShapeResults]:
    """Tunes a ``@triton.jit`` kernel and returns the best configuration.

    ``args`` maps the kernel's argument names to torch tensors (on the GPU), ints, floats or
    bools; ``params`` maps tuned names to their values: the kernel's ``tl.constexpr``
    parameters and the compile options ``num_warps``, ``num_stages``, ``num_ctas``,
    ``maxnreg`` (0 = compiler's choice) and ``ptx_options`` (ptxas flags, "" = none).
    ``configs`` (a list of ``triton.Config``) lists the configurations instead.
    ``grid`` is a callable of the launch's META (the arguments and the configuration, as
    for ``triton.autotune``), an expression string over the same names (``cdiv`` allowed),
    or a fixed tuple. ``restrictions`` are Python expressions over the parameters.

    Every configuration is checked before it is timed: against ``answer`` (a mapping of
    output names to expected tensors) when given, else against the outputs of the first
    configuration that runs through Triton itself, the outputs being the tensors that run
    changes; the next configuration that runs must then agree with it within the
    tolerances (``AGREEING_CONFIGS``), else ``ReferenceDisagreementError`` asks for
    ``answer``. Without ``answer``, every configuration is also checked on ``verify_sets``
    (2) further input sets: the call's floating-point inputs with their elements shuffled,
    on which the same reference configurations must agree again (``result.verified_sets``
    counts the sets, the call's own included). ``answer`` fits the call's own tensors only,
    so with it each configuration is checked on that one set; when no tensor changes,
    nothing is checked and ``UncheckedOutputsWarning`` says so.
    ``edge_args`` lists calls of the kernel at other sizes, where its blocks do not divide
    the problem and its masks matter: each a dict of the arguments that differ from
    ``args`` (``{"x": x2, "out": out2, "n": 4095}``), or an ``(args, answer)`` pair. After
    the search, the best configurations are launched there through Triton, best first,
    until ``finalists`` have passed; one that computes other outputs there than the
    reference configurations (or the pair's answer) is ``invalid_output``, its reason naming
    the size, and cannot win. ``result.verified_sizes`` names the sizes and
    ``result.edge_checked`` counts the configurations checked there.
    ``atol``/``rtol`` default to 1e-2 for floating-point outputs and 0 for integers.
    Outputs are poisoned before the checked run; list in ``restore_value`` those the kernel
    also reads (they are restored instead, as in ``triton.autotune``), and in
    ``reset_to_zero`` the tensors the kernel expects to find at zero (zeroed before every
    launch, checked and timed, and not counted in the time).

    ``devices`` (``"all"`` or a list of GPU numbers, of one model) measures on several GPUs
    at once, one benchmark worker each, instead of ``device``; the finalists' rounds are
    shared among them, and the schedule stage measures on the first. ``ray`` (a Ray cluster's address, with
    ``pip install 'kerntune[ray]'``) runs the compile workers as Ray actors on the cluster's
    nodes (see docs/design-notes.md); ``ray_gpus`` (a count, or ``"all"``) also runs that
    many benchmark workers as Ray actors with one GPU each, instead of this machine's (which
    still runs the reference and needs a GPU of the cluster's model); each is shipped the
    files of the call's tensors.

    ``strategy`` (see ``kerntune strategies``), ``max_fevals``, ``time_limit`` (seconds) and
    ``target`` bound the search (when ``time_limit`` runs out, configurations still compiling
    are given up; those on the GPU are measured to the end). Without any of them, ``default`` stops by itself once more
    evaluations are unlikely to pay (``result.stop == "converged"``, after at least 100),
    ``brute_force`` evaluates the whole space and the other strategies make 100.
    ``compile_workers`` defaults to one per core, but with ``max_fevals`` to no more than a
    sixth of it (never fewer than 16): on a large host, a small budget is otherwise spent on
    configurations picked before any result is back.
    Results are kept in ``db`` (default ``$KERNTUNE_DB`` or ``~/.cache/kerntune/results.db``):
    a second call with the same kernel, arguments' shapes and types, and parameters answers
    from it at no cost. ``objective = (name, expression)`` replaces the time, e.g.
    ``("TFLOP/s", "2*M*N*K / (time * 1e-3) / 1e12")`` over the parameters, the call's scalar
    arguments, ``time`` in ms and the values NVML measures (``energy`` in J per launch,
    ``power`` in W, ``clock_MHz``...); a string alone names or is the expression:
    ``objective="energy"``, ``"edp"`` (energy x time) or ``"energy*time**2"``. Energy and
    power are read from NVML's energy counter in an extra block of at least 500 ms per
    configuration; a machine without NVML refuses such an objective. Lower is better
    unless ``objective_higher_is_better=True`` (rates such as ``TFLOP/s`` go up by default).
    ``timing={"graph": True}`` times each sample as a CUDA graph of many launches, for
    kernels of a few microseconds; ``timing={"energy": True}`` measures energy and power
    with every configuration whatever the objective. Ctrl-C stops within a fraction of a second and
    raises ``KeyboardInterrupt``, keeping every recorded result (evaluations still in flight are
    dropped; the same call resumes). ``fresh=True`` measures everything again instead of answering from the
    store (the new results replace the stored ones).

    ``progress`` (default True) shows the count and the best so far while the run goes: on a
    terminal, a line on standard error redrawn in place; in a Jupyter notebook, a line in the
    cell's output; elsewhere (output to a pipe or a file) only one summary line at the end.
    ``result.report("report.html")`` writes an HTML report of the tuning.

    After the search, the best ``finalists`` configurations (those within 5% of the best) are
    timed again, each interleaved with the best in rounds over several reloads, and the best
    against a copy of itself (an A/A control); one replaces the best only when it is faster
    beyond that control's noise (``finalists_within`` sets the 5%). ``result.finalists`` holds
    the report; ``finalists=1`` takes the search's best as it is.

    ``schedule=True`` then tunes the native instruction schedule (SASS) of the best
    configuration: legal reorderings of its memory instructions, each checked to compute
    exactly (bit for bit) what the original computes; the search's fastest candidates are
    timed again interleaved with the original, and the best of them is checked again on 10^4
    random input sets and timed interleaved with the original once more, for its confidence
    interval. ``schedule_options`` holds ``budget`` (candidates, default 1000), ``method``
    (``hill_climb`` or ``anneal``), ``check_sets`` (10^4), ``rounds`` (200), ``blocks``
    (20: the A/B timing reloads both kernels this many times, and times a copy of the
    original the same way as a control the winner must beat), ``finalists`` (8),
    ``finalist_rounds`` (20), ``seed``. The report is ``result.schedule``; a kept schedule
    can be launched through Triton with ``kerntune.use_schedule``.

    ``ptxas`` (a path, or ``"pip"`` for the nvidia-cuda-nvcc wheel's) assembles the kernels
    instead of Triton's own ptxas; its version shows in ``result.compiler`` and is part of
    the results' identity. Compiler controls are parameters like the rest: ``acf`` (ACF
    files, ``"none"``), ``opt_level`` (0-3),
    ``maxnreg`` and ``ptx_options``. ``controls="compileiq"`` then searches the ACF files of
    the best configuration with CompileIQ (installed separately: ``pip install compileiq``),
    ``controls_budget`` candidates in generations, each compiled and timed like any
    configuration; the fastest is timed against the configuration without an ACF,
    interleaved with an A/A control, and kept only when faster beyond the control's noise.
    The report is ``result.controls``; a kept ACF is in ``result.best_config["acf"]``.

    ``shapes`` (a list of dicts of the variables that differ, ``[{"M": 16}, {"M": 64}]``)
    tunes the kernel at every size, in order, one tuning each in the store: ``args`` is then
    a function of a size's variables returning its arguments (``args=lambda M: {...}``), as
    are ``answer`` and ``edge_args`` when given, and ``grid`` may be one too (a function
    that takes the sizes' variables by name, returning that size's grid). Each size learns from the size tuned
    nearest to it before (numbers compared on a log scale, ties to the smaller): that size's
    best configuration is measured first, and with ``default`` every outcome there guides
    the search until its own outcomes take over. Returns a ``ShapeResults``: a
    ``TuneResult`` per size (``results[64]``, or ``results[(64, 4096)]``), ``summary()``
    (a line per size: evaluations, those measured now, seconds, best, the evaluation that
    first measured the winner and the size it learned from), ``table`` and
    ``save_table(path)``. ``share=False`` tunes each size on its own, as separate calls
    would. Ctrl-C keeps every size tuned so far; the same call answers them from the store.

    ``first`` (``triton.Config``s or dicts of the parameters' values) is measured before the
    strategy picks its own, in order: a list known to be good (a tutorial's ``configs``,
    Inductor's own) inside a wider ``params`` space. Those outside the space are skipped.
    """
    if shapes is not None and not isinstance(shapes, _shapes.OneShape):
        given = {name: value for name, value in locals().items() if name not in _shapes.PER_SIZE}
        sizes = _shapes.check(shapes, {"args": args})
        sized_grid = given.pop("grid") if _shapes.of_size(grid, sizes[0]) else None
        return _shapes.run(lambda size_args, one, **per_size: tune(kernel, size_args, shapes=one, **given, **per_size),
                           args, sizes, share, jit_function(kernel).__name__,
                           _shapes.size_options(answer, edge_args, sized_grid))
    transfer = shapes.transfer if isinstance(shapes, _shapes.OneShape) else None
    fn = jit_function(kernel)
    check_device(device)
    devices = check_devices(devices)
    ray_gpus = check_ray_gpus(ray_gpus, ray, devices)
    if devices is not None and device is not None:
        raise ArgumentError("give device= or devices=, not both")
    strategy = check_strategy(strategy, DEFAULTS["strategy"])
    check_search(strategy, strategy_options, DEFAULTS["strategy"], max_fevals=max_fevals, time_limit=time_limit,
                 target=target)
    params, listed = space_of(params, configs, kernel_defaults(fn))
    restrictions = names_of(restrictions, "restrictions")
    restore_value = names_of(restore_value, "restore_value")
    reset_to_zero = names_of(reset_to_zero, "reset_to_zero")
    call = _bind(fn, args, params)
    for argument, names in (("restore_value", restore_value), ("reset_to_zero", reset_to_zero)):
        for name in names:
            if not _is_tensor(call.get(name)):
                raise ArgumentError(f"{argument} names '{name}', which is not a tensor argument of {fn.__name__}")
    edges = _edges.bind(fn, call, edge_args, params, grid)
    try:
        import torch
    except ImportError:
        raise _kerntune.NoGpuError("kerntune.tune runs the kernel through Triton and needs torch and a GPU; "
                                   "kerntune.compile(...) compiles without them") from None

    if devices is not None:
        device = 0 if devices == "all" else int(devices.split(",")[0])
    device = torch.cuda.current_device() if device is None else device
    info = json.loads(_kerntune.device_info(device))
    arch = info["compute_capability"][0] * 10 + info["compute_capability"][1]
    if controls not in (None, "compileiq"):
        raise ArgumentError(f"controls = {controls!r}: the controls search is \"compileiq\" (or None)")
    grid_fn = _grid_function(grid, call, list(params))
    chosen = _ptxas.resolve(ptxas)
    if controls == "compileiq" and chosen is None:
        raise ArgumentError("controls=\"compileiq\" needs ptxas= (ACF files are read by a ptxas of their own version)")
    request = _request(strategy=strategy, strategy_options=strategy_options, max_fevals=max_fevals,
                       time_limit=time_limit, target=target, seed=seed, db=db, fresh=fresh,
                       compile_workers=compile_workers, devices=devices or str(device), finalists=finalists,
                       finalists_within=finalists_within, schedule=schedule,
                       schedule_options=schedule_options if schedule else None,
                       controls={"budget": controls_budget, "ptxas_version": chosen["version"], "worker": worker_command([])}
                       if controls == "compileiq" else None, transfer=transfer,
                       first=None if first is None else [config_dict(c, i)[0] for i, c in enumerate(first)])
    checks = _Checks(answer, atol, rtol, restore_value, reset_to_zero, hooks or Hooks.of(listed), verify_sets,
                     edges)
    workdir = tempfile.mkdtemp(prefix="kerntune-")
    try:
        result = _tune_in(
            fn, call, grid_fn, params, listed, restrictions, checks, arch, info, workdir, request, dict(
                progress=progress, objective=_objective(objective, objective_higher_is_better), timing=timing,
                ptxas=chosen, ray=ray, ray_gpus=ray_gpus, label=shapes.label if transfer is not None else None,
            ),
        )
    finally:
        if os.environ.get("KERNTUNE_KEEP_TEMP") != "1":
            shutil.rmtree(workdir, ignore_errors=True)
    if result.controls and result.controls["kept"]:
        result.best_config = {**result.best_config, "acf": result.controls["best_acf"]}
    return result


class _Checks(NamedTuple):
    """How a tuning checks its configurations' outputs: ``tune``'s arguments of these names
    (``hooks`` settled, ``edges`` bound)."""

    answer: Optional[Mapping[str, Any]]
    atol: Optional[float]
    rtol: Optional[float]
    restore_value: Sequence[str]
    reset_to_zero: Sequence[str]
    hooks: Hooks
    verify_sets: int
    edges: Sequence[_edges.Edge]


def _tune_in(fn, call, grid_fn, params, listed, restrictions, checks: _Checks, arch, info, workdir, request,
             search) -> TuneResult:
    """Tunes the bound ``call`` as ``request`` (``kerntune._request``) asks, checking outputs
    as ``checks`` say; ``search`` holds what this front settles itself: ``progress``,
    ``objective``, ``timing``, ``ptxas``, ``ray``, ``ray_gpus`` and ``label`` (the size of a
    many-shape run, for the progress line)."""
    answer, atol, rtol, restore_value, reset_to_zero, hooks, verify_sets, edges = checks
    clock = time.perf_counter()
    phases = {}
    call = _pointer_tables.mark(fn, call, _is_tensor)
    job, describe, configs = _job(fn, call, params, listed, restrictions, arch, info["max_shared_per_block_optin"], workdir,
                                  search["ptxas"])
    job["args"] += [_buffer_entry(name, tensor) for name, tensor in _pointer_tables.targets(call).items()]
    job["relocations"] = _pointer_tables.relocations(fn, call)
    # The cluster's check is answered before the run starts; the reference runs meanwhile.
    # (Should this call stop first, the check's process still ends by itself.)
    checking = None
    if search["ray"] is not None:
        checking = RayCheck(search["ray"], search["ray_gpus"])
    ray_gpus = None
    job_args = job["args"]
    for entry in job_args:
        if entry["kind"] == "buffer":
            value = _named_tensor(call, entry["name"])
            entry["file"] = os.path.join(workdir, f"{entry['name']}.bin")
            entry["len"] = _storage_span(value)
            _write_tensor(value, entry["file"])

    for name in reset_to_zero:
        entry = job_args[fn.arg_names.index(name)]
        entry["reset"] = True
        entry["poison"] = False

    phases["prepare_s"] = time.perf_counter() - clock
    reference = None
    extra_sets = []
    if answer is None:
        runs = _reference_outputs(fn, grid_fn, call, configs, reset_to_zero, hooks, atol, rtol)
        outputs = runs[0][1]
        # Of reference_s, the part the extra input sets take (shuffling, running, writing).
        phases["extra_sets_s"] = 0.0
        if outputs and verify_sets > 0:
            positions = {**{name: fn.arg_names.index(name) for name in call if name in fn.arg_names},
                         **_pointer_tables.positions(fn, call)}
            started = time.perf_counter()
            extra_sets = _extra_sets(fn, grid_fn, call, runs, reset_to_zero, hooks, atol, rtol, verify_sets, workdir, positions)
            phases["extra_sets_s"] = time.perf_counter() - started
    else:
        if not isinstance(answer, Mapping):
            raise ArgumentTypeError(f"answer must be a dict of output argument names to expected tensors, got {type(answer).__name__}")
        outputs = dict(answer)
        for name in outputs:
            if name not in _pointer_tables.targets(call) and _tensor_of(call.get(name)) is None:
                raise ArgumentError(f"answer names '{name}', which is not a tensor argument of {fn.__name__}")
    if outputs:
        reference = []
        for name, expected in outputs.items():
            position = _position(fn, call, name)
            tensor = _named_tensor(call, name)
            if not tensor.is_contiguous():
                raise ArgumentError(f"output {name} must be contiguous to be checked")
            job_args[position]["output"] = True
            path = os.path.join(workdir, f"{name}.expected.bin")
            _write_tensor(expected.to(tensor.dtype).reshape(tensor.shape), path)
            tolerance = _default_tolerance(tensor)
            reference.append({
                "position": position,
                "file": path,
                "atol": tolerance if atol is None else atol,
                "rtol": tolerance if rtol is None else rtol,
            })
    for name in restore_value:
        job_args[fn.arg_names.index(name)]["poison"] = False
    scalars = {d["name"]: d["value"] for d in describe if d["kind"] == "value" and isinstance(d.get("value"), (int, float))}
    phases["reference_s"] = time.perf_counter() - clock - phases["prepare_s"]
    vet = None
    if edges and reference is not None:
        started = time.perf_counter()
        reference_configs = configs if answer is not None else [config for config, _ in runs]
        _edges.references(fn, edges, reference_configs, reset_to_zero, hooks, atol, rtol)
        vet = _edges.checker(fn, edges, list(params), restore_value, reset_to_zero, hooks, atol, rtol)
        phases["edge_sizes_s"] = time.perf_counter() - started
    if reference is None:
        warn_unchecked(fn.__name__, "no tensor changed when the reference configurations ran", "give answer= to check them", 3)
    job["reference"] = reference
    job["extra_sets"] = extra_sets if reference is not None else []
    job["timing"] = dict(search["timing"] or {})
    objective = search["objective"]
    if objective is not None:
        job["objective"] = {**objective, "values": scalars}
    job["fingerprint"] = _measured_identity(job, [edge.label for edge in edges] if vet else [])
    if checking is not None:
        ray_gpus = checking.bench_gpus()
        _through_ray(job, search["ray"])
    if ray_gpus:
        _bench_through_ray(job, search["ray"])
    name = fn.__name__ if search["label"] is None else f"{fn.__name__} [{search['label']}]"
    bar = _Progress(name, objective["name"] if objective else "time") if search["progress"] else None
    try:
        text = _kerntune.tune_triton(json.dumps(job), json.dumps(request, default=str), grid_fn, bar, vet,
                                     [edge.label for edge in edges] if vet else [],
                                     _descriptor_blocks(call, list(params), hooks), ray_gpus)
    finally:
        if bar:
            bar.close()
    result = TuneResult.from_json(text)
    phases["tune_s"] = time.perf_counter() - clock - phases["prepare_s"] - phases["reference_s"]
    result.phases = phases
    if result.failure is not None:
        raise NoValidConfigError(f"{fn.__name__}: {result.failure}", result)
    return result

"""kerntune inside TorchInductor: a choices handler that answers each GEMM Inductor lowers
from kerntune's answers (a shipped table, then the store), tunes the ones it lacks when
asked to, and hands the winner over as the single entry of Inductor's lookup table, so
that Inductor builds it without benchmarking anything. Which hook carries what, and what
may break across torch versions, is in docs/design-notes.md ("torch.compile's GEMMs").
"""

from __future__ import annotations

import contextlib
import json
import operator
import sys
import threading
import time
import warnings
from typing import Any, Optional

import torch
import triton
from torch._inductor.lookup_table import LookupTableChoices

from kerntune import _crew, _kerntune
from kerntune._errors import ArgumentError
from kerntune._kerntune import KerntuneError
from kerntune._results import NoValidConfigError
from kerntune.torch import _gemm, _versus

_local = threading.local()


def _current() -> Optional["Session"]:
    return getattr(_local, "session", None)


def device_name() -> str:
    """The device part of Inductor's lookup keys (``gcnArchName``; the device's name on CUDA)."""
    return LookupTableChoices._get_device_key(torch.device("cuda", torch.cuda.current_device()))


def versions(device: Optional[str] = None) -> dict:
    """What a stored answer must match to be used: the GPU (this one's unless named), torch
    and Triton."""
    return {"device": device_name() if device is None else device, "torch": torch.__version__,
            "triton": triton.__version__}


def answers(db: str, wanted: dict) -> dict:
    """The answers kept in the store at ``db`` whose GPU, torch and Triton are ``wanted``, by
    lookup key (the newest of each)."""
    return {choice["key"]: choice for choice in json.loads(_kerntune.inductor_choices(db))
            if all(choice.get(name) == value for name, value in wanted.items())}


class KerntuneChoices(LookupTableChoices):
    """Inductor's lookup-table handler, with kerntune's table and, for each GEMM the table
    lacks, kerntune's answer from the store or a tuning run (the session of the compile)."""

    def _get_lookup_table(self) -> dict:
        session = _current()
        if session is None or not torch.cuda.is_available():
            return super()._get_lookup_table()
        return session.table

    def _finalize_template_configs(self, template_choices, kernel_inputs, templates, op_name, kwarg_overrides=None):
        session = _current()
        if session is not None:
            key = self.make_lookup_key(kernel_inputs, op_name, include_device=True)
            hashes = {t.uid: getattr(t, "src_hash", None) for t in templates}
            problem = _gemm.problem_of(op_name, kernel_inputs.shapes_hinted(), kernel_inputs.strides_hinted(),
                                       kernel_inputs.dtypes()) if key is not None else None
            if problem is not None and problem.template in hashes:
                session.meet(key, problem, hashes[problem.template])
            if session.capturing:
                for uid, choices in template_choices.items():
                    if uid.startswith("aten::"):
                        for choice in choices:
                            return [choice]
        return super()._finalize_template_configs(template_choices, kernel_inputs, templates, op_name,
                                                  kwarg_overrides)


#: A GEMM that learns from GEMMs tuned before it in the session reaches their quality in
#: fewer evaluations: replayed on six recorded GEMMs of a Llama layer and an MLP block
#: (data/landscapes/h200/inductor, batches of 16, Inductor's DEFAULT list first), 40 evaluations
#: found 0.998 of the optimum on a learning GEMM against 0.953 from nothing, and 60 found 1.000
#: both ways (docs/benchmarks.md, "Fewer evaluations for a GEMM that learns"). Eight GEMMs of
#: two other models, recorded after the choice, agree: 0.998 and 1.000 at 40, 0.972 and 0.948
#: at 30 ("The budgets checked on held-out GEMMs").
LEARNING_SHARE = 2 / 3

#: Seconds the workers wait, after a training graph's forward is compiled, for its backward's
#: compile (Inductor's, at the first backward pass): a MLP block's and a Llama layer's first
#: backward GEMM started workers anew in about 1 s (docs/benchmarks.md, "A training step").
BACKWARD_WAIT_S = 10.0


class Session:
    """What one ``kerntune.torch.compile`` (or ``kerntune.torch.tune``) knows and does: its
    lookup table, the GEMMs met, and how a missing one is tuned."""

    def __init__(self, *, db: Optional[str], tune: bool, table: Optional[dict], max_fevals: Optional[int],
                 time_limit: Optional[float], space: str, fallback: bool, progress: bool, capturing: bool = False,
                 strategy: Optional[str] = None, eager_check: bool = False):
        if space not in _gemm.SPACES:
            raise ArgumentError(f"space={space!r}: give one of {', '.join(map(repr, _gemm.SPACES))}")
        self.db = db if db is not None else _kerntune.default_db()
        self.tune, self.capturing, self.fallback, self.progress = tune, capturing, fallback, progress
        self.max_fevals, self.time_limit, self.space, self.strategy = max_fevals, time_limit, space, strategy
        self.eager_check = eager_check
        #: Each compiled graph's check against eager (``faster_of``).
        self.graphs: list = []
        self.shipped = dict(table or {})
        self.table: dict = {}
        self.rows: list = []
        self.met: list = []
        self._stored: Optional[dict] = None
        self._tuned: list = []

    def prestart(self) -> None:
        """Starts now the workers that the first GEMM's tuning will ask for: they start, and
        warm Triton's compiler up, while torch.compile traces and lowers the model, and the
        first GEMM it meets is tuned on them (``kerntune._crew``). Only where tuning is
        likely: with a shipped table, or answers in the store for this GPU, torch and Triton
        (a second process, another rank), the GEMMs are probably answered, and workers
        started for nothing would take CPU from Inductor's own compile; a GEMM that still
        needs tuning then starts them itself."""
        if not self.tune or self.shipped or self.stored():
            return
        from kerntune._job import triton_workers
        from kerntune._request import request

        device = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(device)
        _crew.prestart(triton_workers(major * 10 + minor),
                       request(strategy=self.strategy, max_fevals=self.max_fevals, time_limit=self.time_limit,
                               devices=str(device)))

    def stored(self) -> dict:
        """The store's answers for this GPU, torch and Triton, by lookup key (the newest)."""
        if self._stored is None:
            self._stored = answers(self.db, versions())
        return self._stored

    def meet(self, key: str, problem: _gemm.Problem, template_hash: Optional[str]) -> None:
        """A GEMM Inductor is lowering: answered from the shipped table or the store, tuned
        now (or, while capturing, noted for later), or left to Inductor."""
        if key in self.table:
            return
        if key in self.shipped:
            self.table[key] = self.shipped[key]
            return
        stored = self.stored().get(key)
        if stored is not None and _hash_matches(stored["entry"], template_hash):
            self.table[key] = stored["entry"]
            self.rows.append({**stored, "from_store": True})
            return
        if self.capturing:
            if all(met_key != key for met_key, _, _ in self.met):
                self.met.append((key, problem, template_hash))
            return
        if self.tune:
            self._tune_into_table(key, problem, template_hash)

    def _tune_into_table(self, key: str, problem: _gemm.Problem, template_hash: Optional[str]) -> None:
        """Tunes one GEMM into the table; where kerntune cannot (a worker that cannot start,
        a store that cannot be written), says so and leaves the GEMM to Inductor."""
        try:
            self.table[key] = self.tune_one(key, problem, template_hash)["entry"]
        except KerntuneError as error:
            warnings.warn(f"kerntune.torch: {problem.label} is left to Inductor: {error}", stacklevel=2)

    def transfer(self, problem: _gemm.Problem) -> dict:
        """What a GEMM learns from: the GEMMs tuned before it in this session."""
        return {"shape": problem.shape, "tuned": list(self._tuned), "independent": False}

    def budget(self, transfer: dict) -> Optional[int]:
        """A GEMM's evaluations, given what it learns from (``transfer``, a
        ``kerntune_run::Transfer``): ``LEARNING_SHARE`` of ``max_fevals`` where it learns from a
        GEMM tuned before it in this session (one of the same operation kind and element
        type: the many-shape run's nearest size), all of them where it learns from nothing."""
        if self.max_fevals is None or _kerntune.transfer_nearest(json.dumps(transfer)) is None:
            return self.max_fevals
        return max(1, round(self.max_fevals * LEARNING_SHARE))

    def tune_one(self, key: str, problem: _gemm.Problem, template_hash: Optional[str]) -> dict:
        """Tunes one GEMM, learning from those tuned before it in this session, decides it
        against ATen's, keeps the answer in the store and returns it."""
        import kerntune
        from kerntune import _shapes

        clock = time.perf_counter()
        if self.progress:
            print(f"kerntune: tuning {problem.label} for Inductor", file=sys.stderr, flush=True)
        a, b, c, bias = _operands(problem)
        out = torch.empty_like(c)
        product, with_bias = (torch.bmm, torch.baddbmm) if problem.batched else (torch.mm, torch.addmm)
        tolerance = 2e-2 if problem.dtype == "bfloat16" else 1e-2
        transfer = _shapes.OneShape(self.transfer(problem))
        preparing = _prepare_launch(problem)
        called = time.perf_counter()
        try:
            result = kerntune.tune(
                problem.kernel, {"A": a, "B": b, "C": c, **_gemm.constants(problem)}, _gemm.grid(problem),
                _gemm.SPACES[self.space], _gemm.RESTRICTIONS,
                answer={"C": product(a, b)}, atol=tolerance, rtol=tolerance, max_fevals=self.budget(transfer.transfer),
                time_limit=self.time_limit, db=self.db, shapes=transfer, progress=self.progress,
                first=_gemm.inductor_default(), **({} if self.strategy is None else {"strategy": self.strategy}))
        except NoValidConfigError as error:
            return self._keep(key, problem, template_hash, None, None, {"reason": str(error)}, clock, None)
        phases = {**result.phases, "call_s": time.perf_counter() - called,
                  "first_outcome_s": result.trace[0]["elapsed_s"] if result.trace else None,
                  "last_outcome_s": result.trace[-1]["elapsed_s"] if result.trace else None,
                  "workers": result.workers}
        if result.tuning is not None:
            self._tuned.append({"shape": problem.shape, "tuning": result.tuning})
        config = result.best_config
        constants = _gemm.constants(problem)
        launch = _gemm.grid(problem)(config)

        def template():
            problem.kernel[launch](a, b, c, **constants, **config)

        def aten():
            if problem.op in ("addmm", "baddbmm"):
                with_bias(bias, a, b, out=out)
            else:
                product(a, b, out=out)

        if preparing is not None:
            preparing.join()
        timed = time.perf_counter()
        verdict = _versus.versus_aten(template, aten)
        verdict["seconds"] = time.perf_counter() - timed
        choice = self._keep(key, problem, template_hash, result, config, verdict, clock, phases)
        if result.tuning is not None:
            _kerntune.save_inductor_choice(result.db, result.tuning, json.dumps(config), json.dumps(choice))
        return choice

    def _keep(self, key, problem, template_hash, result, config, verdict, clock, phases) -> dict:
        template_wins = config is not None and (verdict.get("replaces") or not self.fallback)
        entry = [_gemm.entry(problem, config, template_hash) if template_wins else _gemm.aten_entry(problem)]
        choice = {"key": key, **versions(), "op": problem.op, "problem": problem.shape, "entry": entry,
                  "config": config, "versus": verdict, "tuning": None if result is None else result.tuning,
                  "evaluations": 0 if result is None else result.evaluations,
                  "tuning_s": None if result is None else result.wall_s,
                  "finalists_s": (result.finalists or {}).get("seconds") if result is not None else None,
                  "phases": phases,
                  "seconds": time.perf_counter() - clock}
        self.rows.append({**choice, "from_store": False})
        self.stored()[key] = choice
        return choice

    def tune_met(self) -> None:
        """Tunes every GEMM noted while capturing, in order, each learning from the ones
        before it (one many-shape run over the model's GEMMs)."""
        self.capturing = False
        with _crew.kept():
            for key, problem, template_hash in self.met:
                if key not in self.table:
                    self._tune_into_table(key, problem, template_hash)


def _hash_matches(entry: list, template_hash: Optional[str]) -> bool:
    stored = {e.get("template_hash") for e in entry if e.get("template_id", "").startswith("triton::")}
    return not stored or template_hash is None or stored == {template_hash}


#: The (kernel, element type) pairs whose first launch in this process is prepared
#: (``_prepare_launch``).
_prepared: set = set()


def _prepare_launch(problem: _gemm.Problem) -> Optional[threading.Thread]:
    """Builds, in a thread of its own while the tuning runs in other processes, what the
    first launch of the problem's kernel in this process needs besides the kernel: Triton's
    launcher for its argument types, its binder and the driver's utilities (0.6 to 0.7 s on
    the device machine), from a 16 x 16 product compiled and loaded, never launched (so the
    GPU the tuning times runs nothing of this process's). Returns the thread, or None where
    this was done before. Nothing here can fail the tuning: the check against ATen builds
    whatever is still missing itself."""
    key = (problem.kernel, problem.dtype)
    if key in _prepared:
        return None
    _prepared.add(key)
    device, dtype = torch.cuda.current_device(), getattr(torch, problem.dtype)
    rank = len(problem.stride_a)
    tiny = problem._replace(M=16, N=16, K=16, stride_a=(256, 16, 1)[-rank:], stride_b=(256, 16, 1)[-rank:], Q=1)
    config = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 1, "num_warps": 1, "num_stages": 1}

    def prepare():
        with contextlib.suppress(Exception), torch.cuda.device(device):
            compiled = problem.kernel.warmup(dtype, dtype, dtype, **_gemm.constants(tiny), **config, grid=(1,))
            compiled.run  # noqa: B018 (the property loads the kernel and builds its launcher)

    thread = threading.Thread(target=prepare, name="kerntune-prepare-launch", daemon=True)
    thread.start()
    return thread


def _operands(problem: _gemm.Problem):
    """Random inputs with the problem's strides (outputs of about unit size), its output and
    the bias of an addmm or baddbmm."""
    dtype = getattr(torch, problem.dtype)
    generator = torch.Generator(device="cuda").manual_seed(0)
    batch = (problem.Q,) if problem.batched else ()

    def matrix(rows: int, cols: int, stride: tuple, scale: float):
        made = torch.empty_strided((*batch, rows, cols), stride, dtype=dtype, device="cuda")
        made.copy_(torch.randn(*batch, rows, cols, device="cuda", generator=generator) * scale)
        return made

    a = matrix(problem.M, problem.K, problem.stride_a, 1.0)
    b = matrix(problem.K, problem.N, problem.stride_b, problem.K ** -0.5)
    c = torch.empty(*batch, problem.M, problem.N, dtype=dtype, device="cuda")
    bias = torch.randn(problem.N, dtype=dtype, device="cuda", generator=generator)
    return a, b, c, bias


#: In-place methods that change no tensor's values.
_FLAG_METHODS = {"requires_grad_", "share_memory_"}
#: Augmented assignment (``x += y``), which Dynamo records as these functions or methods.
_AUGMENTED = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
              "rshift")
_IN_PLACE_OPERATORS = {getattr(operator, f"i{name}") for name in _AUGMENTED} | {operator.setitem, operator.delitem}
_IN_PLACE_DUNDERS = {f"__i{name}__" for name in _AUGMENTED} | {"__setitem__", "__delitem__"}


def _writes(node) -> bool:
    """Whether a call writes into a tensor: an in-place method or function (``add_``,
    ``x += y``, item assignment), ``inplace=True``, ``out=``, or an operator (a custom op
    too) whose schema marks an argument as written."""
    if node.kwargs.get("inplace") is True or "out" in node.kwargs:
        return True
    target = node.target
    if target in _IN_PLACE_OPERATORS:
        return True
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        # A packet's call resolves among its overloads; its `out=` ones are caught above.
        overloads = [target] if isinstance(target, torch._ops.OpOverload) else \
            [getattr(target, name) for name in target.overloads() if "out" not in name]
        return any(argument.alias_info is not None and argument.alias_info.is_write
                   for overload in overloads for argument in overload._schema.arguments)
    name = target if node.op == "call_method" else getattr(target, "__name__", "")
    if not isinstance(name, str) or name in _FLAG_METHODS:
        return False
    if name.startswith("__") and name.endswith("__"):
        return name in _IN_PLACE_DUNDERS
    return name.endswith("_")


def _communicates(node) -> bool:
    """Whether a call talks to other processes (a collective): run on one rank only, extra
    calls would wait for ranks that do not make them."""
    target = node.target
    where = str(target) if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)) else \
        f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', target)}"
    return "c10d" in where or "distributed" in where


def _mutating_node(graph) -> Optional[Any]:
    """A node of Dynamo's graph that writes into a tensor or talks to other processes, or
    None: running such a graph again to time it would change the caller's tensors, or wait
    for other ranks."""
    for node in graph.graph.nodes:
        if node.op in ("call_function", "call_method") and (_writes(node) or _communicates(node)):
            return node
    return None


def _not_timed_because(graph, example_inputs) -> Optional[str]:
    """Why a compiled graph is not timed against eager on its example inputs, or None."""
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    if not tensors or not all(t.is_cuda for t in tensors):
        return "its inputs are not all on the GPU"
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return "it records autograd (training)"
    node = _mutating_node(graph)
    if node is not None:
        return f"it writes into a tensor or talks to other processes ({node.target})"
    return None


def _call(function, inputs):
    # As Dynamo calls a backend's function: with the inputs as arguments (compile_fx's
    # function carries the `_boxed_call` mark of the one it wraps, but is called unboxed).
    return lambda: function(*inputs)


def faster_of(graph, example_inputs, compiled, session: "Session"):
    """The compiled graph, or Dynamo's graph run eagerly where that is faster beyond noise
    (timed on the graph's example inputs, interleaved with an A/A control of eager, the
    random number generators left as they were); each verdict goes to ``session.graphs``."""
    why_not = _not_timed_because(graph, example_inputs)
    if why_not is not None:
        session.graphs.append({"kept": "compiled", "timed": False, "reason": why_not})
        return compiled
    clock = time.perf_counter()
    try:
        with torch.random.fork_rng(devices=[torch.cuda.current_device()]):
            verdict = _versus.versus_eager(_call(compiled, example_inputs), _call(graph.forward, example_inputs))
    except Exception as error:  # a check that fails (out of memory...) must not fail the compile
        warnings.warn(f"kerntune.torch: the compiled graph stays compiled, not timed against eager "
                      f"({type(error).__name__}: {error})", stacklevel=2)
        session.graphs.append({"kept": "compiled", "timed": False, "reason": f"the check failed: {error}"})
        return compiled
    eager_wins = verdict["verdict"] == "lead_holds"
    session.graphs.append({"kept": "eager" if eager_wins else "compiled", "timed": True, **verdict,
                           "seconds": time.perf_counter() - clock})
    if eager_wins and session.progress:
        print(f"kerntune: the compiled graph took {verdict['compiled_ms']:.4f} ms against eager's "
              f"{verdict['eager_ms']:.4f} ms (beyond noise): it runs eagerly", file=sys.stderr, flush=True)
    return graph.forward if eager_wins else compiled


class Backend:
    """The ``torch.compile`` backend: Inductor, with kerntune's choices handler and session
    around each graph it compiles, and each compiled graph checked against eager
    (``faster_of``) where the session asks for it."""

    def __init__(self, session: Session, options: Optional[dict] = None):
        self.session = session
        # Inductor tunes its other kernels as max-autotune does (coordinate descent on the
        # pointwise and reduction kernels, kept in its own caches); the GEMMs are kerntune's.
        self.patches = {"max_autotune_gemm": True, "max_autotune_pointwise": True, "coordinate_descent_tuning": True,
                        "max_autotune_gemm_backends": "ATEN,TRITON", "inductor_choices_class": KerntuneChoices,
                        **(options or {})}

    def __call__(self, graph, example_inputs) -> Any:
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner

        # Inductor compiles a graph's backward when the first backward pass runs, after
        # compile_fx has returned: the session goes with each inner compile, forward and
        # backward, so that a backward's GEMMs are kerntune's too.
        def inner_compile(*args, **kwargs):
            with self._session():
                compiled = compile_fx_inner(*args, **kwargs)
                if kwargs.get("is_inference") is False and not kwargs.get("is_backward"):
                    # A training graph's forward: its backward's GEMMs tune soon, on
                    # these workers rather than on new ones.
                    _crew.hold(BACKWARD_WAIT_S)
                return compiled

        with self._session():
            compiled = compile_fx(graph, example_inputs, inner_compile=inner_compile, config_patches=self.patches)
        if self.session.eager_check and not self.session.capturing:
            return faster_of(graph, example_inputs, compiled, self.session)
        return compiled

    @contextlib.contextmanager
    def _session(self):
        """This compile's session and choices handler, for a compile of Inductor's; the GEMMs
        that need tuning are tuned one after another on one set of workers, which stop when
        the outermost compile ends (after a training graph's forward, when its backward's
        compile ends: ``_crew.hold``)."""
        from torch._inductor.virtualized import V

        prior = _current()
        _local.session = self.session
        try:
            with V.set_choices_handler(KerntuneChoices()), _crew.kept():
                yield
        finally:
            _local.session = prior

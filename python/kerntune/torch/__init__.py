"""torch.compile's GEMM autotuning through kerntune.

- ``kerntune.torch.compile(model)`` is ``torch.compile(model)`` with TorchInductor's matrix
  multiplications (``mm``, ``addmm``, ``bmm``, ``baddbmm``; fp16 and bf16) chosen by kerntune: each GEMM Inductor
  lowers is answered from kerntune's store (keyed by GPU, torch and Triton versions and the
  GEMM's shapes and strides), or tuned then and kept there, over Inductor's EXHAUSTIVE space
  of its Triton template (``space="wide"``: wider still), with kerntune's parallel compiles,
  isolated timing and verification against ATen's result. The winner reaches Inductor as the
  single entry of its lookup table, so Inductor builds it without benchmarking; where no
  template beats ATen's GEMM (cuBLAS) beyond noise, the entry keeps ATen's. Each compiled
  graph is then timed against the same graph run eagerly, and runs eagerly where that is
  faster beyond noise (``eager_check``).
- ``kerntune.torch.tune(model, *example_inputs)`` tunes a model's GEMMs ahead (one run over
  all of them, each learning from those before it) and returns a ``GemmTable``;
  ``table.save(path)`` writes Inductor's own lookup-table JSON, which
  ``kerntune.torch.compile(model, table=path)`` (or Inductor's ``LookupTableChoices`` alone)
  reads on a machine that tunes nothing.
- ``kerntune.torch.stored()`` is the table of every GEMM the store answers for this GPU.

Needs torch >= 2.10 (``torch._inductor.lookup_table``) and a CUDA GPU.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Callable, Optional, Sequence, Union

from kerntune._errors import ArgumentError, ArgumentTypeError

try:
    import torch
    from torch._inductor import lookup_table as _lookup_table  # noqa: F401  (the hook this needs)
except ImportError as _missing:  # torch absent, or older than the lookup table
    raise ImportError(f"kerntune.torch needs torch 2.10 or newer with torch._inductor.lookup_table ({_missing})") \
        from None

from kerntune.torch import _gemm
from kerntune import _crew, default_db
from kerntune.torch._inductor import Backend, Session, answers, versions

__all__ = ["GemmTable", "compile", "stored", "tune"]

#: Inductor's settings for the compile that lists a model's GEMMs (``tune``): no tuning of the
#: other kernels, and no cached graph that would skip lowering them.
CAPTURE = {"fx_graph_cache": False, "autotune_local_cache": False, "max_autotune_pointwise": False,
           "coordinate_descent_tuning": False}


class GemmTable:
    """The GEMMs kerntune answered for Inductor: ``rows`` (one per GEMM: its lookup key, the
    problem, the entry, the tuned configuration, the verdict against ATen with both times,
    evaluations and seconds, and whether it came from the store), ``graphs`` (each compiled
    graph's check against eager: ``kept`` is ``"compiled"`` or ``"eager"``, with both times or
    the reason it was not timed), ``lookup_table`` (Inductor's ``config.lookup_table.table``),
    ``summary()`` and ``save(path)``."""

    def __init__(self, rows: list, graphs: Optional[list] = None):
        self.rows = rows
        self.graphs = [] if graphs is None else graphs

    @property
    def lookup_table(self) -> dict:
        return {row["key"]: row["entry"] for row in self.rows}

    def save(self, path: Union[str, os.PathLike]) -> str:
        """Writes the lookup table as JSON (what ``torch._inductor.config.lookup_table.table``
        takes); returns the path."""
        with open(path, "w") as file:
            json.dump(self.lookup_table, file, indent=1)
        return str(path)

    def summary(self) -> str:
        lines = [f"{'GEMM':<34} {'choice':<34} {'template ms':>11} {'ATen ms':>8} {'ratio':>6} {'evals':>5} {'s':>6}"]
        for row in self.rows:
            problem = row["problem"]
            batch = f"{problem['Q']}x" if "Q" in problem else ""
            name = f"{row['op']} {batch}{problem['M']}x{problem['N']}x{problem['K']} {problem['dtype']}"
            entry = row["entry"][0]
            if entry["template_id"].startswith("triton::"):
                choice = "triton {BLOCK_M}x{BLOCK_N}x{BLOCK_K} g{GROUP_M} s{num_stages} w{num_warps}".format(**entry)
            else:
                choice = entry["template_id"]
            versus = row.get("versus") or {}
            ratio = versus.get("contender", {}).get("ratio")
            lines.append(f"{name:<34} {choice:<34} {_ms(versus.get('template_ms')):>11} "
                         f"{_ms(versus.get('aten_ms')):>8} {'-' if ratio is None else f'{ratio:.3f}':>6} "
                         f"{'store' if row.get('from_store') else row['evaluations']:>5} {row['seconds']:>6.1f}")
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"GemmTable({len(self)} GEMMs)\n{self.summary()}"


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4f}"


def _table_of(table: Union[None, str, os.PathLike, dict]) -> Optional[dict]:
    if table is None or isinstance(table, dict):
        return table
    try:
        with open(table) as file:
            read = json.load(file)
    except (OSError, ValueError) as error:
        raise ArgumentError(f"table={str(table)!r}: cannot be read as a lookup table ({error})") from None
    if not isinstance(read, dict) or not all(isinstance(v, list) for v in read.values()):
        raise ArgumentError(f"table={str(table)!r}: not a lookup table (a JSON object of key: [entries])")
    return read


def _session(db, tune, table, max_fevals, time_limit, space, fallback, progress, capturing=False,
             strategy=None, eager_check=False) -> Session:
    if not torch.cuda.is_available():
        from kerntune import NoGpuError
        raise NoGpuError("kerntune.torch needs a CUDA GPU: torch.cuda.is_available() is False "
                         "(use torch.compile itself on this machine)")
    return Session(db=db, tune=tune, table=_table_of(table), max_fevals=max_fevals, time_limit=time_limit,
                   space=space, fallback=fallback, progress=progress, capturing=capturing, strategy=strategy,
                   eager_check=eager_check)


def compile(model: Optional[Callable] = None, *, db: Optional[str] = None, tune: bool = True,
            table: Union[None, str, os.PathLike, dict] = None, max_fevals: Optional[int] = 60,
            time_limit: Optional[float] = None, space: str = "exhaustive", fallback: bool = True,
            progress: bool = True, options: Optional[dict] = None, strategy: Optional[str] = None,
            eager_check: bool = True, **torch_compile: Any):
    """``torch.compile(model, ...)`` with kerntune choosing its GEMMs (see the module's
    docstring). Each GEMM is answered from ``table`` (a lookup table or its JSON file), then
    from the store at ``db``; one with no answer is tuned when it is first compiled, with at
    most ``max_fevals`` evaluations (two thirds of them for a GEMM that learns from one tuned
    before it) and ``time_limit`` seconds over ``space`` with
    ``strategy`` (kerntune's default; ``"brute_force"`` with ``max_fevals=None`` measures the
    whole space, as Inductor's EXHAUSTIVE search does), unless
    ``tune=False``, which leaves it to Inductor's own GEMM autotuning. ``fallback=False``
    keeps the tuned template even where ATen's GEMM is as fast. ``eager_check`` times each
    compiled graph against the same graph run eagerly on the inputs of its first call
    (interleaved, with an A/A control; about a second on a transformer layer) and runs it
    eagerly where that is faster beyond noise, so the compiled model is never slower than
    eager; graphs that write into their inputs, record autograd or take inputs off the GPU
    are not timed (``compiled.kerntune.graphs`` says which and why). ``options`` are Inductor
    options, and the other keyword arguments go to ``torch.compile`` (``dynamic``,
    ``fullgraph``...); ``mode`` is not taken: the GEMM choices are kerntune's."""
    if "mode" in torch_compile or "backend" in torch_compile:
        name = "mode" if "mode" in torch_compile else "backend"
        raise ArgumentTypeError(f"kerntune.torch.compile takes no {name}=: it compiles with Inductor and chooses "
                                f"the GEMMs itself (Inductor options go in options=)")
    if model is None:
        return lambda model: compile(model, db=db, tune=tune, table=table, max_fevals=max_fevals,
                                     time_limit=time_limit, space=space, fallback=fallback, progress=progress,
                                     options=options, strategy=strategy, eager_check=eager_check, **torch_compile)
    session = _session(db, tune, table, max_fevals, time_limit, space, fallback, progress, strategy=strategy,
                       eager_check=eager_check)
    compiled = torch.compile(model, backend=Backend(session, options), **torch_compile)
    session.prestart()
    try:
        compiled.kerntune = GemmTable(session.rows, session.graphs)
    except AttributeError:
        pass  # a compiled function without attributes: the table is still in the store
    return compiled


def tune(model: Callable, *example_inputs: Any, inputs: Optional[Sequence[Sequence[Any]]] = None,
         db: Optional[str] = None, table: Union[None, str, os.PathLike, dict] = None,
         max_fevals: Optional[int] = 60, time_limit: Optional[float] = None, space: str = "exhaustive",
         fallback: bool = True, progress: bool = True, options: Optional[dict] = None,
         strategy: Optional[str] = None, **torch_compile: Any) -> GemmTable:
    """Tunes every GEMM Inductor meets when it compiles ``model`` for ``example_inputs``,
    ahead of use, and returns their ``GemmTable``. ``inputs`` (a list of argument tuples, one
    per batch size a server will see: ``[(x1,), (x16,), (x64,)]``) tunes the GEMMs of every
    one of them in the same run. The model is compiled with ATen's GEMMs and called once per
    set of inputs (under the caller's grad mode), which lists the GEMMs; they are then tuned
    one after another, each learning from the nearest one tuned before it, and kept in the
    store. Dynamo's caches are reset before and after (``torch._dynamo.reset()``). The other
    settings are ``compile``'s."""
    if inputs is not None and example_inputs:
        raise ArgumentTypeError("give the example inputs as arguments or inputs=[(...), ...], not both")
    if inputs is None:
        inputs = [example_inputs]
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence) or \
            not all(isinstance(given, (tuple, list)) for given in inputs):
        raise ArgumentTypeError("inputs: give a list of argument tuples, one per set of example inputs "
                                "([(x1,), (x64,)])")
    session = _session(db, True, table, max_fevals, time_limit, space, fallback, progress, capturing=True,
                       strategy=strategy)
    patches = {**CAPTURE, **(options or {})}
    # The workers start while the model's GEMMs are listed, and tune all of them.
    with _crew.kept():
        session.prestart()
        try:
            for given in inputs:
                torch._dynamo.reset()
                torch.compile(model, backend=Backend(session, patches), **torch_compile)(*given)
        finally:
            torch._dynamo.reset()
        if not session.met and not session.rows:
            warnings.warn("kerntune.torch.tune: Inductor lowered no GEMM that kerntune tunes (mm, addmm, bmm or "
                          "baddbmm, fp16 or bf16) for these inputs; nothing was tuned", stacklevel=2)
        session.tune_met()
    return GemmTable(session.rows)


def stored(db: Optional[str] = None, device: Optional[str] = None) -> GemmTable:
    """Every GEMM the store at ``db`` answers for this GPU (or the GPU named ``device``, as
    torch names it: ``"NVIDIA H100 80GB HBM3"``, which needs no GPU here) with this torch and
    Triton, as a table."""
    if device is None and not torch.cuda.is_available():
        from kerntune import NoGpuError
        raise NoGpuError("kerntune.torch.stored: no GPU here to name the answers' GPU: give device= "
                         "(its name as torch.cuda.get_device_name() gives it)")
    found = answers(db if db is not None else default_db(), versions(device))
    return GemmTable([{**choice, "from_store": True} for choice in found.values()])



"""A graph's GEMMs tuned ahead of Inductor's lowering. Dynamo hands the backend its graph
with every value's shape; the GEMMs that ``nn.Linear``, ``matmul`` and the explicit products
will lower to are read off it there and tuned, in graph order, on a thread of their own
while Inductor runs AOTAutograd and its graph passes (seconds on a transformer layer). When
the lowering then meets a GEMM, its answer is ready or on its way. A GEMM read wrongly
(Inductor padded it, or chose other strides) is not met, and one met that was not read is
tuned when met, after those ahead of it. docs/design-notes.md ("GEMMs tuned ahead of the
lowering") has the reasoning and the costs.
"""

from __future__ import annotations

import math
import operator
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Optional

import torch

from kerntune.torch import _gemm

#: Calls whose product Inductor lowers to ``mm`` or ``addmm``, as ``nn.Linear`` makes it.
LINEAR = (torch._C._nn.linear, torch.nn.functional.linear)
#: Calls and methods that multiply two tensors as ``torch.matmul`` does.
MATMUL = (torch.matmul, operator.matmul, "matmul")
#: Explicit products, by the operation Inductor lowers them to.
EXPLICIT = {torch.mm: "mm", "mm": "mm", torch.bmm: "bmm", "bmm": "bmm", torch.addmm: "addmm", "addmm": "addmm",
            torch.baddbmm: "baddbmm", "baddbmm": "baddbmm"}


def enabled() -> bool:
    """Whether GEMMs are tuned ahead (``KERNTUNE_TORCH_AHEAD=0`` tunes each when it is met)."""
    return os.environ.get("KERNTUNE_TORCH_AHEAD", "1") != "0"


def gemms(graph: torch.fx.GraphModule) -> list:
    """The GEMMs of a Dynamo graph as Inductor will lower them, in graph order, each once;
    those kerntune does not tune (other element types, shapes not known) are left out."""
    found = []
    for node in graph.graph.nodes:
        problem = _problem(graph, node)
        if problem is not None and problem not in found:
            found.append(problem)
    return found


def _value(arg):
    if isinstance(arg, torch.fx.Node):
        arg = arg.meta.get("example_value")
    return arg if isinstance(arg, torch.Tensor) else None


def _known(*tensors) -> bool:
    return all(t is not None and all(isinstance(d, int) for d in (*t.shape, *t.stride())) for t in tensors)


def _problem(graph: torch.fx.GraphModule, node: torch.fx.Node) -> Optional[_gemm.Problem]:
    target = node.target
    if node.op == "call_module":
        module = graph.get_submodule(target)
        if not isinstance(module, torch.nn.Linear) or not node.args:
            return None
        return _linear(_value(node.args[0]), module.weight, module.bias is not None)
    if node.op not in ("call_function", "call_method"):
        return None
    args = [_value(a) for a in node.args]
    if target in LINEAR and args:
        weight = args[1] if len(args) > 1 else _value(node.kwargs.get("weight"))
        bias = (len(node.args) > 2 and node.args[2] is not None) or node.kwargs.get("bias") is not None
        return _linear(args[0], weight, bias)
    if target in MATMUL and len(args) == 2:
        return _matmul(*args)
    if target in EXPLICIT and len(args) >= 2:
        a, b = args[-2:]
        if not _known(a, b):
            return None
        return _gemm.problem_of(EXPLICIT[target], [a.shape, b.shape], [a.stride(), b.stride()], [a.dtype, b.dtype])
    return None


def _linear(x, weight, bias: bool) -> Optional[_gemm.Problem]:
    """``linear(x, weight, bias)``: an ``mm`` of ``x`` folded to two dimensions and the
    weight's transposed view; ``addmm`` with a bias where ATen folds it into the product (a
    two-dimensional input, or a contiguous three-dimensional one)."""
    if not _known(x, weight) or x.dim() < 2 or weight.dim() != 2:
        return None
    if x.dim() > 2 and not x.is_contiguous():
        return None
    k = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    stride_a = tuple(x.stride()) if x.dim() == 2 else (k, 1)
    op = "addmm" if bias and x.dim() <= 3 else "mm"
    stride_b = (weight.stride(1), weight.stride(0))
    return _gemm.problem_of(op, [(rows, k), (weight.shape[1], weight.shape[0])], [stride_a, stride_b],
                            [x.dtype, weight.dtype])


def _matmul(a, b) -> Optional[_gemm.Problem]:
    """``a @ b`` where Inductor lowers it to one ``mm`` or ``bmm``: two matrices, a
    contiguous stack of rows times a matrix (folded), or two batches of one size."""
    if not _known(a, b):
        return None
    if a.dim() == 2 and b.dim() == 2:
        return _gemm.problem_of("mm", [a.shape, b.shape], [a.stride(), b.stride()], [a.dtype, b.dtype])
    if a.dim() > 2 and b.dim() == 2 and a.is_contiguous():
        k = a.shape[-1]
        return _gemm.problem_of("mm", [(math.prod(a.shape[:-1]), k), b.shape], [(k, 1), b.stride()], [a.dtype, b.dtype])
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] == b.shape[0]:
        return _gemm.problem_of("bmm", [a.shape, b.shape], [a.stride(), b.stride()], [a.dtype, b.dtype])
    return None


class Ahead:
    """GEMMs measured on a thread of their own, one after another in the order asked for:
    ``start`` queues one, ``result`` waits for it (queueing it first if it was not), and
    ``close`` drops those not begun and waits for the one being measured (a tuning cannot be
    stopped halfway from another thread; it takes seconds)."""

    def __init__(self, measure: Callable[[_gemm.Problem], dict]):
        self._measure = measure
        self._device = torch.cuda.current_device() if torch.cuda.is_available() else None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kerntune-gemms")
        self._futures: dict = {}
        self.met: set = set()

    def start(self, problem: _gemm.Problem) -> Future:
        if problem not in self._futures:
            self._futures[problem] = self._pool.submit(self._on_thread, problem)
        return self._futures[problem]

    def result(self, problem: _gemm.Problem) -> dict:
        self.met.add(problem)
        return self.start(problem).result()

    def _on_thread(self, problem: _gemm.Problem) -> dict:
        if self._device is not None:
            torch.cuda.set_device(self._device)  # a thread's device is its own
        return self._measure(problem)

    def close(self) -> list:
        """Stops; returns the GEMMs measured (or begun) ahead that Inductor never asked for."""
        for future in self._futures.values():
            future.cancel()
        self._pool.shutdown(wait=True)
        return [p for p, f in self._futures.items() if p not in self.met and not f.cancelled()]

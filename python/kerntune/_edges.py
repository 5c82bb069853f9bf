"""Edge sizes for Triton kernels (``tune(..., edge_args=[...])``).

A configuration whose blocks divide the call's sizes never exercises its masks there: one
that forgets a mask, or drops the tail, passes at 4096 and is wrong at 4095. Each entry of
``edge_args`` is another call of the kernel at such a size (the arguments that differ from
the call's), on which the best configurations are also checked after the search, before a
winner is chosen.

A size that no block divides is another Triton specialization, so another compile, which
runs here through Triton's own launch: it is done for the few configurations that can win
(the Rust side asks, best first, until enough pass, see ``kerntune_run::vetting``), not for
every configuration the search measured. The expected outputs at each size are the
reference configurations' (which must agree there, as on the call's own tensors) or the
``answer`` given with the size. The launches run in the caller's process, so every tensor
they touch is a copy placed between guard zones (``Guarded``): a configuration that stores
past a tensor's end there is caught writing into its guard, not into the caller's memory.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from kerntune._arguments import _grid_function, _is_tensor
from kerntune._errors import ArgumentError, ArgumentTypeError
from kerntune._reference import AGREEING_CONFIGS, _agreement_check, _default_tolerance, _difference, _run_configs
from kerntune._space import launch_options


class Edge:
    """One edge size: its label, its call (the kernel's arguments there), its grid function
    and its expected outputs (``{name: tensor}``, filled by ``references``)."""

    def __init__(self, label: str, call: dict, grid: Callable, answer: Optional[Mapping[str, Any]]):
        self.label = label
        self.call = call
        self.grid = grid
        self.answer = None if answer is None else dict(answer)
        self.expected: dict = {}


def bind(fn, call: Mapping[str, Any], edge_args, params: Mapping[str, Sequence], grid) -> list[Edge]:
    """The edges of ``edge_args``: a list whose entries map argument names to the values
    that differ from the call's, or are ``(args, answer)`` pairs."""
    if edge_args is None:
        return []
    if isinstance(edge_args, Mapping) or not isinstance(edge_args, Sequence):
        raise ArgumentTypeError("edge_args: give a list of argument dicts, one per size, e.g. "
                                "[{'x': x_small, 'out': out_small, 'n': 4095}]")
    edges = []
    for number, entry in enumerate(edge_args, 1):
        where = f"edge_args[{number - 1}]"
        answer = None
        if isinstance(entry, tuple) and len(entry) == 2:
            entry, answer = entry
            if not isinstance(answer, Mapping):
                raise ArgumentTypeError(f"{where}: the answer of an (args, answer) pair must be a dict of output "
                                        f"names to expected tensors, got {type(answer).__name__}")
        if not isinstance(entry, Mapping) or not entry:
            raise ArgumentTypeError(f"{where}: give a dict of the arguments that differ from args at this size")
        unknown = [name for name in entry if name not in call]
        if unknown:
            raise ArgumentError(f"{where}: {', '.join(unknown)} is not an argument of {fn.__name__} "
                                f"(or is a tuned parameter)")
        edge_call = {**call, **entry}
        for name in answer or {}:
            if not _is_tensor(edge_call.get(name)):
                raise ArgumentError(f"{where}: the answer names '{name}', which is not a tensor argument of {fn.__name__}")
        same = all(value is call[name] or (not _is_tensor(value) and value == call[name])
                   for name, value in entry.items())
        if same:
            raise ArgumentError(f"{where}: these are the call's own arguments; give another size")
        label = _label(call, edge_call) or f"set {number}"
        if any(edge.label == label for edge in edges):
            raise ArgumentError(f"{where}: {label} is listed twice")
        edges.append(Edge(label, edge_call, _grid_function(grid, edge_call, list(params)), answer))
    return edges


def _label(call: Mapping[str, Any], edge_call: Mapping[str, Any]) -> str:
    """What differs at an edge size, as shown in reasons: the scalars that changed
    (``n_elements = 4095``), else the shapes (``x: 4095x1``); empty when neither did."""
    scalars = [f"{name} = {value!r}" for name, value in edge_call.items()
               if isinstance(value, (int, float)) and not isinstance(value, bool) and value != call[name]]
    if scalars:
        return ", ".join(scalars)
    shapes = [f"{name}: {'x'.join(str(d) for d in value.shape)}" for name, value in edge_call.items()
              if _is_tensor(value) and tuple(value.shape) != tuple(call[name].shape)]
    return ", ".join(shapes)


def references(fn, edges: Sequence[Edge], configs, reset_to_zero, hooks, atol, rtol) -> None:
    """Fills each edge's expected outputs: its answer, else the outputs of the reference
    configurations ``configs`` run through Triton there (they must agree)."""
    for edge in edges:
        if edge.answer is not None:
            edge.expected = edge.answer
            continue
        runs, errors = _run_configs(fn, edge.grid, edge.call, configs, reset_to_zero, hooks,
                                   AGREEING_CONFIGS, copy=_guarded_run)
        if not runs:
            raise RuntimeError(f"{fn.__name__}: no reference configuration ran at the edge size {edge.label}: "
                               + "; ".join(errors[:2]))
        _agreement_check(fn, edge.call, reset_to_zero, atol, rtol, f" at the edge size {edge.label}")(runs)
        if not runs[0][1]:
            raise ArgumentError(f"{fn.__name__}: at the edge size {edge.label} the reference configurations changed "
                                f"no tensor, so there is nothing to check there")
        edge.expected = runs[0][1]


#: Bytes of the pattern each guard zone is filled with.
GUARD_BYTE = 0xA5


class Guarded:
    """Copies of a call's tensors, each placed between two guard zones (at least 1 MiB, and a
    quarter of the tensor, on either side) filled with a pattern. The checks run in the
    caller's process, on configurations that may be wrong exactly there: one that stores
    past the end of a tensor at an edge size writes into its guard, where ``overrun`` sees
    it, instead of into the caller's tensors or past mapped memory."""

    def __init__(self, call: Mapping[str, Any]):
        self.copies, self.buffers = {}, {}
        for name, value in call.items():
            if not _is_tensor(value):
                self.copies[name] = value
            elif not value.is_contiguous():
                self.copies[name] = value.clone()  # strided views keep their layout, unguarded
            else:
                self.copies[name], self.buffers[name] = self._guarded(value)

    @staticmethod
    def _guarded(tensor):
        import torch

        size = tensor.numel() * tensor.element_size()
        guard = max(1 << 20, -(-size // 4 // 256) * 256)
        buffer = torch.full((guard + size + guard,), GUARD_BYTE, dtype=torch.uint8, device=tensor.device)
        copy = buffer[guard:guard + size].view(tensor.dtype).view(tensor.shape)
        copy.copy_(tensor)
        return copy, (buffer, guard, size)

    def overrun(self) -> Optional[str]:
        """Which tensor a launch wrote outside of, and how far, or None."""
        for name, (buffer, guard, size) in self.buffers.items():
            before = int((buffer[:guard] != GUARD_BYTE).sum().item())
            after = int((buffer[guard + size:] != GUARD_BYTE).sum().item())
            if before or after:
                return f"it writes outside {name} ({before} bytes changed before it, {after} after it)"
        return None


def _guarded_run(call: Mapping[str, Any]):
    """The copies a reference run at an edge size launches on, guarded (see ``Guarded``), and
    the check after it: a reference configuration that writes outside a tensor there cannot
    be the reference."""
    guarded = Guarded(call)

    def check():
        overrun = guarded.overrun()
        if overrun is not None:
            raise RuntimeError(overrun)
    return guarded.copies, check


def checker(fn, edges: Sequence[Edge], names: Sequence[str], restore_value, reset_to_zero, hooks, atol, rtol):
    """The check the Rust side calls with a configuration's values (in ``names``' order):
    None when it computes the expected outputs at every edge size, else why not."""
    import torch

    def check(values) -> Optional[str]:
        config = dict(zip(names, values))
        launch = launch_options(config)
        for edge in edges:
            guarded = Guarded(edge.call)
            copies = guarded.copies
            for name in edge.expected:
                if name not in restore_value and name not in reset_to_zero:
                    _poison(copies[name])
            for name in reset_to_zero:
                copies[name].zero_()
            try:
                grid = edge.grid(list(values))
                hooks.around(lambda: fn[lambda meta: tuple(grid)](**copies, **launch), {**copies, **launch}, config)
                torch.cuda.synchronize()
            except Exception as error:  # this configuration fails there
                return f"at the edge size {edge.label}: {type(error).__name__}: {error}"
            overrun = guarded.overrun()
            if overrun is not None:
                return f"at the edge size {edge.label} (the call's size passed): {overrun}"
            for name, expected in edge.expected.items():
                actual = copies[name]
                tolerance = _default_tolerance(actual)
                found = _difference(actual, expected.to(actual.dtype).reshape(actual.shape),
                                    tolerance if atol is None else atol, tolerance if rtol is None else rtol)
                if found is not None:
                    return f"at the edge size {edge.label} (the call's size passed): {name}: {found}"
        return None
    return check


def _poison(tensor) -> None:
    """Fills an output before the checked launch, so that an element the kernel does not
    write shows: NaN for floating point (it never passes), else a pattern."""
    if tensor.is_floating_point():
        tensor.fill_(float("nan"))
    elif tensor.dtype.is_signed:
        tensor.fill_(-0x5A)
    else:
        tensor.fill_(0x5A)

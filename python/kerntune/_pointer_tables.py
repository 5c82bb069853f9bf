"""Pointer tables: integer tensors holding the device addresses of other tensors, which the
kernel loads and casts to pointers (Triton's grouped-GEMM tutorial passes each group's
matrices that way).

The benchmark worker measures on copies of the arguments in a process of its own, where the
caller's addresses mean nothing. So each tensor a table points into travels as one more
buffer after the kernel's own arguments, named after the first entry that points into it
(``group_c_ptrs[2]``), and the job lists the table's entries as relocations: the worker
writes its copies' addresses there. In this process the reference runs launch a table over
clones of those tensors, so that what a kernel writes through a table is found, compared and
checked like any other output, and the caller's tensors are left alone.

A table is recognised by its contents: a 64-bit integer CUDA tensor whose nonzero entries all
lie inside this process's CUDA allocations. Each entry is then matched with the live tensor
whose storage holds it, which gives its element type; an address in no live tensor is refused.
"""

from __future__ import annotations

import gc
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

from kerntune._errors import ArgumentError

#: Integer tensors up to this many elements are read to see whether they hold addresses.
LIMIT = 1 << 16

#: The attribute that marks this module's copy of a table with what it points into.
_MARK = "_kerntune_pointer_table"


class Entry(NamedTuple):
    """Entry ``index`` of a table points ``offset`` bytes into target ``target``."""
    index: int
    target: int
    offset: int


class Table(NamedTuple):
    """What a table points into: ``targets`` (name, whole storage as a flat tensor) and
    the table's nonzero entries."""
    targets: list
    entries: list


def pointer_table(values: Sequence[int], segments: Sequence[tuple]) -> bool:
    """Whether ``values`` are device addresses: every nonzero one inside one of the memory
    ``segments`` (``(address, size)``) this process allocated, and at least one nonzero."""
    nonzero = [v for v in values if v]
    return bool(nonzero) and all(any(start <= v < start + size for start, size in segments) for v in nonzero)


def mark(fn, call: Mapping[str, Any], is_tensor: Callable[[Any], bool]) -> dict:
    """``call`` with each pointer table replaced by a copy that knows its targets. Raises
    ``ArgumentError`` when a table holds an address no live tensor contains."""
    import torch

    marked = dict(call)
    segments = storages = None
    for name, value in call.items():
        if not (is_tensor(value) and value.is_cuda and value.dtype in (torch.int64, torch.uint64)
                and 0 < value.numel() <= LIMIT):
            continue
        if segments is None:
            segments = [(s["address"], s["total_size"]) for s in torch.cuda.memory_snapshot()]
        values = value.flatten().tolist()
        if not pointer_table(values, segments):
            continue
        if storages is None:
            storages = _live_storages(value.device)
        targets, entries, found = [], [], {}
        for index, address in enumerate(values):
            if not address:
                continue
            holder = next(((start, size, tensor) for start, size, tensor in storages if start <= address < start + size), None)
            if holder is None:
                raise ArgumentError(
                    f"{fn.__name__}: argument {name} holds device addresses (a pointer table), and entry {index} "
                    f"({address:#x}) lies in no tensor this program holds; kerntune copies the tensors a table points "
                    f"into, so keep them alive as tensors while the kernel is tuned")
            start, _, tensor = holder
            if start not in found:
                found[start] = len(targets)
                targets.append((f"{name}[{index}]", tensor))
            entries.append(Entry(index, found[start], address - start))
        copy = value.clone()
        setattr(copy, _MARK, Table(targets, entries))
        marked[name] = copy
    return marked


def _live_storages(device) -> list:
    """``(address, bytes, flat tensor over the whole storage)`` of every live tensor's
    storage on ``device``, found among the objects the garbage collector tracks."""
    import torch

    storages = {}
    # The type, not isinstance: that would ask every object for its __class__, and some
    # modules' deprecated attributes warn when asked.
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.Tensor) and obj.device == device and not obj.is_sparse:
            storage = obj.untyped_storage()
            start, size = storage.data_ptr(), storage.nbytes()
            if size and start not in storages:
                flat = torch.empty(0, dtype=obj.dtype, device=device)
                flat.set_(storage, 0, (size // obj.element_size(),))
                storages[start] = (start, size, flat)
    return list(storages.values())


def table_of(value) -> Optional[Table]:
    return getattr(value, _MARK, None)


def targets(call: Mapping[str, Any]) -> dict:
    """Every table's targets in ``call``, by name, in the order the job lists them."""
    return {target: tensor for value in call.values() if table_of(value) for target, tensor in table_of(value).targets}


def cloned(value):
    """A table over clones of ``value``'s targets (itself a copy that knows them)."""
    import torch

    table = table_of(value)
    clones = [(name, tensor.clone()) for name, tensor in table.targets]
    values = [0] * value.numel()
    for entry in table.entries:
        values[entry.index] = clones[entry.target][1].data_ptr() + entry.offset
    copy = torch.tensor(values, dtype=torch.int64).view(value.dtype).reshape(value.shape).to(value.device)
    setattr(copy, _MARK, Table(clones, table.entries))
    return copy


def changed(call: Mapping[str, Any], copies: Mapping[str, Any], same: Callable[[Any, Any], bool]) -> dict:
    """The targets of ``copies``' tables whose contents differ from ``call``'s."""
    before, after = targets(call), targets(copies)
    return {name: after[name] for name in before if name in after and not same(after[name], before[name])}


def positions(fn, call: Mapping[str, Any]) -> dict:
    """Each target's place in the job's arguments: after the kernel's own."""
    return {name: len(fn.arg_names) + index for index, name in enumerate(targets(call))}


def relocations(fn, call: Mapping[str, Any]) -> list:
    """The job's ``relocations``: per table entry, the table's place, the entry, its
    target's place and the offset in bytes."""
    places = positions(fn, call)
    found = []
    for name, value in call.items():
        table = table_of(value)
        if table is not None:
            position = fn.arg_names.index(name)
            found += [{"table": position, "entry": entry.index, "target": places[table.targets[entry.target][0]],
                       "offset": entry.offset} for entry in table.entries]
    return found

"""The reference a Triton tuning checks every configuration against when the caller gives
no ``answer``: the outputs of the first configurations that run through Triton itself,
which must agree, and further input sets (the call's inputs shuffled) with the outputs the
same configurations compute there."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from kerntune import _pointer_tables
from kerntune._arguments import _tensor_of, _with_tensor, _write_tensor
from kerntune._errors import ReferenceDisagreementError
from kerntune._space import launch_options


#: Configurations that run through Triton and must agree before their outputs are the
#: reference (without ``answer``): one wrong configuration cannot then set the standard
#: every other is held to. Each costs one compile in this process (1.5 s for the tutorial
#: matmul) and one launch, once per tuning; two detect a wrong one, a third would not say
#: more than "pass answer=".
AGREEING_CONFIGS = 2


def _clones(call):
    """Copies of a call's tensors (the rest as given; a pointer table over copies of what it
    points into), and no check after a launch."""
    def clone(v):
        if _pointer_tables.table_of(v) is not None:
            return _pointer_tables.cloned(v)
        return _with_tensor(v, _tensor_of(v).clone()) if _tensor_of(v) is not None else v
    return {k: clone(v) for k, v in call.items()}, None


def _named_tensor(call, name):
    """The tensor an argument holds, or the one a pointer-table entry named ``name`` points into."""
    return _tensor_of(call[name]) if name in call else _pointer_tables.targets(call)[name]


def _position(fn, call, name) -> int:
    """Where ``name`` is among the job's arguments: a pointer table's targets come after the kernel's own."""
    return fn.arg_names.index(name) if name in fn.arg_names else _pointer_tables.positions(fn, call)[name]


def _run_configs(fn, grid, call, configs, reset_to_zero, hooks, limit, copy=_clones):
    """Runs configurations through Triton itself, each on copies of the tensors, until
    ``limit`` have run. Returns ``[(config, {name: changed tensor})]`` and the errors of those
    that did not run. ``copy(call)`` makes the copies and a check called after the launch,
    whose exception fails the run (default: ``_clones``)."""
    import torch

    runs, errors = [], []
    for config in configs:
        if len(runs) == limit:
            break
        copies, after = copy(call)
        for name in reset_to_zero:
            copies[name].zero_()
        launch = launch_options(config)
        try:
            hooks.around(lambda: fn[lambda meta: tuple(grid(list(config.values())))](**copies, **launch), {**copies, **launch}, config)
            torch.cuda.synchronize()
            if after is not None:
                after()
        except Exception as error:  # try the next configuration
            errors.append(f"{config}: {type(error).__name__}: {error}")
            continue
        # A pointer table's copy points at copies: what changed is what it points into.
        changed = {k: _tensor_of(copies[k]) for k, v in call.items()
                   if _tensor_of(v) is not None and k not in reset_to_zero and _pointer_tables.table_of(v) is None
                   and not _same_bytes(_tensor_of(copies[k]), _tensor_of(v))}
        changed.update({k: copies[k] for k in reset_to_zero if copies[k].count_nonzero().item() > 0})
        changed.update(_pointer_tables.changed(call, copies, _same_bytes))
        runs.append((config, changed))
    return runs, errors


def _agreement_check(fn, call, reset_to_zero, atol, rtol, where=""):
    """A function that raises ``ReferenceDisagreementError`` when reference runs disagree."""
    import torch

    def unchanged(name):
        return torch.zeros_like(call[name]) if name in reset_to_zero else _named_tensor(call, name)

    def difference(name, actual, expected):
        tolerance = _default_tolerance(expected)
        return _difference(actual, expected, tolerance if atol is None else atol, tolerance if rtol is None else rtol)

    def check(runs):
        problem = _disagreement(runs, unchanged, difference)
        if problem is not None:
            raise ReferenceDisagreementError(
                f"{fn.__name__}: without answer=, the reference is the outputs of the first configurations that run "
                f"through Triton, and they disagree{where}: {problem}. One of them is wrong (or the kernel is not "
                f"deterministic beyond atol/rtol); give answer= (the expected outputs) to check against")
    return check


def _reference_outputs(fn, grid, call, configs, reset_to_zero, hooks, atol, rtol):
    """Runs the first configurations that run (up to ``AGREEING_CONFIGS``) through Triton
    itself, each on copies of the tensors: the tensors a run changes are the outputs. Their
    outputs must agree within the tolerances; the first configuration's are the reference.
    Returns the runs, the first being the reference."""
    runs, errors = _run_configs(fn, grid, call, configs, reset_to_zero, hooks, AGREEING_CONFIGS)
    if not runs:
        raise RuntimeError("no configuration ran through Triton to give a reference:\n" + "\n".join(errors[:5]))
    if not any(changed for _, changed in runs):
        written = _written_outputs(fn, grid, call, runs[0][0], reset_to_zero, hooks)
        runs = [(config, {name: _tensor_of(call[name]).clone() for name in written}) for config, _ in runs]
    _agreement_check(fn, call, reset_to_zero, atol, rtol)(runs)
    return runs


def _written_outputs(fn, grid, call, config, reset_to_zero, hooks) -> list:
    """The floating-point tensors a launch of ``config`` writes, for a call whose outputs
    already held what the kernel computes (an output from ``torch.empty`` on memory where
    the same product was freed: a benchmark calling one computation after another). Each
    such tensor in turn is filled with NaN on a copy, the others left as they are, and is an
    output when the launch leaves a number in it. Index and pointer tensors keep their
    values, so no launch reads out of bounds."""
    written = []
    for name, value in call.items():
        tensor = _tensor_of(value)
        if tensor is None or not tensor.is_floating_point() or name in reset_to_zero:
            continue

        def copy(call, name=name):
            copies, _ = _clones(call)
            _tensor_of(copies[name]).fill_(float("nan"))
            return copies, lambda: None if _tensor_of(copies[name]).isnan().all().item() else written.append(name)

        _run_configs(fn, grid, call, [config], reset_to_zero, hooks, 1, copy=copy)
    return written


#: Input sets beyond the call's own on which every configuration is checked when the
#: reference configurations compute the expected outputs (``verify_sets=``): a
#: configuration right on one set of inputs by accident (a bound the data happen to respect,
#: a race the data hide) is caught on the next, as ``[verify] sets`` does for CUDA C.
VERIFY_SETS = 2


def _shuffled_inputs(call, outputs, reset_to_zero, number: int) -> dict:
    """The call's tensors with each floating-point input's elements shuffled, seeded by
    the set's ``number`` and the tensor's place: the same values in other places, so the same range and no NaN or
    infinity the call lacked. Integer tensors (indices, offsets, lengths) keep their data,
    as do outputs, zeroed tensors and tensors that are not plain contiguous blocks."""
    import torch

    shuffled = {}
    for index, (name, value) in enumerate(call.items()):
        tensor = _tensor_of(value)
        if (tensor is not None and tensor.is_floating_point() and name not in outputs and name not in reset_to_zero
                and tensor.is_contiguous() and tensor.numel() > 1):
            # Drawn on the tensor's device (no permutation built on the host and copied over),
            # each tensor its own.
            generator = torch.Generator(device=tensor.device).manual_seed(0x5EED + 1009 * number + index)
            order = torch.randperm(tensor.numel(), generator=generator, device=tensor.device)
            shuffled[name] = _with_tensor(value, tensor.reshape(-1)[order].reshape(tensor.shape))
    return shuffled


def _extra_sets(fn, grid, call, runs, reset_to_zero, hooks, atol, rtol, count, workdir, positions):
    """Input sets beyond the call's own, with the outputs the reference configurations
    (``runs``, which agreed on the call's tensors) compute on each; they must agree again.
    Returns the job's ``extra_sets``: empty when no input can be shuffled."""
    sets = []
    expected_names = list(runs[0][1])
    for number in range(1, count + 1):
        shuffled = _shuffled_inputs(call, set(expected_names), reset_to_zero, number)
        if not shuffled:
            return []
        data = {**call, **shuffled}
        configs = [config for config, _ in runs]
        again, errors = _run_configs(fn, grid, data, configs, reset_to_zero, hooks, len(configs))
        if len(again) < len(configs):
            raise RuntimeError(f"{fn.__name__}: a reference configuration failed on input set {number + 1} "
                               f"(the call's inputs shuffled): " + "; ".join(errors[:2]))
        _agreement_check(fn, data, reset_to_zero, atol, rtol,
                         f" on input set {number + 1} (the call's floating-point inputs shuffled)")(again)
        inputs = []
        for name, value in shuffled.items():
            path = os.path.join(workdir, f"{name}.set{number}.bin")
            _write_tensor(_tensor_of(value), path)
            inputs.append([positions[name], path])
        expected = []
        for name in expected_names:
            path = os.path.join(workdir, f"{name}.set{number}.expected.bin")
            output = again[0][1].get(name)
            if output is None:  # this set's run left it as the call had it (zeroed, if reset)
                output = call[name].new_zeros(call[name].shape) if name in reset_to_zero else _named_tensor(call, name)
            _write_tensor(output, path)
            expected.append(path)
        sets.append({"inputs": inputs, "expected": expected})
    return sets


def _disagreement(runs, unchanged, difference) -> Optional[str]:
    """How the runs' outputs differ, or None when they agree. ``runs`` holds
    ``(config, {name: output})`` of each run, the first being the reference; a tensor one
    run leaves alone is ``unchanged(name)`` there; ``difference(name, actual, expected)``
    says how two outputs differ beyond the tolerances, or None."""
    (first, expected), others = runs[0], runs[1:]
    for config, outputs in others:
        for name in sorted(set(expected) | set(outputs)):
            actual = outputs[name] if name in outputs else unchanged(name)
            found = difference(name, actual, expected[name] if name in expected else unchanged(name))
            if found is not None:
                return f"{name} of {_describe_config(config)} differs from that of {_describe_config(first)}: {found}"
    return None


def _describe_config(config: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in config.items()) + "}"


def _difference(actual, expected, atol: float, rtol: float) -> Optional[str]:
    """How ``actual`` differs from ``expected`` (torch tensors), by the rule the benchmark
    worker applies: an element passes when ``|actual - expected| <= atol + rtol * |expected|``,
    and NaN never passes. None when every element passes."""
    a, e = actual.reshape(-1), expected.reshape(-1)
    if expected.is_floating_point():
        a, e = a.double(), e.double()
        bad = ~((a - e).abs() <= atol + rtol * e.abs())
    else:
        bad = a != e
    count = int(bad.sum().item())
    if count == 0:
        return None
    first = int(bad.nonzero()[0].item())
    return (f"{count} of {bad.numel()} elements differ beyond atol {atol}, rtol {rtol} "
            f"(first at index {first}: {a[first].item()!r} against {e[first].item()!r})")


def _same_bytes(a, b) -> bool:
    import torch

    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _default_tolerance(tensor) -> float:
    return 1e-2 if tensor.is_floating_point() else 0.0

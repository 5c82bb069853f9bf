"""The Python code a Triton user runs around launches (``pre_hook``, ``post_hook``,
``triton.Config.pre_hook``), and the tensor descriptors' block shapes those hooks set."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from kerntune._arguments import _is_descriptor, _with_tensor
from kerntune._space import config_key


class Hooks:
    """Python code a Triton user runs around launches (``pre_hook``, ``post_hook``,
    ``triton.Config.pre_hook``). kerntune runs them around the launches made in this
    process: the reference runs and every launch of the chosen configuration. The benchmark
    worker launches the cubins on its own copies of the tensors, where Python cannot run;
    ``reset_to_zero`` and ``restore_value`` say declaratively what such hooks usually do."""

    def __init__(self, pre_hook=None, post_hook=None, config_hooks=None):
        self.pre_hook = pre_hook
        self.post_hook = post_hook
        self.config_hooks = config_hooks or {}

    @classmethod
    def of(cls, listed, pre_hook=None, post_hook=None) -> "Hooks":
        """The call's hooks, with each listed configuration's ``pre_hook`` (``listed``: a
        ``Listed`` space, or None)."""
        return cls(pre_hook, post_hook, listed.config_hooks() if listed is not None else None)

    def before(self, nargs: dict, config: Mapping[str, Any]) -> None:
        """The hooks that run before a launch of ``config``: its own, then the call's."""
        config_hook = self.config_hooks.get(config_key(config))
        if config_hook is not None:
            config_hook(nargs)
        if self.pre_hook is not None:
            self.pre_hook(nargs)

    @property
    def active(self) -> bool:
        """Whether there is any hook to run."""
        return bool(self.config_hooks or self.pre_hook or self.post_hook)

    def around(self, launch, nargs: dict, config: Mapping[str, Any]):
        if not self.active:
            return launch()
        self.before(nargs, config)
        try:
            result = launch()
        except Exception as error:
            if self.post_hook is not None:
                self.post_hook(nargs, exception=error)
            raise
        if self.post_hook is not None:
            self.post_hook(nargs, exception=None)
        return result


def _descriptor_blocks(call: Mapping[str, Any], names: Sequence[str], hooks: Hooks):
    """For a call with host-side tensor descriptors, the function the run asks for each
    configuration's block shapes (values in the order of ``names``; JSON ``{name: [dims]}``
    back): the hooks that run before a launch set them, as Triton's tutorials do in a
    config's ``pre_hook``, here on copies of the descriptors. None without descriptors."""
    described = [name for name, value in call.items() if _is_descriptor(value)]
    if not described:
        return None

    def blocks(values):
        config = dict(zip(names, values))
        nargs = {**call, **{name: _with_tensor(call[name], call[name].base) for name in described}, **config}
        hooks.before(nargs, config)
        return json.dumps({name: [int(n) for n in nargs[name].block_shape] for name in described})
    return blocks

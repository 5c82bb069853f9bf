"""Launching a tuned native schedule through Triton."""

from __future__ import annotations

import base64
from typing import Any, Mapping


def use_schedule(kernel, args: Mapping[str, Any], grid, config: Mapping[str, Any], cubin) -> None:
    """Makes Triton launch ``cubin`` (a schedule kerntune tuned for this configuration,
    ``result.schedule["cubin"]``, base64 or bytes) whenever it launches ``kernel`` with this
    configuration and arguments like ``args``: the cubin replaces the one in Triton's
    compiled kernel, which Triton's cache returns for every such call."""
    from triton.runtime import driver

    from kerntune._space import launch_options
    from kerntune._arguments import jit_function

    if isinstance(cubin, str):
        cubin = base64.b64decode(cubin)
    fn = jit_function(kernel)
    launch = launch_options(config)
    compiled = fn.warmup(**args, **launch, grid=grid)
    compiled._init_handles()
    device = driver.active.get_current_device()
    module, function, _, _, _ = driver.active.utils.load_binary(compiled.name, cubin, compiled.metadata.shared, device)
    compiled.module, compiled.function = module, function

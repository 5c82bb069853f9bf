"""The request of a call: the settings the user gave, as the run facade reads them
(``kerntune_run::Request``, which applies every default). The defaults the signatures show
come from there too, so that Python writes none of its own."""

from __future__ import annotations

import json

from kerntune import _kerntune

#: The defaults of ``kerntune.tune``, ``kerntune.compile`` and ``@kerntune.autotune``:
#: ``strategy``, ``finalists``, ``finalists_within``, ``arch``, ``controls_budget``...
DEFAULTS = json.loads(_kerntune.request_defaults("python"))

#: The defaults of Kernel Tuner's ``tune_kernel`` (its own strategy, ``brute_force``).
KERNEL_TUNER_DEFAULTS = json.loads(_kerntune.request_defaults("kernel_tuner"))

#: The settings of a request that go in its ``search``.
SEARCH = ("strategy", "strategy_options", "max_fevals", "time_limit", "target", "seed")


def request(**settings) -> dict:
    """A request with the settings given; one that is None is left to the facade's default.
    Those of ``SEARCH`` go in its ``search``."""
    search = {name: settings.pop(name) for name in SEARCH if settings.get(name) is not None}
    given = {name: value for name, value in settings.items() if value is not None}
    return {**given, "search": search} if search else given

"""The request of a call as Python hands it to Rust (``kerntune._request``): only the
settings the user gave, Rust deciding the rest, and the defaults the signatures show being
Rust's own (``kerntune_run::Request``)."""

import inspect
import json

import pytest

import kerntune
from kerntune import _kerntune
from kerntune._request import DEFAULTS, KERNEL_TUNER_DEFAULTS, request


def test_a_request_carries_only_the_settings_given_with_the_searchs_in_its_search():
    asked = request(strategy="random_sample", strategy_options=None, max_fevals=None, seed=3, db=None, finalists=2,
                    fresh=False)
    assert asked == {"finalists": 2, "fresh": False, "search": {"strategy": "random_sample", "seed": 3}}
    assert request(strategy=None, db=None) == {}


def test_the_signatures_show_rusts_defaults():
    tune = inspect.signature(kerntune.tune).parameters
    assert (tune["strategy"].default, tune["finalists"].default, tune["finalists_within"].default) == ("default", 4, 0.05)
    assert tune["controls_budget"].default == DEFAULTS["controls_budget"] == 24
    assert inspect.signature(kerntune.compile).parameters["arch"].default == DEFAULTS["arch"] == "sm_90"
    assert inspect.signature(kerntune.tune_kernel).parameters["arch"].default == "sm_90"
    assert KERNEL_TUNER_DEFAULTS["strategy"] == "brute_force", "Kernel Tuner's front keeps Kernel Tuner's default"


def test_an_unknown_front_is_refused():
    with pytest.raises(kerntune.KerntuneError, match="no front named"):
        _kerntune.request_defaults("matlab")


def test_a_setting_rust_does_not_know_is_refused_by_name_before_the_job_is_read():
    with pytest.raises(kerntune.KerntuneError, match="unknown field `finalist`"):
        _kerntune.compile_triton("{}", json.dumps({"finalist": 2}))

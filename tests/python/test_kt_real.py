"""bench/kt_real.py's handling of Kernel Tuner's scripts, without a GPU: which lines are
switched to kerntune, which function a script's main guard calls, and when two tools'
best configurations agree."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))

import kt_real  # noqa: E402

SCRIPT = '''import numpy
import kernel_tuner
from kernel_tuner import tune_kernel
from kernel_tuner.observers.nvml import NVMLObserver

def tune_both():
    """Says kernel_tuner in its text, which stays."""
    return kernel_tuner.tune_kernel

if __name__ == "__main__":
    # the two kernels
    results = tune_both()
'''


def test_only_import_lines_are_switched_and_the_module_name_still_works():
    lines = kt_real.switched(SCRIPT).splitlines()
    assert lines[1] == "import kerntune as kernel_tuner"
    assert lines[2] == "from kerntune import tune_kernel"
    assert lines[3] == "from kerntune.observers.nvml import NVMLObserver"
    assert '"""Says kernel_tuner in its text, which stays."""' in lines[6]


def test_the_entry_is_the_function_the_main_guard_calls():
    assert kt_real.entry_point(SCRIPT) == "tune_both"
    assert kt_real.entry_point('if __name__ == "__main__":\n    tune_zeromean()\n') == "tune_zeromean"
    assert kt_real.entry_point("def tune():\n    pass\n") == "tune"


def call(best, times):
    return {"best": {"x": best, "time": times[best]}, "times": {json.dumps([x]): t for x, t in times.items()}}


def test_best_configurations_agree_when_the_same_or_within_noise_by_kernel_tuners_times():
    ours = call(1, {1: 1.0, 2: 1.02})
    assert kt_real.agreement(ours, call(1, {1: 2.0, 2: 2.1}))["agree"]
    near = kt_real.agreement(ours, call(2, {1: 2.08, 2: 2.0}))
    assert near["agree"] and near["kt_times_our_pick"] == 1.04 and near["we_time_kt_pick"] == 1.02
    far = kt_real.agreement(ours, call(2, {1: 2.4, 2: 2.0}))
    assert not far["agree"] and far["kt_times_our_pick"] == 1.2
    assert not kt_real.agreement({"best": None, "times": {}}, call(2, {2: 2.0}))["agree"]

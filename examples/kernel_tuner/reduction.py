#!/usr/bin/env python
"""A reduction in Kernel Tuner's style: the kernel writes one partial sum per block, so
the output is checked by a custom verify function (the partial sums must add up to the
total); problem_size names a tuned parameter and grid_div_x=[] divides by nothing."""

import os

import numpy as np

import kerntune
from kerntune.util import get_config_string

HERE = os.path.dirname(os.path.abspath(__file__))


def partial_sums_add_up(answer, result, atol=None):
    return bool(np.isclose(np.sum(result[0], dtype=np.float64), answer[0], rtol=1e-4))


def problem(n=1 << 24):
    values = np.random.default_rng(6).random(n, dtype=np.float32)
    tune_params = {"block_size_x": [128, 256, 512, 1024], "num_blocks": [128, 256, 512, 1024], "vector": [1, 4]}
    partial = np.zeros(max(tune_params["num_blocks"]), np.float32)
    return dict(kernel_name="sum_floats", kernel_source=os.path.join(HERE, "reduction.cu"), problem_size="num_blocks",
                arguments=[partial, values, np.int32(n)], tune_params=tune_params, grid_div_x=[],
                answer=[np.sum(values, dtype=np.float64), None, None], verify=partial_sums_add_up)


if __name__ == "__main__":
    results, env = kerntune.tune_kernel(**problem(), verbose=True)
    print(get_config_string(env["best_config"]))

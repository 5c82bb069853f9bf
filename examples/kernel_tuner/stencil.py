#!/usr/bin/env python
"""A 2D stencil in Kernel Tuner's style: the kernel in a file, a 2D problem, the grid
divided by both block dimensions, the grid's size passed as definitions."""

import os

import numpy as np

import kerntune

HERE = os.path.dirname(os.path.abspath(__file__))


def problem(width=4096, height=2048):
    rng = np.random.default_rng(3)
    x_old = rng.standard_normal((height, width), dtype=np.float32)
    x_new = np.zeros_like(x_old)
    expected = x_old.copy()
    expected[1:-1, 1:-1] = 0.25 * (x_old[1:-1, :-2] + x_old[1:-1, 2:] + x_old[:-2, 1:-1] + x_old[2:, 1:-1])
    return dict(kernel_name="stencil_kernel", kernel_source=os.path.join(HERE, "stencil.cu"),
                problem_size=(width, height), arguments=[x_new, x_old],
                tune_params={"block_size_x": [32, 64, 128, 256], "block_size_y": [1, 2, 4, 8, 16],
                             "width": [width], "height": [height]},
                grid_div_x=["block_size_x"], grid_div_y=["block_size_y"],
                answer=[expected, None], atol=1e-5)


if __name__ == "__main__":
    kerntune.tune_kernel(**problem(), verbose=True)

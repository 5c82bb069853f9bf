#!/usr/bin/env python
"""Tiled matrix multiplication in Kernel Tuner's style: a C++ kernel without extern "C"
in a file, 2D tiling with a restriction, the grid divided by block and tile sizes, and a
GFLOP/s metric computed from each configuration's time."""

import os

import numpy as np

import kerntune

HERE = os.path.dirname(os.path.abspath(__file__))


def problem(n=2048):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros_like(a)
    tune_params = {"N": [n], "block_size_x": [16, 32], "block_size_y": [1, 2, 4, 8, 16, 32],
                   "tile_size_x": [1, 2, 4], "tile_size_y": [1, 2, 4, 8]}
    return dict(kernel_name="matmul_kernel", kernel_source=os.path.join(HERE, "matmul.cu"), problem_size=(n, n),
                arguments=[c, a, b], tune_params=tune_params,
                grid_div_x=["block_size_x", "tile_size_x"], grid_div_y=["block_size_y", "tile_size_y"],
                restrictions=["block_size_x == block_size_y * tile_size_y"],
                answer=[a @ b, None, None], atol=1e-2, iterations=32,
                metrics={"GFLOP/s": lambda p: 2 * n**3 / 1e9 / (p["time"] / 1e3)})


if __name__ == "__main__":
    results, env = kerntune.tune_kernel(**problem(), verbose=True)
    print(env["best_config"])

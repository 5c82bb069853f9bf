#!/usr/bin/env python
"""2D convolution in Kernel Tuner's style: the filter goes to the kernel's __constant__
symbol through cmem_args, and the grid is divided by block and tile sizes."""

import os

import numpy as np

import kerntune

HERE = os.path.dirname(os.path.abspath(__file__))
FILTER = 15


def reference(image, weights, width, height):
    out = np.zeros((height, width), np.float64)
    for i in range(FILTER):
        for j in range(FILTER):
            out += weights[i, j] * image[i:i + height, j:j + width]
    return out.astype(np.float32)


def problem(width=2048, height=2048):
    rng = np.random.default_rng(5)
    image = rng.standard_normal((height + FILTER - 1, width + FILTER - 1), dtype=np.float32)
    weights = rng.standard_normal((FILTER, FILTER), dtype=np.float32)
    output = np.zeros((height, width), np.float32)
    tune_params = {"width": [width], "height": [height], "block_size_x": [16, 32, 64],
                   "block_size_y": [2, 4, 8], "tile_size_x": [1, 2], "tile_size_y": [1, 2]}
    return dict(kernel_name="convolution_kernel", kernel_source=os.path.join(HERE, "convolution.cu"),
                problem_size=(width, height), arguments=[output, image, weights], tune_params=tune_params,
                grid_div_x=["block_size_x", "tile_size_x"], grid_div_y=["block_size_y", "tile_size_y"],
                cmem_args={"d_filter": weights}, answer=[reference(image, weights, width, height), None, None],
                atol=1e-3)


if __name__ == "__main__":
    kerntune.tune_kernel(**problem(), verbose=True)

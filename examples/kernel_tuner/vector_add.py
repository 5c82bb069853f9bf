#!/usr/bin/env python
"""Vector addition in Kernel Tuner's style: a C++ kernel (no extern "C") in a string,
one tuned block size, the results stored as T4 files. Switch tools by changing the two
`kerntune` imports to `kernel_tuner`."""

import numpy as np

from kerntune import tune_kernel
from kerntune.file_utils import store_metadata_file, store_output_file

SOURCE = """
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
"""


def problem(n=1 << 24):
    """The arguments of tune_kernel for vectors of n floats."""
    a = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    b = np.random.default_rng(2).standard_normal(n, dtype=np.float32)
    c = np.zeros_like(a)
    return dict(kernel_name="vector_add", kernel_source=SOURCE, problem_size=n,
                arguments=[c, a, b, np.int32(n)], tune_params={"block_size_x": [64 * i for i in range(1, 17)]},
                answer=[a + b, None, None, None])


if __name__ == "__main__":
    results, env = tune_kernel(**problem())
    store_output_file("vector_add.json", results, problem(16)["tune_params"])
    store_metadata_file("vector_add-metadata.json")

// A kernel right at sizes its blocks divide only, as one that drops the bounds check
// would be: tuned at n = 1 << 20 it passes, and only a check at another size catches it.
// mode 0: correct; 1: a block that would run past n writes nothing (the tail is lost).
extern "C" __global__ void scale(float *out, const float *in, int n) {
    int first = blockIdx.x * block_size_x;
    if (mode == 1 && first + block_size_x > n) return;
    int i = first + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}

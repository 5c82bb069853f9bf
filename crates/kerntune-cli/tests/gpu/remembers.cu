// A kernel right on the inputs of its first launch only, as one that keeps state between
// launches would be: checked on the spec's inputs alone it passes, and only a check on other
// inputs catches it. mode 0: correct; 1: remembers the first input it saw and writes zeros
// once the input has changed.
__device__ volatile float first_seen;
__device__ volatile int seen;

extern "C" __global__ void scale(float *out, const float *in, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i >= n) return;
    bool stale = mode == 1 && seen && in[0] != first_seen;
    out[i] = stale ? 0.0f : 2.0f * in[i];
    if (mode == 1 && i == 0 && !seen) {
        first_seen = in[0];
        __threadfence();
        seen = 1;
    }
}

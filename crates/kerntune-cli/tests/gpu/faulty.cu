// Kernels that misbehave for some configurations, to test that a run survives them.
// mode 0: correct; 1: writes each result one element too far (wrong output);
// 2: writes far outside any allocation (illegal address); 3: never finishes.
extern "C" __global__ void scale(float *out, const float *in, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i >= n) return;
    if (mode == 3) {
        volatile const float *v = in;
        while (v[i] == v[i]) {}
    }
    long long j = i;
    if (mode == 1) j = i + 1 < n ? i + 1 : i;
    if (mode == 2) j = (long long)i * 4096 + (1ll << 36);
    out[j] = 2.0f * in[i];
}

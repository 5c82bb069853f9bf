// c = a + b, each thread handling `tile` elements spaced a grid apart (coalesced).
extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int first = blockIdx.x * block_size_x * tile + threadIdx.x;
    #pragma unroll
    for (int t = 0; t < tile; t++) {
        int i = first + t * block_size_x;
        if (i < n) c[i] = a[i] + b[i];
    }
}

// Partial sums of n floats: num_blocks blocks stride over the array (vector floats per
// load), reduce in shared memory and write one sum per block. The grid is num_blocks
// (problem_size names the parameter, grid_div_x is empty).
#if vector == 1
#define load_t float
#elif vector == 2
#define load_t float2
#else
#define load_t float4
#endif

__device__ float total(float v) { return v; }
__device__ float total(float2 v) { return v.x + v.y; }
__device__ float total(float4 v) { return v.x + v.y + v.z + v.w; }

__global__ void sum_floats(float *partial, const load_t *values, int n) {
    __shared__ float shared[block_size_x];
    int t = threadIdx.x;
    float sum = 0.0f;
    for (int i = blockIdx.x * block_size_x + t; i < n / vector; i += num_blocks * block_size_x) {
        sum += total(values[i]);
    }
    shared[t] = sum;
    __syncthreads();
    for (int s = block_size_x / 2; s > 0; s >>= 1) {
        if (t < s) {
            shared[t] += shared[t + s];
        }
        __syncthreads();
    }
    if (t == 0) {
        partial[blockIdx.x] = shared[0];
    }
}

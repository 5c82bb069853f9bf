// C = A * B (N x N, row-major fp32) with register tiling: each thread computes a V x V tile
// of C, its outputs strided by the block size so that a warp's accesses stay coalesced.
// The block covers a (block_size_y * V) x (block_size_x * V) tile; N must be a multiple.
extern "C" __global__ void matmul_register(float *C, const float *A, const float *B, int N) {
    const int row0 = blockIdx.y * block_size_y * V + threadIdx.y;
    const int col0 = blockIdx.x * block_size_x * V + threadIdx.x;
    float acc[V][V];
    #pragma unroll
    for (int i = 0; i < V; i++)
        #pragma unroll
        for (int j = 0; j < V; j++) acc[i][j] = 0.0f;
    for (int k = 0; k < N; k++) {
        float a[V], b[V];
        #pragma unroll
        for (int v = 0; v < V; v++) {
            a[v] = A[(row0 + v * block_size_y) * N + k];
            b[v] = B[k * N + col0 + v * block_size_x];
        }
        #pragma unroll
        for (int i = 0; i < V; i++)
            #pragma unroll
            for (int j = 0; j < V; j++) acc[i][j] += a[i] * b[j];
    }
    #pragma unroll
    for (int i = 0; i < V; i++)
        #pragma unroll
        for (int j = 0; j < V; j++) C[(row0 + i * block_size_y) * N + col0 + j * block_size_x] = acc[i][j];
}

extern "C" __global__ void matmul_reference(float *C, const float *A, const float *B, int N) {
    int col = blockIdx.x * 16 + threadIdx.x;
    int row = blockIdx.y * 16 + threadIdx.y;
    if (row >= N || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < N; k++) acc += A[row * N + k] * B[k * N + col];
    C[row * N + col] = acc;
}

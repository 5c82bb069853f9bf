// C = A * B (N x N, row-major fp32) with shared-memory tiling. A block computes an
// L_M x L_N tile of C, L_M = block_size_y * V and L_N = block_size_x * V; each thread a
// V x V sub-tile. The k dimension advances in S-deep slices of A and B that the whole block
// loads cooperatively into shared memory (A transposed, so the inner loop reads both slices
// along contiguous rows). N must be a multiple of both tile sides and of S.
#define L_M (block_size_y * V)
#define L_N (block_size_x * V)
#define THREADS (block_size_x * block_size_y)

extern "C" __global__ void matmul_sram(float *C, const float *A, const float *B, int N) {
    __shared__ float a_slice[S][L_M];
    __shared__ float b_slice[S][L_N];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int thread = ty * block_size_x + tx;
    const int row0 = blockIdx.y * L_M, col0 = blockIdx.x * L_N;
    float acc[V][V];
    #pragma unroll
    for (int i = 0; i < V; i++)
        #pragma unroll
        for (int j = 0; j < V; j++) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < N; k0 += S) {
        // Consecutive threads read consecutive k of one row of A, and consecutive columns
        // of one row of B: both loads are coalesced.
        for (int e = thread; e < L_M * S; e += THREADS) {
            int m = e / S, k = e % S;
            a_slice[k][m] = A[(row0 + m) * N + k0 + k];
        }
        for (int e = thread; e < S * L_N; e += THREADS) {
            int k = e / L_N, n = e % L_N;
            b_slice[k][n] = B[(k0 + k) * N + col0 + n];
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < S; k++) {
            float a[V], b[V];
            #pragma unroll
            for (int v = 0; v < V; v++) {
                a[v] = a_slice[k][ty + v * block_size_y];
                b[v] = b_slice[k][tx + v * block_size_x];
            }
            #pragma unroll
            for (int i = 0; i < V; i++)
                #pragma unroll
                for (int j = 0; j < V; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < V; i++)
        #pragma unroll
        for (int j = 0; j < V; j++) C[(row0 + ty + i * block_size_y) * N + col0 + tx + j * block_size_x] = acc[i][j];
}

extern "C" __global__ void matmul_reference(float *C, const float *A, const float *B, int N) {
    int col = blockIdx.x * 16 + threadIdx.x;
    int row = blockIdx.y * 16 + threadIdx.y;
    if (row >= N || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < N; k++) acc += A[row * N + k] * B[k * N + col];
    C[row * N + col] = acc;
}

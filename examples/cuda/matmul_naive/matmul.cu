// C = A * B for N x N row-major fp32 matrices: one thread per output element.
extern "C" __global__ void matmul_naive(float *C, const float *A, const float *B, int N) {
    int col = blockIdx.x * block_size_x + threadIdx.x;
    int row = blockIdx.y * block_size_y + threadIdx.y;
    if (row >= N || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < N; k++) acc += A[row * N + k] * B[k * N + col];
    C[row * N + col] = acc;
}

// The reference every matmul example is checked against: the same loop, fixed 16x16 blocks.
extern "C" __global__ void matmul_reference(float *C, const float *A, const float *B, int N) {
    int col = blockIdx.x * 16 + threadIdx.x;
    int row = blockIdx.y * 16 + threadIdx.y;
    if (row >= N || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < N; k++) acc += A[row * N + k] * B[k * N + col];
    C[row * N + col] = acc;
}

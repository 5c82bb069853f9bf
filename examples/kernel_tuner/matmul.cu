// C = A * B for square row-major matrices of size N (a definition), in shared-memory tiles.
// A block of block_size_x * block_size_y threads computes a tile of C with
// block_size_y * tile_size_y rows and block_size_x * tile_size_x columns; the space keeps
// block_size_x == block_size_y * tile_size_y, so the tile's rows equal the step in k.
// Each thread computes tile_size_y rows (strided by block_size_y) and tile_size_x
// columns (strided by block_size_x). Plain C++: no extern "C".

#define ROWS (block_size_y * tile_size_y)
#define COLS (block_size_x * tile_size_x)
#define STEP block_size_x

__global__ void matmul_kernel(float *C, const float *A, const float *B) {
    __shared__ float a_tile[ROWS][STEP];
    __shared__ float b_tile[STEP][COLS];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row0 = blockIdx.y * ROWS;
    int col0 = blockIdx.x * COLS;
    float sum[tile_size_y][tile_size_x] = {{0.0f}};

    for (int k0 = 0; k0 < N; k0 += STEP) {
        #pragma unroll
        for (int i = 0; i < tile_size_y; i++) {
            a_tile[ty + i * block_size_y][tx] = A[(row0 + ty + i * block_size_y) * N + k0 + tx];
        }
        for (int k = ty; k < STEP; k += block_size_y) {
            #pragma unroll
            for (int j = 0; j < tile_size_x; j++) {
                b_tile[k][tx + j * block_size_x] = B[(k0 + k) * N + col0 + tx + j * block_size_x];
            }
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < STEP; k++) {
            #pragma unroll
            for (int i = 0; i < tile_size_y; i++) {
                #pragma unroll
                for (int j = 0; j < tile_size_x; j++) {
                    sum[i][j] += a_tile[ty + i * block_size_y][k] * b_tile[k][tx + j * block_size_x];
                }
            }
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < tile_size_y; i++) {
        #pragma unroll
        for (int j = 0; j < tile_size_x; j++) {
            C[(row0 + ty + i * block_size_y) * N + col0 + tx + j * block_size_x] = sum[i][j];
        }
    }
}

// 2D convolution over the "valid" region: out[y][x] = sum_{i,j} in[y + i][x + j] * filter[i][j]
// with an F x F filter. Each thread computes tile_y x tile_x outputs, strided by the block
// size. With use_shared = 1 a block first stages its input window in shared memory.
// W x H is the output size; the input is (W + F - 1) x (H + F - 1), row-major.
#define TILE_W (block_size_x * tile_x)
#define TILE_H (block_size_y * tile_y)

extern "C" __global__ void conv2d(float *out, const float *__restrict__ in, const float *__restrict__ filter, int W, int H) {
    const int in_w = W + F - 1;
    const int x0 = blockIdx.x * TILE_W + threadIdx.x;
    const int y0 = blockIdx.y * TILE_H + threadIdx.y;
    float acc[tile_y][tile_x];
    #pragma unroll
    for (int ty = 0; ty < tile_y; ty++)
        #pragma unroll
        for (int tx = 0; tx < tile_x; tx++) acc[ty][tx] = 0.0f;
#if use_shared
    __shared__ float window[TILE_H + F - 1][TILE_W + F - 1];
    const int bx = blockIdx.x * TILE_W, by = blockIdx.y * TILE_H;
    for (int y = threadIdx.y; y < TILE_H + F - 1; y += block_size_y)
        for (int x = threadIdx.x; x < TILE_W + F - 1; x += block_size_x) {
            int gx = bx + x, gy = by + y;
            window[y][x] = (gx < in_w && gy < H + F - 1) ? in[gy * in_w + gx] : 0.0f;
        }
    __syncthreads();
#endif
    for (int i = 0; i < F; i++) {
        for (int j = 0; j < F; j++) {
            const float w = filter[i * F + j];
            #pragma unroll
            for (int ty = 0; ty < tile_y; ty++)
                #pragma unroll
                for (int tx = 0; tx < tile_x; tx++) {
#if use_shared
                    acc[ty][tx] += window[threadIdx.y + ty * block_size_y + i][threadIdx.x + tx * block_size_x + j] * w;
#else
                    int x = min(x0 + tx * block_size_x, W - 1), y = min(y0 + ty * block_size_y, H - 1);
                    acc[ty][tx] += in[(y + i) * in_w + x + j] * w;
#endif
                }
        }
    }
    #pragma unroll
    for (int ty = 0; ty < tile_y; ty++)
        #pragma unroll
        for (int tx = 0; tx < tile_x; tx++) {
            int x = x0 + tx * block_size_x, y = y0 + ty * block_size_y;
            if (x < W && y < H) out[y * W + x] = acc[ty][tx];
        }
}

extern "C" __global__ void conv2d_reference(float *out, const float *in, const float *filter, int W, int H) {
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    if (x >= W || y >= H) return;
    float acc = 0.0f;
    for (int i = 0; i < F; i++)
        for (int j = 0; j < F; j++) acc += in[(y + i) * (W + F - 1) + x + j] * filter[i * F + j];
    out[y * W + x] = acc;
}

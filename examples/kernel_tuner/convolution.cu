// 2D convolution of a (height + fh - 1) x (width + fw - 1) input with an fh x fw filter
// held in constant memory (filled by the tuner: cmem_args). Each thread computes
// tile_size_x x tile_size_y outputs, strided by the block size.
#ifndef width
#define width 2048
#endif
#ifndef height
#define height 2048
#endif
#define fw 15
#define fh 15
#define input_width (width + fw - 1)

__constant__ float d_filter[fh * fw];

__global__ void convolution_kernel(float *output, const float *input, const float *filter) {
    int x0 = blockIdx.x * block_size_x * tile_size_x + threadIdx.x;
    int y0 = blockIdx.y * block_size_y * tile_size_y + threadIdx.y;
    #pragma unroll
    for (int ty = 0; ty < tile_size_y; ty++) {
        #pragma unroll
        for (int tx = 0; tx < tile_size_x; tx++) {
            int x = x0 + tx * block_size_x;
            int y = y0 + ty * block_size_y;
            if (x < width && y < height) {
                float sum = 0.0f;
                for (int i = 0; i < fh; i++) {
                    #pragma unroll
                    for (int j = 0; j < fw; j++) {
                        sum += input[(y + i) * input_width + x + j] * d_filter[i * fw + j];
                    }
                }
                output[y * width + x] = sum;
            }
        }
    }
}

// Reference solutions of tutorial 10's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include <cmath>

#include "tutorials/10_cuda_kernels/exercises/exercises.h"

namespace exercises {

namespace {
// The max of every thread's `value` over a block of blockDim.x ≤ 256 threads (a power of
// two), returned to every thread. `s` is the block's shared scratch.
__device__ float block_reduce_max(float value, float* s) {
    const int t = threadIdx.x;
    s[t] = value;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride) s[t] = fmaxf(s[t], s[t + stride]);
        __syncthreads();  // every thread, every level
    }
    const float result = s[0];
    __syncthreads();  // everyone has read s[0] before the scratch is used again
    return result;
}

__device__ float block_reduce_sum(float value, float* s) {
    const int t = threadIdx.x;
    s[t] = value;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    const float result = s[0];
    __syncthreads();
    return result;
}
}  // namespace

__global__ void block_max(int n, const float* x, float* out) {
    GG_SHARED(float[256], s);
    float m = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, x[i]);
    m = block_reduce_max(m, s);
    if (threadIdx.x == 0) *out = m;
}

__global__ void softmax_rows(int rows, int cols, const float* x, float* y) {
    GG_SHARED(float[256], s);
    const int row = blockIdx.x;
    if (row >= rows) return;  // the whole block returns together: no barrier is left waiting
    const float* in = x + size_t(row) * cols;
    float* out = y + size_t(row) * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, in[j]);
    m = block_reduce_max(m, s);
    float total = 0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) total += expf(in[j] - m);
    total = block_reduce_sum(total, s);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = expf(in[j] - m) / total;
}

}  // namespace exercises

// basics.cpp — part 1 of tutorial 10: a thread, a block, a grid, shared memory, a barrier
// and a warp, each in one small kernel. The kernels are CUDA; this file is compiled by g++
// against the emulator (cuda/emulator/), so every step runs, and can be stepped through in a
// debugger, on a machine without a GPU.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/launch.h"
#include "tutorials/10_cuda_kernels/parts.h"

namespace tutorial {

namespace {

// 1. One thread per element. blockIdx.x · blockDim.x + threadIdx.x numbers the threads of the
// whole grid; a grid-stride loop lets a grid of any size cover any n.
// a, b, c: (n); who: (n) records which global thread wrote each element.
__global__ void vector_add(int n, const float* a, const float* b, float* c, int* who) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        c[i] = a[i] + b[i];
        who[i] = blockIdx.x * blockDim.x + threadIdx.x;
    }
}

// 2. A block sums its part of x in shared memory: a tree of halving strides, with a barrier
// between levels so that no thread reads a partial sum before its writer has written it.
// x: (n); partial: (gridDim.x), one sum per block. blockDim.x must be 256.
__global__ void block_sum(int n, const float* x, float* partial) {
    GG_SHARED(float[256], s);
    const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();  // every thread, every level: outside the `if`
    }
    if (t == 0) partial[blockIdx.x] = s[0];
}

// The same tree with the barrier inside the `if`: only the threads below `stride` reach it.
// On a GPU that is undefined behaviour (it may hang or give wrong sums); the emulator stops.
__global__ void block_sum_divergent(int n, const float* x, float* partial) {
    GG_SHARED(float[256], s);
    const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride) {
            s[t] += s[t + stride];
            __syncthreads();
        }
    }
    if (t == 0) partial[blockIdx.x] = s[0];
}

// A reader that forgot the first barrier: thread t reads its neighbour's slot, which the
// neighbour may not have written yet. Unwritten shared memory reads as NaN in the emulator.
__global__ void neighbour_without_barrier(const float* x, float* out) {
    GG_SHARED(float[64], s);
    const int t = threadIdx.x;
    s[t] = x[t];
    out[t] = s[(t + 1) % 64];  // missing __syncthreads() before this read
}

// 3. The 32 threads of a warp exchange registers directly: after five shuffles, lane 0 holds
// the warp's sum, with no shared memory and no block-wide barrier.
// x: (32 · warps); sums: (warps).
__global__ void warp_sum(const float* x, float* sums) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = x[threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
    if (lane == 0) sums[warp] = v;
}

}  // namespace

void part_basics() {
    using gg::cuda::launch;
    std::printf("== 1. threads, blocks, a grid: c = a + b with 2 blocks of 4 threads, n = 10\n");
    const int n = 10;
    std::vector<float> a(n), b(n), c(n);
    std::vector<int> who(n);
    for (int i = 0; i < n; ++i) a[i] = float(i), b[i] = float(10 * i);
    launch("vector_add", vector_add, dim3(2), dim3(4), 0, n, a.data(), b.data(), c.data(), who.data());
    for (int i = 0; i < n; ++i)
        std::printf("  c[%d] = %4.0f  written by thread %d (block %d, thread %d)\n", i, c[i], who[i], who[i] / 4,
                    who[i] % 4);

    std::printf("\n== 2. shared memory and a barrier: sum of 1000 ones, one partial sum per block of 256\n");
    std::vector<float> ones(1000, 1.0f), partial(4);
    launch("block_sum", block_sum, dim3(4), dim3(256), 0, 1000, ones.data(), partial.data());
    std::printf("  partial sums %.0f %.0f %.0f %.0f, total %.0f\n", partial[0], partial[1], partial[2], partial[3],
                partial[0] + partial[1] + partial[2] + partial[3]);
    // One block: blocks run on several OS threads at once, and with more the error could name
    // whichever block failed first.
    try {
        launch("block_sum_divergent", block_sum_divergent, dim3(1), dim3(256), 0, 1000, ones.data(), partial.data());
        std::printf("  the divergent barrier was not caught\n");
    } catch (const std::runtime_error& e) {
        std::printf("  with the barrier inside the if:\n    %s\n", e.what());
    }
    std::vector<float> x64(64), out64(64);
    for (int i = 0; i < 64; ++i) x64[i] = float(i);
    launch("neighbour_without_barrier", neighbour_without_barrier, dim3(1), dim3(64), 0, x64.data(), out64.data());
    int nan_reads = 0;
    for (float v : out64) nan_reads += std::isnan(v);
    std::printf("  without the first barrier, %d of 64 threads read a slot not yet written (NaN)\n", nan_reads);

    std::printf("\n== 3. a warp: shuffles sum 32 registers in 5 steps\n");
    std::vector<float> values(64), sums(2);
    for (int i = 0; i < 64; ++i) values[i] = float(i);
    launch("warp_sum", warp_sum, dim3(1), dim3(64), 0, values.data(), sums.data());
    std::printf("  warp 0: %.0f (0 + … + 31 = 496), warp 1: %.0f (32 + … + 63 = 1520)\n", sums[0], sums[1]);
}

}  // namespace tutorial

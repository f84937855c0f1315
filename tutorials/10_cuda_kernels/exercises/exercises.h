// Exercises of tutorial 10: write each kernel in exercises.cpp, then run
//   meson test -C build --suite exercises   until exercise_10_cuda_kernels passes.
// The kernels are CUDA; the checks run them in the emulator (cuda/emulator/), so no GPU is
// needed, and a missing __syncthreads or a divergent one is caught there. exercises.cpp is
// built without the library's own answers to them (hidden.h).
#pragma once

#include "cuda/launch.h"

namespace exercises {

// 10.1 A block-wide max reduction. Launched as ONE block of 256 threads over any n:
// each thread takes the max of its elements (t, t + 256, t + 512, ...), writes it to a
// GG_SHARED(float[256], ...) array, then a tree of halving strides with a barrier between
// levels (tutorial 10's block_sum, with max for +) leaves the block's max in slot 0, which
// thread 0 writes to *out. An empty input (n = 0) has max −∞.
// x: (n); out: (1)
__global__ void block_max(int n, const float* x, float* out);

// 10.2 Softmax of each row of a (rows, cols) matrix, one block of 128 threads per row
// (blockIdx.x is the row), for any cols: a block max (as in 10.1), then a block sum of
// exp(x − max), then y = exp(x − max) / sum. Subtracting the max keeps exp from overflowing.
// x, y: (rows, cols), row-major
__global__ void softmax_rows(int rows, int cols, const float* x, float* y);

}  // namespace exercises

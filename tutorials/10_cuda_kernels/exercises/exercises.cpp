// Your answers to the exercises of tutorial 10: replace each `throw NotDone` with a kernel.
#include "tutorials/10_cuda_kernels/exercises/exercises.h"
#include "tutorials/exercises/not_done.h"

namespace exercises {

__global__ void block_max(int n, const float* x, float* out) {
    throw NotDone("10.1 block_max");
}

__global__ void softmax_rows(int rows, int cols, const float* x, float* y) {
    throw NotDone("10.2 softmax_rows");
}

}  // namespace exercises

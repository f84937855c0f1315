// Rung 2, coalesced: rung 1 with the thread → element mapping turned around.
//
// Mapping: blocks of 32×32 threads; thread (x, y) of block (bx, by) computes
// C[32·by + y][32·bx + x], so threadIdx.x now runs along a row of C. Grid (⌈N/32⌉, ⌈M/32⌉).
//
// What changed and why it should be faster: the 32 lanes of a warp share m and take 32
// consecutive n. Their reads of B[k][n .. n+31] and their writes of C[m][n .. n+31] are 128
// contiguous bytes each, which the memory system serves as one transaction (coalescing);
// their reads of A[m][k] are one address, broadcast to the warp. Same arithmetic, same number
// of loads per multiply-add as rung 1, far fewer memory transactions.
#include "cuda/gemm_ladder/rungs.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kBlock = 32;
static_assert(tiling(Rung::coalesced) == Tiling{kBlock * kBlock, kBlock, kBlock, 0, 1, 1, 1, 0}, "ladder.h");

// A (M, K), B (K, N), C (M, N).
__global__ void gemm_coalesced(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                               float* C) {
    const int m = int(blockIdx.y) * kBlock + int(threadIdx.y);
    const int n = int(blockIdx.x) * kBlock + int(threadIdx.x);
    if (m >= M || n >= N) return;
    float acc = 0;
    for (int k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
    gemm_epilogue(&C[m * N + n], alpha, acc, beta);
}

}  // namespace

void coalesced(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    const dim3 grid(ceil_div(N, kBlock), ceil_div(M, kBlock));
    launch("gemm_coalesced", gemm_coalesced, grid, dim3(kBlock, kBlock), 0, M, N, K, alpha, A, B, beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

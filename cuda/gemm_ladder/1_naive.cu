// Rung 1, naive: one thread per element of C, the definition of the product as it reads.
//
//   C[m][n] = alpha · Σ_k A[m][k] · B[k][n] + beta · C[m][n]
//
// Mapping: blocks of 32×32 threads; thread (x, y) of block (bx, by) computes
// C[32·bx + x][32·by + y], so threadIdx.x — the index that numbers the lanes of a warp — runs
// down a column of C. Grid (⌈M/32⌉, ⌈N/32⌉).
//
// Why it is slow: the 32 lanes of a warp read A[m][k] from 32 different rows (32 separate
// memory transactions where one would do) and write C 32 rows apart; only their reads of
// B[k][n] coincide. Every operand is fetched from global memory once per multiply-add: K
// loads of A and K of B for each element of C, with no reuse beyond what caches catch.
#include "cuda/gemm_ladder/rungs.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kBlock = 32;
static_assert(tiling(Rung::naive) == Tiling{kBlock * kBlock, kBlock, kBlock, 0, 1, 1, 1, 0}, "ladder.h");

// A (M, K), B (K, N), C (M, N).
__global__ void gemm_naive(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    const int m = int(blockIdx.x) * kBlock + int(threadIdx.x);
    const int n = int(blockIdx.y) * kBlock + int(threadIdx.y);
    if (m >= M || n >= N) return;
    float acc = 0;
    for (int k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
    gemm_epilogue(&C[m * N + n], alpha, acc, beta);
}

}  // namespace

void naive(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    const dim3 grid(ceil_div(M, kBlock), ceil_div(N, kBlock));
    launch("gemm_naive", gemm_naive, grid, dim3(kBlock, kBlock), 0, M, N, K, alpha, A, B, beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

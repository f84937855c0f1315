// Rung 3, shared-memory tiles: the block stages 32×32 tiles of A and B in shared memory and
// multiplies out of them.
//
// Mapping: blocks of 32×32 threads, grid (⌈N/32⌉, ⌈M/32⌉); thread (x, y) of block (bx, by)
// computes C[32·by + y][32·bx + x], as in rung 2. K is walked in tiles of 32: each thread
// copies one element of the A tile and one of the B tile (coalesced: lanes take consecutive
// columns), the block waits, then each thread adds its 32 products from shared memory.
//
// What changed and why it should be faster: in rungs 1–2 each element of A and B is fetched
// from global memory by 32 different threads, M or N times over in all. Here a block fetches
// each element of its tiles once and 32 threads reuse it from shared memory, which is on the
// chip: global traffic falls by the tile width, 32×. The price is two barriers per tile, and
// one shared-memory load per multiply-add, which is now what limits it.
#include "cuda/gemm_ladder/rungs.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kTile = 32;
static_assert(tiling(Rung::shared_tiles) == Tiling{kTile * kTile, kTile, kTile, kTile, 1, 1, 1, 1}, "ladder.h");

// A (M, K), B (K, N), C (M, N).
__global__ void gemm_shared_tiles(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                                  float* C) {
    GG_SHARED(float[kTile][kTile], As);  // (32, 32): A[m0 + y][k0 + x] at As[y][x]
    GG_SHARED(float[kTile][kTile], Bs);  // (32, 32): B[k0 + y][n0 + x] at Bs[y][x]
    const int x = int(threadIdx.x), y = int(threadIdx.y);
    const int m = int(blockIdx.y) * kTile + y, n = int(blockIdx.x) * kTile + x;
    float acc = 0;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        // Zeros past the edges of A and B, so that the loop below needs no bounds.
        As[y][x] = m < M && k0 + x < K ? A[m * K + k0 + x] : 0.0f;
        Bs[y][x] = k0 + y < K && n < N ? B[(k0 + y) * N + n] : 0.0f;
        __syncthreads();  // the tiles are complete
        for (int k = 0; k < kTile; ++k) acc += As[y][k] * Bs[k][x];
        __syncthreads();  // everyone is done with the tiles before they are overwritten
    }
    if (m < M && n < N) gemm_epilogue(&C[m * N + n], alpha, acc, beta);
}

}  // namespace

void shared_tiles(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    const dim3 grid(ceil_div(N, kTile), ceil_div(M, kTile));
    launch("gemm_shared_tiles", gemm_shared_tiles, grid, dim3(kTile, kTile), 0, M, N, K, alpha, A, B, beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

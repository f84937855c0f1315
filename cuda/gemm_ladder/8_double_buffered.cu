// Rung 8, double buffering: rung 7's kernel with two copies of each K slice in shared memory,
// so that the next slice is on its way from global memory while the current one is multiplied.
//
// Mapping: as rung 7 — a block of 256 threads computes a 128×128 tile of C with 8 warp tiles of
// 64×32 (warp_tiles.h), K slices of 8 in float4s (vector_tiles.h) — but As and Bs hold two
// slices each, buffers 0 and 1. Before the loop the block copies slice 0 into buffer 0. Then
// for every slice s, in buffer s mod 2:
//
//   fetch slice s + 1 from global memory into registers   (the loads are issued, not awaited)
//   multiply slice s                                      (64 FMAs per k, from shared memory)
//   stash slice s + 1 into the other buffer               (the loads must have arrived by now)
//   __syncthreads()
//
// One barrier per slice is enough: the buffer that receives slice s + 1 was last read while
// multiplying slice s − 1, and every thread finished that before the previous barrier; the
// barrier after the stash makes slice s + 1 complete before anyone multiplies it.
//
// What changed and why it should be faster: in rung 7 a warp waits at the first barrier
// until its slice has come all the way from global memory (hundreds of cycles), and at the
// second until every warp has finished multiplying; other warps of the SM can fill those
// gaps only if there are enough of them. Here a thread issues its global loads and goes on
// with 512 FMAs that do not depend on them, so the memory latency hides behind its own
// arithmetic, and there is one barrier per slice instead of two. The cost: twice the shared
// memory (16 KiB a block) and 8 more registers per thread holding the slice in transit.
#include "cuda/gemm_ladder/warp_tiles.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kStages = 2;
static_assert(tiling(Rung::double_buffered) ==
                  Tiling{kVecThreads, kVecTile, kVecTile, kVecSliceK, kIterM * kSub, kIterN * kSub, 4, kStages},
              "ladder.h");

// A (M, K), B (K, N), C (M, N).
template <bool kVector>
__global__ void __launch_bounds__(kVecThreads)
    gemm_double_buffered(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    GG_SHARED(VecSliceA[kStages], As);  // (2, 8, 128), transposed: slice s's A[m0 + m][k0 + k] at As[s % 2].at[k][m]
    GG_SHARED(VecSliceB[kStages], Bs);  // (2, 8, 128): slice s's B[k0 + k][n0 + n] at Bs[s % 2].at[k][n]
    const int m0 = int(blockIdx.y) * kVecTile, n0 = int(blockIdx.x) * kVecTile;
    LaneTile tile = lane_tile();
    load_vec_slices<kVector>(As[0], Bs[0], A, B, M, N, K, m0, n0, 0);
    __syncthreads();
    for (int k0 = 0, buffer = 0; k0 < K; k0 += kVecSliceK, buffer ^= 1) {
        const bool last = k0 + kVecSliceK >= K;
        VecSliceShare next;  // this thread's share of the next slice, in registers
        if (!last) next = fetch_vec_slices<kVector>(A, B, M, N, K, m0, n0, k0 + kVecSliceK);
        multiply_slice(tile, As[buffer], Bs[buffer]);
        if (!last) stash_vec_slices(As[buffer ^ 1], Bs[buffer ^ 1], next);
        __syncthreads();
    }
    store_lane_tile<kVector>(tile, C, M, N, m0, n0, alpha, beta);
}

}  // namespace

void double_buffered(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    launch_vec_tiles("gemm_double_buffered", [](auto vector) { return gemm_double_buffered<vector()>; }, M, N, K,
                     alpha, A, B, beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

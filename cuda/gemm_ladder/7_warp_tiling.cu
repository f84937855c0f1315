// Rung 7, warp tiling: the block tile is split into warp tiles, and each warp's tile into its
// lanes' thread tiles, so that the lanes of a warp read shared memory side by side.
//
// Mapping: a block of 256 threads (8 warps) computes a 128×128 tile of C, grid (⌈N/128⌉,
// ⌈M/128⌉), with rung 6's float4 slices (vector_tiles.h). The 8 warps form a 2×4 grid of
// warp tiles of 64×32; within one, each lane owns 2×2 sub-tiles of 4×4 results, 32 rows and
// 16 columns apart (warp_tiles.h): still 64 results per thread, as in rungs 5 and 6.
//
// What changed and why it should be faster: in rung 6 the 16 threads along a row of a warp
// own columns 8 apart, so their float4 reads of B's row hit the same shared-memory banks
// twice over (a 2-way bank conflict, two passes per read). Here, at each k, the lanes of a
// warp read one contiguous run of 32 values of A's column (8 float4s) and one of 16 values
// of B's row (4 float4s, each shared by 8 lanes): no conflicts, and each warp works from a
// compact 64×32 corner of the slices. It is also the hierarchy the hardware has — block
// (shared memory), warp (the unit that issues), thread (registers) — and the one tensor
// cores need: in rung 9 a warp's tile is computed by mma instructions instead of lanes.
#include "cuda/gemm_ladder/warp_tiles.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

static_assert(tiling(Rung::warp_tiling) ==
                  Tiling{kVecThreads, kVecTile, kVecTile, kVecSliceK, kIterM * kSub, kIterN * kSub, 4, 1},
              "ladder.h");

// A (M, K), B (K, N), C (M, N).
template <bool kVector>
__global__ void __launch_bounds__(kVecThreads)
    gemm_warp_tiling(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    GG_SHARED(VecSliceA, As);  // (8, 128), transposed: A[m0 + m][k0 + k] at As.at[k][m]
    GG_SHARED(VecSliceB, Bs);  // (8, 128): B[k0 + k][n0 + n] at Bs.at[k][n]
    const int m0 = int(blockIdx.y) * kVecTile, n0 = int(blockIdx.x) * kVecTile;
    LaneTile tile = lane_tile();
    for (int k0 = 0; k0 < K; k0 += kVecSliceK) {
        load_vec_slices<kVector>(As, Bs, A, B, M, N, K, m0, n0, k0);
        __syncthreads();  // the slices are complete
        multiply_slice(tile, As, Bs);
        __syncthreads();  // every warp is done with them before the next slice overwrites them
    }
    store_lane_tile<kVector>(tile, C, M, N, m0, n0, alpha, beta);
}

}  // namespace

void warp_tiling(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    launch_vec_tiles("gemm_warp_tiling", [](auto vector) { return gemm_warp_tiling<vector()>; }, M, N, K, alpha, A, B,
                     beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

// Rung 7, warp tiling: the block tile is split into warp tiles, and each warp's tile into its
// lanes' thread tiles, so that the lanes of a warp read shared memory side by side.
//
// Mapping: a block of 256 threads (8 warps) computes a 128×128 tile of C, grid (⌈N/128⌉,
// ⌈M/128⌉), with rung 6's float4 slices (vector_tiles.h). The 8 warps form a 2×4 grid of
// warp tiles of 64×32. Within a warp tile the 32 lanes form an 8×4 grid, and each lane owns
// 2×2 sub-tiles of 4×4 results, 32 rows and 16 columns apart:
//
//   row    = 64·(warp / 4) + 32·i + 4·(lane / 4) + r      i < 2, r < 4
//   column = 32·(warp % 4) + 16·j + 4·(lane % 4) + c      j < 2, c < 4
//
// still 64 results per thread, as in rungs 5 and 6.
//
// What changed and why it should be faster: in rung 6 the 16 threads along a row of a warp
// own columns 8 apart, so their float4 reads of B's row hit the same shared-memory banks
// twice over (a 2-way bank conflict, two passes per read). Here, at each k, the lanes of a
// warp read one contiguous run of 32 values of A's column (8 float4s) and one of 16 values
// of B's row (4 float4s, each shared by 8 lanes): no conflicts, and each warp works from a
// compact 64×32 corner of the slices. It is also the hierarchy the hardware has — block
// (shared memory), warp (the unit that issues), thread (registers) — and the one tensor
// cores need: in rung 8 a warp's tile is computed by WMMA fragments instead of lanes.
#include "cuda/gemm_ladder/vector_tiles.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kWarpM = 64, kWarpN = 32;                 // warp tile
constexpr int kLaneRows = 8, kLaneCols = 4;             // the lanes of a warp over its tile
constexpr int kSub = 4;                                 // a lane's sub-tiles: 4 × 4
constexpr int kIterM = kWarpM / (kLaneRows * kSub);     // 2 sub-tiles down
constexpr int kIterN = kWarpN / (kLaneCols * kSub);     // 2 sub-tiles across
constexpr int kWarpsAcross = kVecTile / kWarpN;         // 4
static_assert((kVecTile / kWarpM) * kWarpsAcross * kWarpSize == kVecThreads, "one warp per warp tile");
static_assert(tiling(Rung::warp_tiling) == Tiling{kVecThreads, kVecTile, kVecTile, kVecSliceK, kIterM * kSub,
                                                 kIterN * kSub, 4},
              "ladder.h");

// A (M, K), B (K, N), C (M, N).
template <bool kVector>
__global__ void __launch_bounds__(kVecThreads)
    gemm_warp_tiling(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    GG_SHARED(VecSliceA, As);  // (8, 128), transposed: A[m0 + m][k0 + k] at As.at[k][m]
    GG_SHARED(VecSliceB, Bs);  // (8, 128): B[k0 + k][n0 + n] at Bs.at[k][n]
    const int m0 = int(blockIdx.y) * kVecTile, n0 = int(blockIdx.x) * kVecTile;
    const int warp = int(threadIdx.x) / kWarpSize, lane = int(threadIdx.x) % kWarpSize;
    // This lane's first row and column within the block tile; sub-tiles follow 32 rows and
    // 16 columns further on.
    const int row0 = kWarpM * (warp / kWarpsAcross) + kSub * (lane / kLaneCols);
    const int col0 = kWarpN * (warp % kWarpsAcross) + kSub * (lane % kLaneCols);
    constexpr int kStrideM = kLaneRows * kSub, kStrideN = kLaneCols * kSub;  // 32, 16

    float acc[kIterM][kIterN][kSub][kSub] = {};
    for (int k0 = 0; k0 < K; k0 += kVecSliceK) {
        load_vec_slices<kVector>(As, Bs, A, B, M, N, K, m0, n0, k0);
        __syncthreads();
        for (int k = 0; k < kVecSliceK; ++k) {
            float a[kIterM][kSub], b[kIterN][kSub];  // one float4 per sub-tile row and column
            for (int i = 0; i < kIterM; ++i) read4(a[i], &As.at[k][row0 + kStrideM * i]);
            for (int j = 0; j < kIterN; ++j) read4(b[j], &Bs.at[k][col0 + kStrideN * j]);
            for (int i = 0; i < kIterM; ++i)
                for (int j = 0; j < kIterN; ++j)
                    for (int r = 0; r < kSub; ++r)
                        for (int c = 0; c < kSub; ++c) acc[i][j][r][c] += a[i][r] * b[j][c];
        }
        __syncthreads();
    }
    // Unrolled by request: left to itself nvcc keeps this loop nest, and acc, indexed by its
    // counters, would move to (slow, off-chip) local memory.
    GG_UNROLL
    for (int i = 0; i < kIterM; ++i)
        GG_UNROLL
        for (int r = 0; r < kSub; ++r) {
            const int m = m0 + row0 + kStrideM * i + r;
            if (m >= M) continue;
            GG_UNROLL
            for (int j = 0; j < kIterN; ++j)
                store4<kVector>(C + m * N, n0 + col0 + kStrideN * j, N,
                                float4{acc[i][j][r][0], acc[i][j][r][1], acc[i][j][r][2], acc[i][j][r][3]}, alpha,
                                beta);
        }
}

}  // namespace

void warp_tiling(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    const dim3 grid(ceil_div(N, kVecTile), ceil_div(M, kVecTile));
    if (float4_fits(A, B, C, N, K))
        launch("gemm_warp_tiling", gemm_warp_tiling<true>, grid, dim3(kVecThreads), 0, M, N, K, alpha, A, B, beta, C);
    else
        launch("gemm_warp_tiling", gemm_warp_tiling<false>, grid, dim3(kVecThreads), 0, M, N, K, alpha, A, B, beta,
               C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

// warp_tiles.h — rung 7's warp tiling, which rung 8 keeps: how the 256 threads of a block
// share its 128×128 tile of C, and what each does with a K slice in shared memory.
//
// The 8 warps form a 2×4 grid of warp tiles of 64×32. Within a warp tile the 32 lanes form
// an 8×4 grid, and each lane owns 2×2 sub-tiles of 4×4 results, 32 rows and 16 columns apart:
//
//   row    = 64·(warp / 4) + 32·i + 4·(lane / 4) + r      i < 2, r < 4
//   column = 32·(warp % 4) + 16·j + 4·(lane % 4) + c      j < 2, c < 4
//
// 64 results per thread. At each k of a slice the lanes of a warp read one contiguous run of
// 32 values of A's column (8 float4s) and one of 16 values of B's row (4 float4s, each shared
// by 8 lanes): no two lanes read different words of one shared-memory bank.
#pragma once
#include "cuda/gemm_ladder/vector_tiles.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

constexpr int kWarpM = 64, kWarpN = 32;              // warp tile
constexpr int kLaneRows = 8, kLaneCols = 4;          // the lanes of a warp over its tile
constexpr int kSub = 4;                              // a lane's sub-tiles: 4 × 4
constexpr int kIterM = kWarpM / (kLaneRows * kSub);  // 2 sub-tiles down
constexpr int kIterN = kWarpN / (kLaneCols * kSub);  // 2 sub-tiles across
constexpr int kStrideM = kLaneRows * kSub, kStrideN = kLaneCols * kSub;  // 32, 16: between sub-tiles
constexpr int kWarpsAcross = kVecTile / kWarpN;      // 4
static_assert((kVecTile / kWarpM) * kWarpsAcross * kWarpSize == kVecThreads, "one warp per warp tile");

// One lane's results and where they sit in the block tile.
struct LaneTile {
    int row0, col0;                          // the first sub-tile's first row and column
    float acc[kIterM][kIterN][kSub][kSub];   // sub-tile (i, j)'s 4×4 sums
};

__device__ inline LaneTile lane_tile() {
    const int warp = int(threadIdx.x) / kWarpSize, lane = int(threadIdx.x) % kWarpSize;
    return {kWarpM * (warp / kWarpsAcross) + kSub * (lane / kLaneCols),
            kWarpN * (warp % kWarpsAcross) + kSub * (lane % kLaneCols),
            {}};
}

// tile.acc += the products of one K slice: As (8, 128) holds A's slice transposed, Bs (8, 128)
// B's. Unrolled by request: left to itself nvcc may keep the loop nest, and acc, indexed by
// its counters, would move to (slow, off-chip) local memory.
__device__ __forceinline__ void multiply_slice(LaneTile& tile, const VecSliceA& As, const VecSliceB& Bs) {
    GG_UNROLL
    for (int k = 0; k < kVecSliceK; ++k) {
        float a[kIterM][kSub], b[kIterN][kSub];  // one float4 per sub-tile row and column
        GG_UNROLL
        for (int i = 0; i < kIterM; ++i) read4(a[i], &As.at[k][tile.row0 + kStrideM * i]);
        GG_UNROLL
        for (int j = 0; j < kIterN; ++j) read4(b[j], &Bs.at[k][tile.col0 + kStrideN * j]);
        GG_UNROLL
        for (int i = 0; i < kIterM; ++i)
            GG_UNROLL
            for (int j = 0; j < kIterN; ++j)
                GG_UNROLL
                for (int r = 0; r < kSub; ++r)
                    GG_UNROLL
                    for (int c = 0; c < kSub; ++c) tile.acc[i][j][r][c] += a[i][r] * b[j][c];
    }
}

// C (M, N) at the block tile (m0, n0) = alpha·tile + beta·C, 4 columns at a time.
template <bool kVector>
__device__ __forceinline__ void store_lane_tile(const LaneTile& tile, float* C, int M, int N, int m0, int n0,
                                                float alpha, float beta) {
    GG_UNROLL
    for (int i = 0; i < kIterM; ++i)
        GG_UNROLL
        for (int r = 0; r < kSub; ++r) {
            const int m = m0 + tile.row0 + kStrideM * i + r;
            if (m >= M) continue;
            GG_UNROLL
            for (int j = 0; j < kIterN; ++j) {
                const float* acc = tile.acc[i][j][r];
                store4<kVector>(C + m * N, n0 + tile.col0 + kStrideN * j, N, float4{acc[0], acc[1], acc[2], acc[3]},
                                alpha, beta);
            }
        }
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

// mma_tiles.h — what the tensor-core rungs, 9 (tensor_cores) and 10 (async_pipeline), share:
// bf16 K slices cut into 16-byte chunks, the two shared-memory layouts they are stored in, each
// warp's mma.sync tiles, and the epilogue.
//
//   C = alpha · A · B + beta · C,   A (M, K), B (K, N) bf16 row-major; C (M, N) f32
//
// C is f32, as in cuBLAS's bf16 GEMM with f32 output (cublasGemmEx, CUDA_R_16BF inputs,
// CUDA_R_32F C), the rungs' peer in bench/gpu: each product of two bf16 is exact in f32, the
// sums over K stay in f32, and nothing is rounded to bf16 on the way out.
//
// The cut: a block of 256 threads (8 warps) computes a 128×128 tile of C; the warps form a 2×4
// grid of warp tiles of 64×32, as in rung 7, and each warp tile is 4×4 mma tiles of 16×8
// (mma.sync m16n8k16, cuda/mma.h), so a lane keeps 4·4·4 = 64 f32 accumulators. K is walked in
// slices of 32: A's slice (128, 32) with k contiguous, rows of 4 chunks of 8 bf16; B's slice
// (32, 128) with n contiguous, rows of 16 chunks. Each slice is 512 chunks, 2 per thread.
// Per 16 of k a warp issues 4 ldmatrix.x4 for its A tiles (lane l names row l mod 16, chunk
// l / 16), 2 ldmatrix.x4.trans for its B tiles (two n tiles each) and 16 mma.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/gemm_ladder/rungs.h"
#include "cuda/mma.h"
#include "cuda/swizzle.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

constexpr int kMmaTile = 128;     // block tile: 128 × 128 of C
constexpr int kMmaSliceK = 32;    // K slice in shared memory
constexpr int kMmaThreads = 256;  // 8 warps
constexpr int kMmaWarpM = 64, kMmaWarpN = 32;
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;    // one mma.sync
constexpr int kTilesM = kMmaWarpM / kMmaM;          // 4 mma tiles down a warp tile
constexpr int kTilesN = kMmaWarpN / kMmaN;          // 4 across
constexpr int kMmaWarpsAcross = kMmaTile / kMmaWarpN;  // 4
constexpr int kChunk = 8;                           // bf16 in 16 bytes
constexpr int kChunksPerThread = kMmaTile * kMmaSliceK / kChunk / kMmaThreads;  // 2 of each slice
static_assert((kMmaTile / kMmaWarpM) * kMmaWarpsAcross * kWarpSize == kMmaThreads, "one warp per warp tile");

// The tiling (ladder.h) of a rung built from these constants, with `stages` slices in shared
// memory; a register tile is one warp's, a load moves 8 bf16.
constexpr Tiling mma_tiling(int stages) {
    return {kMmaThreads, kMmaTile, kMmaTile, kMmaSliceK, kMmaWarpM, kMmaWarpN, kChunk, stages};
}

// A slice in shared memory is an array of 16-byte chunks, and a layout says which chunk holds
// elements col .. col + 8 of row r (col a multiple of 8) of a (kRows, kCols) bf16 slice. Two
// layouts follow. ldmatrix reads 8 rows of 16 bytes at once, one chunk from each of 8
// consecutive rows; shared memory serves 128 bytes (8 chunks: 32 banks of 4 bytes) a cycle, so
// those 8 chunks must fall in 8 different 16-byte bank groups, chunk index mod 8, or the read
// takes several passes.
//
// Padded: rows one chunk longer than the slice. A row of A is then 5 chunks, of B 17: row r
// starts in bank group 5r or 17r = r (mod 8), different for 8 consecutive rows. The price is
// a fifth (A) or a sixteenth (B) of the shared memory left unused, and a 2-way conflict when
// 8 threads store 8 consecutive chunks of A: two rows of 4 and the pad between them span 9
// chunks, so the first and the last share a group.
template <int kRows, int kCols>
struct PaddedRows {
    static constexpr int kRowChunks = kCols / kChunk + 1;
    static constexpr int kChunks = kRows * kRowChunks;  // the array's length
    __device__ static int chunk(int row, int col) { return row * kRowChunks + col / kChunk; }
};

// Swizzled: rows as long as the slice, and chunk c of row r stored at chunk c ^ s(r) of the
// same row (cuda/swizzle.h): s(r) = r mod 8 for B's rows of 16 chunks, (r / 2) mod 4 for A's
// rows of 4, which puts the 8 chunks of every ldmatrix read, and of every 8 consecutive chunks
// that threads store, in 8 different groups; no memory unused.
template <int kRows, int kCols>
struct SwizzledRows {
    static constexpr int kRowChunks = kCols / kChunk;
    static constexpr int kChunks = kRows * kRowChunks;
    __device__ static int chunk(int row, int col) { return swizzled_chunk<kRowChunks>(row, col / kChunk); }
};

// One K slice of A and one of B, each in `Layout`: 16-byte chunks of 8 bf16.
template <template <int, int> class Layout>
struct alignas(128) MmaStage {
    using LayoutA = Layout<kMmaTile, kMmaSliceK>;  // (128, 32): A[m0 + m][k0 + k .. + 8] in a[chunk(m, k)]
    using LayoutB = Layout<kMmaSliceK, kMmaTile>;  // (32, 128): B[k0 + k][n0 + n .. + 8] in b[chunk(k, n)]
    uint4 a[LayoutA::kChunks];
    uint4 b[LayoutB::kChunks];
};

// Whether every chunk of A (M, K) and B (K, N) is one aligned 16-byte access wholly inside or
// wholly outside its matrix: both 16-byte aligned, K and N multiples of 8.
inline bool chunks_fit(const bfloat16* A, const bfloat16* B, int N, int K) {
    const auto aligned = [](const bfloat16* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    return aligned(A) && aligned(B) && K % kChunk == 0 && N % kChunk == 0;
}

// Launches the kernel that kernel_for(std::bool_constant<fits>) names, fits as chunks_fit
// says, on the grid of 128×128 tiles of C (M, N), with `shared` bytes of dynamic shared memory.
template <class KernelFor>
void launch_mma_tiles(const char* name, KernelFor kernel_for, size_t shared, int M, int N, int K, float alpha,
                      const bfloat16* A, const bfloat16* B, float beta, float* C) {
    const dim3 grid(ceil_div(N, kMmaTile), ceil_div(M, kMmaTile));
    if (chunks_fit(A, B, N, K))
        launch(name, kernel_for(std::true_type{}), grid, dim3(kMmaThreads), shared, M, N, K, alpha, A, B, beta, C);
    else
        launch(name, kernel_for(std::false_type{}), grid, dim3(kMmaThreads), shared, M, N, K, alpha, A, B, beta, C);
}

// Where chunk i (< kChunksPerThread) of this thread lies in a slice of kCols columns: elements
// col .. col + 8 of row. Consecutive threads take consecutive chunks, so a warp reads whole
// rows of global memory.
struct ChunkPlace {
    int row, col;
};
template <int kCols>
__device__ ChunkPlace chunk_place(int i) {
    const int e = int(threadIdx.x) + kMmaThreads * i;
    return {e / (kCols / kChunk), kChunk * (e % (kCols / kChunk))};
}

// Chunk i of this thread in the slice whose top-left element is (r0, c0) of X (rows, cols):
// its place in the slice, the global address of its first element (X itself for a chunk past
// the edge of X, which reads nothing) and how many of its 8 elements lie inside X.
template <int kCols>
struct SliceChunk {
    ChunkPlace place;
    const bfloat16* source;
    int valid;  // 0 to 8
    __device__ SliceChunk(const bfloat16* X, int rows, int cols, int r0, int c0, int i)
        : place(chunk_place<kCols>(i)) {
        const int r = r0 + place.row, c = c0 + place.col;
        valid = r < rows ? max(0, min(kChunk, cols - c)) : 0;
        source = valid > 0 ? X + int64_t(r) * cols + c : X;
    }
};

// The 8 bf16 of a chunk as one 16-byte value, zeros past `valid`: one aligned load (kVector),
// or element by element.
template <bool kVector, int kCols>
__device__ uint4 load_chunk(const SliceChunk<kCols>& chunk) {
    if constexpr (kVector) {
        if (chunk.valid == 0) return uint4{0, 0, 0, 0};
        GG_CHECK_ALIGNED(chunk.source, 16);
        return *reinterpret_cast<const uint4*>(chunk.source);
    } else {
        uint32_t pairs[kChunk / 2];  // two bf16 each, the first in the low half
        for (int i = 0; i < kChunk / 2; ++i) {
            const uint32_t first = 2 * i < chunk.valid ? chunk.source[2 * i].bits : 0;
            const uint32_t second = 2 * i + 1 < chunk.valid ? chunk.source[2 * i + 1].bits : 0;
            pairs[i] = first | second << 16;
        }
        return uint4{pairs[0], pairs[1], pairs[2], pairs[3]};
    }
}

// acc += the products of one stage's slices, for the warp tile at (warp_m, warp_n).
template <class Stage>
__device__ __forceinline__ void multiply_stage(float (&acc)[kTilesM][kTilesN][4], const Stage& stage, int warp_m,
                                               int warp_n) {
    using LA = typename Stage::LayoutA;
    using LB = typename Stage::LayoutB;
    const int lane = int(threadIdx.x) % kWarpSize;
    GG_UNROLL
    for (int kk = 0; kk < kMmaSliceK; kk += kMmaK) {
        uint32_t a[kTilesM][4], b[kTilesN][2];
        // A tile i: lane l names row l mod 16, columns from 8·(l / 16): quarters a0..a3.
        GG_UNROLL
        for (int i = 0; i < kTilesM; ++i)
            ldmatrix<4>(a[i], &stage.a[LA::chunk(warp_m + kMmaM * i + lane % 16, kk + kChunk * (lane / 16))]);
        // B tiles j, j + 1 in one x4.trans from k-major rows: lane l names k row l mod 16 and
        // columns from 8·(j + l / 16): matrices (j, k 0–7), (j, k 8–15), (j + 1, ...), (j + 1, ...).
        GG_UNROLL
        for (int j = 0; j < kTilesN; j += 2) {
            uint32_t pair[4];
            ldmatrix<4, true>(pair, &stage.b[LB::chunk(kk + lane % 16, warp_n + kMmaN * j + kChunk * (lane / 16))]);
            b[j][0] = pair[0], b[j][1] = pair[1], b[j + 1][0] = pair[2], b[j + 1][1] = pair[3];
        }
        GG_UNROLL
        for (int i = 0; i < kTilesM; ++i)
            GG_UNROLL
            for (int j = 0; j < kTilesN; ++j) mma_m16n8k16_bf16(acc[i][j], a[i], b[j], acc[i][j]);
    }
}

// C (M, N) = alpha·acc + beta·C over the warp tile whose first element is (m0, n0). Each lane
// writes its own accumulators (rows g and g + 8, columns 2q and 2q + 1 of each mma tile,
// cuda/mma.h) straight from its registers.
__device__ __forceinline__ void store_mma_tiles(const float (&acc)[kTilesM][kTilesN][4], float* C, int M, int N,
                                                int m0, int n0, float alpha, float beta) {
    for_each_accumulator(acc, [&](int row, int col, float sum) {
        const int m = m0 + row, n = n0 + col;
        if (m < M && n < N) gemm_epilogue(&C[int64_t(m) * N + n], alpha, sum, beta);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

// Rung 9, tensor cores: rung 8's double-buffered block, with each warp's 64×32 tile multiplied
// by mma.sync on bf16 inputs instead of FMAs on f32 ones.
//
//   C = alpha · A · B + beta · C,   A, B bf16; C f32, sums in f32 (mma_tiles.h)
//
// Mapping: a block of 256 threads (8 warps) computes a 128×128 tile of C, grid (⌈N/128⌉,
// ⌈M/128⌉); a warp's 64×32 tile is 4×4 mma tiles of 16×8, 64 f32 accumulators a lane
// (mma_tiles.h). K is walked in slices of 32, double-buffered as in rung 8: each thread
// fetches its 2 + 2 chunks (16 bytes, 8 bf16 each) of the next slice into registers, the warps
// multiply the current slice — per 16 of k, 4 ldmatrix.x4 for A, 2 ldmatrix.x4.trans for B,
// 16 mma.sync — then the chunks go into the other buffer and the block meets at one barrier.
// Rows padded by one chunk keep ldmatrix free of bank conflicts (PaddedRows). The results go
// from each lane's registers straight to C.
//
// What changed and why it should be faster: a tensor core multiplies whole tiles: one
// mma.sync is 16·8·16 = 2048 multiply-adds for the warp, where an FMA instruction is 32, and
// the tensor cores of an H100 or H200 deliver many times the FP32 cores' multiply-adds per
// clock. To keep them fed, the operands come in bf16 — half the bytes of f32 per value from
// global and shared memory — and reach the registers through ldmatrix, one instruction per
// four 8×8 matrices, in exactly the lanes mma.sync wants them (cuda/mma.h). The price is
// precision: an input keeps 8 significant bits instead of 24, off by up to 2⁻⁹ of itself, so
// results differ from an f32 GEMM by about 2⁻⁸ of Σ|a·b|; the sums stay in f32.
#include "cuda/gemm_ladder/mma_tiles.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kStages = 2;
using Stage = MmaStage<PaddedRows>;
static_assert(tiling(Rung::tensor_cores) == mma_tiling(kStages), "ladder.h");

// This thread's chunks of a slice in transit, global memory → registers → shared memory.
struct ChunkShare {
    uint4 a[kChunksPerThread], b[kChunksPerThread];
};

template <bool kVector>
__device__ ChunkShare fetch_chunks(const bfloat16* A, const bfloat16* B, int M, int N, int K, int m0, int n0, int k0) {
    ChunkShare share;
    GG_UNROLL
    for (int i = 0; i < kChunksPerThread; ++i) {
        share.a[i] = load_chunk<kVector>(SliceChunk<kMmaSliceK>(A, M, K, m0, k0, i));
        share.b[i] = load_chunk<kVector>(SliceChunk<kMmaTile>(B, K, N, k0, n0, i));
    }
    return share;
}

__device__ void stash_chunks(Stage& stage, const ChunkShare& share) {
    GG_UNROLL
    for (int i = 0; i < kChunksPerThread; ++i) {
        const ChunkPlace a = chunk_place<kMmaSliceK>(i), b = chunk_place<kMmaTile>(i);
        stage.a[Stage::LayoutA::chunk(a.row, a.col)] = share.a[i];
        stage.b[Stage::LayoutB::chunk(b.row, b.col)] = share.b[i];
    }
}

// A (M, K), B (K, N) bf16, C (M, N) f32.
template <bool kVector>
__global__ void __launch_bounds__(kMmaThreads)
    gemm_tensor_cores(int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta, float* C) {
    GG_SHARED(Stage[kStages], stages);  // (2 buffers) × A's (128, 32) and B's (32, 128) slices, padded rows
    const int m0 = int(blockIdx.y) * kMmaTile, n0 = int(blockIdx.x) * kMmaTile;
    const int warp = int(threadIdx.x) / kWarpSize;
    const int warp_m = kMmaWarpM * (warp / kMmaWarpsAcross), warp_n = kMmaWarpN * (warp % kMmaWarpsAcross);
    float acc[kTilesM][kTilesN][4] = {};  // mma tile (i, j)'s c0..c3
    stash_chunks(stages[0], fetch_chunks<kVector>(A, B, M, N, K, m0, n0, 0));
    __syncthreads();
    for (int k0 = 0, buffer = 0; k0 < K; k0 += kMmaSliceK, buffer ^= 1) {
        const bool last = k0 + kMmaSliceK >= K;
        ChunkShare next;
        if (!last) next = fetch_chunks<kVector>(A, B, M, N, K, m0, n0, k0 + kMmaSliceK);
        multiply_stage(acc, stages[buffer], warp_m, warp_n);
        if (!last) stash_chunks(stages[buffer ^ 1], next);
        __syncthreads();
    }
    store_mma_tiles(acc, C, M, N, m0 + warp_m, n0 + warp_n, alpha, beta);
}

}  // namespace

void tensor_cores(int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta, float* C) {
    launch_mma_tiles("gemm_tensor_cores", [](auto fits) { return gemm_tensor_cores<fits()>; }, 0, M, N, K, alpha, A,
                     B, beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

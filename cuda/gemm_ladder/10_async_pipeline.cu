// Rung 10, an asynchronous pipeline: rung 9's tensor-core warps, fed by cp.async copies that
// run several K slices ahead, into shared memory laid out with an XOR swizzle.
//
// Mapping: as rung 9 — 256 threads, a 128×128 tile of C, warp tiles of 64×32 as 4×4 mma
// tiles, K slices of 32 in 16-byte chunks (mma_tiles.h) — with 4 stages of shared memory
// (64 KiB, dynamic), stage s mod 4 holding slice s. The block starts the copies of slices 0..2,
// then for every slice s:
//
//   cp_async_wait<2>(); __syncthreads();     slice s has landed, for every thread, and every
//                                            warp is done with slice s − 1's stage
//   start the copies of slice s + 3 into that stage; commit them as one group
//   multiply slice s                         (its copies are on their way meanwhile)
//
// Each thread commits one group per slice, empty ones past the end of K included, so that
// "at most 2 groups still in flight" always means "slice s has landed" (cuda/async_copy.h).
//
// What changed and why it should be faster:
// - cp.async copies global memory to shared memory without passing through registers: no
//   registers held for the slice in transit, and no instruction of the thread waits for the
//   load to arrive before storing it, as rung 9's stash must.
// - 3 slices in flight instead of 1: a slice has three slices' worth of mma time to arrive
//   rather than one, enough to cover global memory's latency with 8 warps a block.
// - The swizzled layout (SwizzledRows, mma_tiles.h) keeps ldmatrix and the copies free of
//   bank conflicts; rung 9's padding leaves a 2-way conflict in the stores of A's chunks and
//   unused memory, 74 KiB for 4 stages where the swizzle needs 64.
// Operands that are not 16-byte aligned, or K or N not a multiple of 8, take the same kernel
// with each chunk assembled in registers and stored (kAsync false); the pipeline is unchanged.
#include "cuda/async_copy.h"
#include "cuda/gemm_ladder/mma_tiles.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kStages = 4;
using Stage = MmaStage<SwizzledRows>;
static_assert(tiling(Rung::async_pipeline) == mma_tiling(kStages), "ladder.h");

// Starts the copy of one chunk to dst: cp.async, zero-filled past the edge (kAsync), or
// through registers.
template <bool kAsync, int kCols>
__device__ void copy_chunk(uint4& dst, const SliceChunk<kCols>& chunk) {
    if constexpr (kAsync)
        cp_async16(&dst, chunk.source, int(sizeof(bfloat16)) * chunk.valid);
    else
        dst = load_chunk<false>(chunk);
}

// Starts the copies of this thread's chunks of the slice at k0 into `stage`.
template <bool kAsync>
__device__ void copy_slices(Stage& stage, const bfloat16* A, const bfloat16* B, int M, int N, int K, int m0, int n0,
                            int k0) {
    GG_UNROLL
    for (int i = 0; i < kChunksPerThread; ++i) {
        const SliceChunk<kMmaSliceK> a(A, M, K, m0, k0, i);
        const SliceChunk<kMmaTile> b(B, K, N, k0, n0, i);
        copy_chunk<kAsync>(stage.a[Stage::LayoutA::chunk(a.place.row, a.place.col)], a);
        copy_chunk<kAsync>(stage.b[Stage::LayoutB::chunk(b.place.row, b.place.col)], b);
    }
}

// A (M, K), B (K, N) bf16, C (M, N) f32; dynamic shared memory: kStages stages.
template <bool kAsync>
__global__ void __launch_bounds__(kMmaThreads)
    gemm_async_pipeline(int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta, float* C) {
    GG_DYNAMIC_SHARED(Stage, stages);  // (4 stages) × A's (128, 32) and B's (32, 128) slices, swizzled
    const int m0 = int(blockIdx.y) * kMmaTile, n0 = int(blockIdx.x) * kMmaTile;
    const int warp = int(threadIdx.x) / kWarpSize;
    const int warp_m = kMmaWarpM * (warp / kMmaWarpsAcross), warp_n = kMmaWarpN * (warp % kMmaWarpsAcross);
    const int slices = (K + kMmaSliceK - 1) / kMmaSliceK;
    float acc[kTilesM][kTilesN][4] = {};  // mma tile (i, j)'s c0..c3
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < slices) copy_slices<kAsync>(stages[s], A, B, M, N, K, m0, n0, s * kMmaSliceK);
        cp_async_commit();
    }
    for (int s = 0; s < slices; ++s) {
        cp_async_wait<kStages - 2>();
        __syncthreads();
        const int ahead = s + kStages - 1;
        if (ahead < slices) copy_slices<kAsync>(stages[ahead % kStages], A, B, M, N, K, m0, n0, ahead * kMmaSliceK);
        cp_async_commit();
        multiply_stage(acc, stages[s % kStages], warp_m, warp_n);
    }
    store_mma_tiles(acc, C, M, N, m0 + warp_m, n0 + warp_n, alpha, beta);
}

}  // namespace

void async_pipeline(int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta, float* C) {
    launch_mma_tiles("gemm_async_pipeline", [](auto fits) { return gemm_async_pipeline<fits()>; },
                     kStages * sizeof(Stage), M, N, K, alpha, A, B, beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

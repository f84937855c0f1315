// ladder.h — the GEMM teaching ladder: the same product computed by ten kernels, each one
// optimisation further than the last (one kernel per file, cuda/gemm_ladder/<n>_<name>.cu):
//
//   1 naive            one thread per element of C, threads of a warp walk down a column
//   2 coalesced        the same, threads of a warp walk along a row
//   3 shared_tiles     32×32 tiles of A and B staged in shared memory
//   4 register_1d      each thread a column of 8 results (1-D register blocking)
//   5 register_2d      each thread an 8×8 block of results (2-D register blocking)
//   6 vectorized       float4 loads from global and shared memory, A's tile transposed
//   7 warp_tiling      block tile → warp tiles → thread tiles
//   8 double_buffered  two shared buffers: the next K slice loads while this one is multiplied
//   9 tensor_cores     bf16 inputs, mma.sync fed by ldmatrix, sums in f32
//  10 async_pipeline   cp.async four slices deep into swizzled shared memory
//
// Every rung computes, for row-major non-transposed matrices,
//
//   C = alpha · A · B + beta · C,   A (M, K), B (K, N), C (M, N), tight rows,
//
// the shape a benchmark uses; beta == 0 does not read C. Rungs 1–8 take f32 A and B and are
// exact f32 products (in different orders of addition). Rungs 9–10 take bf16 A and B, as the
// tensor cores do, and write C in f32 with the sums kept in f32 (cuBLAS's bf16 GEMM with f32
// output computes the same). The library's own GEMMs, with transposes, batches and f64, are
// cuda/gemm.cu and cuda/gemm_bf16.cu.
#pragma once
#include <cstdint>

#include "tensor/bf16.h"

namespace gg::cuda {

enum class Rung {
    naive = 1,
    coalesced,
    shared_tiles,
    register_1d,
    register_2d,
    vectorized,
    warp_tiling,
    double_buffered,
    tensor_cores,
    async_pipeline,
};

constexpr Rung kRungs[] = {Rung::naive,       Rung::coalesced,    Rung::shared_tiles,   Rung::register_1d,
                           Rung::register_2d, Rung::vectorized,   Rung::warp_tiling,    Rung::double_buffered,
                           Rung::tensor_cores, Rung::async_pipeline};

constexpr const char* rung_name(Rung rung) {
    switch (rung) {
        case Rung::naive: return "naive";
        case Rung::coalesced: return "coalesced";
        case Rung::shared_tiles: return "shared_tiles";
        case Rung::register_1d: return "register_1d";
        case Rung::register_2d: return "register_2d";
        case Rung::vectorized: return "vectorized";
        case Rung::warp_tiling: return "warp_tiling";
        case Rung::double_buffered: return "double_buffered";
        case Rung::tensor_cores: return "tensor_cores";
        case Rung::async_pipeline: return "async_pipeline";
    }
    return "?";
}

// Whether the rung takes A and B in bf16 (the tensor-core rungs) rather than f32.
constexpr bool takes_bf16(Rung rung) { return rung == Rung::tensor_cores || rung == Rung::async_pipeline; }

// How a rung divides the work, as its file's constants say (each rung file checks its entry
// with a static_assert). A block of `threads` threads computes a block_m × block_n tile of C.
// Rungs 3–10 walk K in slices of slice_k, staged in shared memory, so each element of a slice
// is read from global memory once per block; `stages` slices are in shared memory at once
// (two or more: the next ones load while one is multiplied). Rungs 1–2 (slice_k and stages 0)
// read every operand straight from global memory. The register tile, reg_m × reg_n, is the
// set of results that reuse each operand loaded into registers: one thread's in rungs 1–8,
// one warp's mma tiles in rungs 9–10. `vector` is the elements one load instruction moves
// (float4: 4 f32; 16 bytes: 8 bf16).
struct Tiling {
    int threads, block_m, block_n, slice_k, reg_m, reg_n, vector, stages;
    constexpr bool operator==(const Tiling&) const = default;
};

constexpr Tiling tiling(Rung rung) {
    switch (rung) {
        case Rung::naive:
        case Rung::coalesced: return {1024, 32, 32, 0, 1, 1, 1, 0};
        case Rung::shared_tiles: return {1024, 32, 32, 32, 1, 1, 1, 1};
        case Rung::register_1d: return {512, 64, 64, 8, 8, 1, 1, 1};
        case Rung::register_2d: return {256, 128, 128, 8, 8, 8, 1, 1};
        case Rung::vectorized:
        case Rung::warp_tiling: return {256, 128, 128, 8, 8, 8, 4, 1};
        case Rung::double_buffered: return {256, 128, 128, 8, 8, 8, 4, 2};
        case Rung::tensor_cores: return {256, 128, 128, 32, 64, 32, 8, 2};
        case Rung::async_pipeline: return {256, 128, 128, 32, 64, 32, 8, 4};
    }
    return {};
}

// Runs one rung (cuda/gemm_ladder/ladder.cu): A, B, C are device pointers, A and B f32 for
// rungs 1–8 and bf16 for rungs 9–10. Throws std::invalid_argument for a rung given the other
// input type, a negative size or a matrix of 2³¹ elements or more (the kernels index with int).
namespace emulated {
void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta,
                 float* C);
}  // namespace emulated
namespace gpu {  // in the nvcc build only
void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta,
                 float* C);
}  // namespace gpu

}  // namespace gg::cuda

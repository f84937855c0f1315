// ladder.h — the SGEMM teaching ladder: the same product computed by eight kernels, each one
// optimisation further than the last (one kernel per file, cuda/gemm_ladder/<n>_<name>.cu):
//
//   1 naive          one thread per element of C, threads of a warp walk down a column
//   2 coalesced      the same, threads of a warp walk along a row
//   3 shared_tiles   32×32 tiles of A and B staged in shared memory
//   4 register_1d    each thread a column of 8 results (1-D register blocking)
//   5 register_2d    each thread an 8×8 block of results (2-D register blocking)
//   6 vectorized     float4 loads from global and shared memory, A's tile transposed
//   7 warp_tiling    block tile → warp tiles → thread tiles
//   8 tensor cores   WMMA on TF32 inputs (m16n16k8), or on bf16 inputs (m16n16k16),
//                    accumulating in float
//
// Every rung computes, for row-major non-transposed f32 matrices,
//
//   C = alpha · A · B + beta · C,   A (M, K), B (K, N), C (M, N), tight rows,
//
// the shape a benchmark uses; beta == 0 does not read C. Rungs 1–7 are exact f32 products
// (in different orders of addition); rung 8 rounds A and B to its input precision first.
// The library's own GEMM, with transposes, batches and f64, is cuda/gemm.cu.
#pragma once
#include <cstdint>

namespace gg::cuda {

enum class Rung {
    naive = 1,
    coalesced,
    shared_tiles,
    register_1d,
    register_2d,
    vectorized,
    warp_tiling,
    tensor_core_tf32,
    tensor_core_bf16,
};

constexpr Rung kRungs[] = {Rung::naive,       Rung::coalesced,   Rung::shared_tiles,
                           Rung::register_1d, Rung::register_2d, Rung::vectorized,
                           Rung::warp_tiling, Rung::tensor_core_tf32, Rung::tensor_core_bf16};

constexpr const char* rung_name(Rung rung) {
    switch (rung) {
        case Rung::naive: return "naive";
        case Rung::coalesced: return "coalesced";
        case Rung::shared_tiles: return "shared_tiles";
        case Rung::register_1d: return "register_1d";
        case Rung::register_2d: return "register_2d";
        case Rung::vectorized: return "vectorized";
        case Rung::warp_tiling: return "warp_tiling";
        case Rung::tensor_core_tf32: return "tensor_core_tf32";
        case Rung::tensor_core_bf16: return "tensor_core_bf16";
    }
    return "?";
}

// How a rung divides the work, as its file's constants say (each rung file checks its entry
// with a static_assert). A block of `threads` threads computes a block_m × block_n tile of C.
// Rungs 3–8 walk K in slices of slice_k, staged in shared memory, so each element of a slice
// is read from global memory once per block; rungs 1–2 (slice_k 0) read every operand
// straight from global memory. The register tile, reg_m × reg_n, is the set of results that
// reuse each operand loaded into registers: one thread's in rungs 1–7, one warp's WMMA
// fragments in rung 8. `vector` is the elements one load instruction moves (float4: 4).
struct Tiling {
    int threads, block_m, block_n, slice_k, reg_m, reg_n, vector;
    constexpr bool operator==(const Tiling&) const = default;
};

constexpr Tiling tiling(Rung rung) {
    switch (rung) {
        case Rung::naive:
        case Rung::coalesced: return {1024, 32, 32, 0, 1, 1, 1};
        case Rung::shared_tiles: return {1024, 32, 32, 32, 1, 1, 1};
        case Rung::register_1d: return {512, 64, 64, 8, 8, 1, 1};
        case Rung::register_2d: return {256, 128, 128, 8, 8, 8, 1};
        case Rung::vectorized:
        case Rung::warp_tiling: return {256, 128, 128, 8, 8, 8, 4};
        case Rung::tensor_core_tf32:
        case Rung::tensor_core_bf16: return {128, 64, 64, 16, 32, 32, 1};
    }
    return {};
}

// Runs one rung (cuda/gemm_ladder/ladder.cu): A, B, C are device pointers. Throws
// std::invalid_argument for a negative size or a matrix of 2³¹ elements or more (the kernels
// index with int).
namespace emulated {
void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
}
namespace gpu {  // in the nvcc build only
void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
}

}  // namespace gg::cuda

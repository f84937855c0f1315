// rungs.h — what the rung files of the GEMM ladder share: the host function each one defines
// (ladder.cu picks one by its Rung) and the small helpers more than one rung uses.
#pragma once
#include "cuda/gemm.h"  // gemm_epilogue: C = alpha·acc + beta·C, without reading C when beta == 0
#include "cuda/gemm_ladder/ladder.h"
#include "cuda/launch.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

// C = alpha·A·B + beta·C with A (M, K), B (K, N), C (M, N) row-major, M, N > 0, K ≥ 0;
// A and B f32 up to rung 8, bf16 from rung 9 on.
void naive(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void coalesced(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void shared_tiles(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void register_1d(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void register_2d(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void vectorized(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void warp_tiling(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void double_buffered(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void tensor_cores(int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta, float* C);
void async_pipeline(int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta, float* C);

constexpr int kWarpSize = 32;  // warpSize, as a constant the compiler can fold

constexpr unsigned ceil_div(int n, int d) { return unsigned((n + d - 1) / d); }

// A shared-memory array aligned for vector loads (float4: 16 bytes): GG_SHARED declares plain
// arrays, aligned only as their elements are.
template <class T, int Rows, int Cols>
struct alignas(16) SharedTile {
    T at[Rows][Cols];
};

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

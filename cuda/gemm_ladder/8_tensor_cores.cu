// Rung 8, tensor cores: each warp's tile is computed by WMMA (warp matrix multiply-accumulate)
// on 16×16 fragments, with inputs rounded to TF32 or to bf16 and the sums kept in float.
//
//   tensor_core_tf32   A, B rounded to TF32 (10-bit mantissa), fragments m16n16k8
//   tensor_core_bf16   A, B rounded to bf16 (7-bit mantissa), fragments m16n16k16
//
// Mapping: a block of 128 threads (4 warps) computes a 64×64 tile of C, grid (⌈N/64⌉,
// ⌈M/64⌉). The warps form a 2×2 grid of 32×32 warp tiles; each warp holds 2×2 accumulator
// fragments of 16×16. Per K slice of 16, the block copies the (64, 16) slice of A and the
// (16, 64) slice of B into shared memory, rounding each value to the input precision on the
// way; then, per step of 8 (TF32) or 16 (bf16) along k, each warp loads 2 fragments of A and 2
// of B and issues 4 mma_sync. At the end the accumulators go through shared memory — their
// layout over the lanes is unspecified — to the bounds-checked alpha/beta epilogue.
//
// What changed and why it should be faster: rungs 1–7 multiply on the FP32 cores, one
// multiply-add per thread per instruction. A tensor core multiplies whole small matrices: one
// mma_sync is 16·16·8 (TF32) or 16·16·16 (bf16) multiply-adds for the warp, and the tensor
// cores deliver many times the FP32 cores' multiply-adds per clock. The price is precision:
// inputs keep 10 (TF32) or 7 (bf16) mantissa bits instead of 23, a relative rounding error up
// to 2⁻¹¹ or 2⁻⁸ per input, so results differ from an f32 GEMM; the sums stay in float.
#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <mma.h>
#endif

#include "cuda/gemm_ladder/rungs.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

using namespace nvcuda;

constexpr int kTile = 64;                    // block tile: 64 × 64 of C
constexpr int kSliceK = 16;                  // K slice in shared memory
constexpr int kWarpTile = 32;                // 2 × 2 warps of 32 × 32
constexpr int kFrag = 16;                    // a fragment covers 16 × 16 of C
constexpr int kFrags = kWarpTile / kFrag;    // 2 × 2 fragments per warp
constexpr int kWarpsAcross = kTile / kWarpTile;
constexpr int kThreads = kWarpsAcross * kWarpsAcross * kWarpSize;  // 128
static_assert(tiling(Rung::tensor_core_tf32) == Tiling{kThreads, kTile, kTile, kSliceK, kWarpTile, kWarpTile, 1} &&
                  tiling(Rung::tensor_core_bf16) == tiling(Rung::tensor_core_tf32),
              "ladder.h");
// Row padding of the shared tiles: rows 8 elements longer keep every fragment's first element
// 32-byte aligned and ldm a multiple of 16 bytes, as load/store_matrix_sync require, and
// spread a fragment's rows over more shared-memory banks.
constexpr int kPad = 8;

// What the two input precisions differ in.
// Values are rounded once, on their way into shared memory, rather than in every fragment after
// load_matrix_sync (CUDA's usual example): the fragments then hold exact TF32 values, which
// the tensor cores read unchanged.
struct Tf32 {
    using Element = float;  // shared memory holds the rounded values in floats
    using Fragment = wmma::precision::tf32;
    static constexpr int kStep = 8;  // m16n16k8
    __device__ static float convert(float x) { return wmma::__float_to_tf32(x); }
};
struct Bf16 {
    using Element = __nv_bfloat16;
    using Fragment = __nv_bfloat16;
    static constexpr int kStep = 16;  // m16n16k16
    __device__ static __nv_bfloat16 convert(float x) { return __float2bfloat16(x); }
};

// A (M, K), B (K, N), C (M, N).
template <class Precision>
__global__ void __launch_bounds__(kThreads)
    gemm_tensor_core(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    using In = typename Precision::Element;
    using FragIn = typename Precision::Fragment;
    constexpr int kStep = Precision::kStep;
    using SliceA = SharedTile<In, kTile, kSliceK + kPad>;
    using SliceB = SharedTile<In, kSliceK, kTile + kPad>;
    using TileC = SharedTile<float, kTile, kTile + kPad>;
    GG_SHARED(SliceA, As);  // (64, 16): A[m0 + m][k0 + k], rounded, at As.at[m][k]
    GG_SHARED(SliceB, Bs);  // (16, 64): B[k0 + k][n0 + n], rounded, at Bs.at[k][n]
    GG_SHARED(TileC, Cs);   // (64, 64): the block's A·B, before alpha and beta
    const int t = int(threadIdx.x), m0 = int(blockIdx.y) * kTile, n0 = int(blockIdx.x) * kTile;
    const int warp = t / kWarpSize;
    const int wm = kWarpTile * (warp / kWarpsAcross), wn = kWarpTile * (warp % kWarpsAcross);  // the warp's tile

    wmma::fragment<wmma::accumulator, kFrag, kFrag, kStep, float> acc[kFrags][kFrags];
    for (int i = 0; i < kFrags; ++i)
        for (int j = 0; j < kFrags; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < K; k0 += kSliceK) {
        // Lanes take consecutive addresses: along a row of A, along a row of B.
        for (int e = t; e < kTile * kSliceK; e += kThreads) {
            const int ar = e / kSliceK, ak = e % kSliceK, bk = e / kTile, bn = e % kTile;
            As.at[ar][ak] = Precision::convert(m0 + ar < M && k0 + ak < K ? A[(m0 + ar) * K + k0 + ak] : 0.0f);
            Bs.at[bk][bn] = Precision::convert(k0 + bk < K && n0 + bn < N ? B[(k0 + bk) * N + n0 + bn] : 0.0f);
        }
        __syncthreads();
        for (int kk = 0; kk < kSliceK; kk += kStep) {
            wmma::fragment<wmma::matrix_a, kFrag, kFrag, kStep, FragIn, wmma::row_major> a[kFrags];
            wmma::fragment<wmma::matrix_b, kFrag, kFrag, kStep, FragIn, wmma::row_major> b[kFrags];
            for (int i = 0; i < kFrags; ++i) wmma::load_matrix_sync(a[i], &As.at[wm + kFrag * i][kk], kSliceK + kPad);
            for (int j = 0; j < kFrags; ++j) wmma::load_matrix_sync(b[j], &Bs.at[kk][wn + kFrag * j], kTile + kPad);
            for (int i = 0; i < kFrags; ++i)
                for (int j = 0; j < kFrags; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < kFrags; ++i)
        for (int j = 0; j < kFrags; ++j)
            wmma::store_matrix_sync(&Cs.at[wm + kFrag * i][wn + kFrag * j], acc[i][j], kTile + kPad,
                                    wmma::mem_row_major);
    __syncthreads();
    for (int e = t; e < kTile * kTile; e += kThreads) {
        const int r = e / kTile, c = e % kTile, m = m0 + r, n = n0 + c;
        if (m < M && n < N) gemm_epilogue(&C[m * N + n], alpha, Cs.at[r][c], beta);
    }
}

void run(const char* name, auto kernel, int M, int N, int K, float alpha, const float* A, const float* B, float beta,
         float* C) {
    launch(name, kernel, dim3(ceil_div(N, kTile), ceil_div(M, kTile)), dim3(kThreads), 0, M, N, K, alpha, A, B, beta,
           C);
}

}  // namespace

void tensor_core_tf32(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    run("gemm_tensor_core_tf32", gemm_tensor_core<Tf32>, M, N, K, alpha, A, B, beta, C);
}

void tensor_core_bf16(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    run("gemm_tensor_core_bf16", gemm_tensor_core<Bf16>, M, N, K, alpha, A, B, beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

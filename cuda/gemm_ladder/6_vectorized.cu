// Rung 6, vectorised loads: rung 5's 8×8 blocks per thread, with memory moved 16 bytes at a
// time (vector_tiles.h).
//
// Mapping: a block of 256 threads computes a 128×128 tile of C, grid (⌈N/128⌉, ⌈M/128⌉).
// Thread t owns rows 8·(t / 16) .. +8 and columns 8·(t % 16) .. +8 of the tile, as in rung 5.
// Per K slice of 8, each thread copies one float4 of A (into the transposed As[k][m]) and one
// of B; per k, it reads its 8 values of A and its 8 of B from shared memory as two float4
// each, and forms their 64 products. C is written 4 columns at a time.
//
// What changed and why it should be faster: the same bytes move in a quarter of the load and
// store instructions — one 128-bit access where rung 5 issued four 32-bit ones, to global and
// to shared memory. For shared memory that needs A's column at k to be contiguous, hence the
// transposed A slice; the transposing stores happen once per slice, the contiguous reads 8
// times per slice in every thread. Fewer instructions leave more issue slots for the FMAs.
// Alignment or sizes that do not allow float4 (K or N not a multiple of 4) take the scalar
// path of the same kernel.
#include "cuda/gemm_ladder/vector_tiles.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kTM = 8, kTN = 8;  // each thread's results: 8 × 8
static_assert(tiling(Rung::vectorized) == Tiling{kVecThreads, kVecTile, kVecTile, kVecSliceK, kTM, kTN, 4, 1},
              "ladder.h");

// A (M, K), B (K, N), C (M, N).
template <bool kVector>
__global__ void __launch_bounds__(kVecThreads)
    gemm_vectorized(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    GG_SHARED(VecSliceA, As);  // (8, 128), transposed: A[m0 + m][k0 + k] at As.at[k][m]
    GG_SHARED(VecSliceB, Bs);  // (8, 128): B[k0 + k][n0 + n] at Bs.at[k][n]
    const int t = int(threadIdx.x), m0 = int(blockIdx.y) * kVecTile, n0 = int(blockIdx.x) * kVecTile;
    const int row0 = t / (kVecTile / kTN) * kTM, col0 = t % (kVecTile / kTN) * kTN;  // this thread's 8×8 block
    float acc[kTM][kTN] = {};
    for (int k0 = 0; k0 < K; k0 += kVecSliceK) {
        load_vec_slices<kVector>(As, Bs, A, B, M, N, K, m0, n0, k0);
        __syncthreads();
        for (int k = 0; k < kVecSliceK; ++k) {
            float a[kTM], b[kTN];  // A's column and B's row at k: two float4 loads each
            for (int i = 0; i < kTM; i += 4) read4(&a[i], &As.at[k][row0 + i]);
            for (int j = 0; j < kTN; j += 4) read4(&b[j], &Bs.at[k][col0 + j]);
            for (int i = 0; i < kTM; ++i)
                for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < kTM; ++i) {
        const int m = m0 + row0 + i;
        if (m >= M) break;
        for (int j = 0; j < kTN; j += 4)
            store4<kVector>(C + m * N, n0 + col0 + j, N, float4{acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]},
                            alpha, beta);
    }
}

}  // namespace

void vectorized(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    launch_vec_tiles("gemm_vectorized", [](auto vector) { return gemm_vectorized<vector()>; }, M, N, K, alpha, A, B,
                     beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

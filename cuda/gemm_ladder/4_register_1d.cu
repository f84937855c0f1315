// Rung 4, 1-D register blocking: each thread computes a column of 8 results instead of one.
//
// Mapping: a block of 512 threads computes a 64×64 tile of C, grid (⌈N/64⌉, ⌈M/64⌉). Thread
// t owns column t % 64 and rows 8·(t / 64) .. +8 of the tile. K is walked in slices of 8: the
// block copies the (64, 8) slice of A and the (8, 64) slice of B into shared memory (one
// element of each per thread), then for each k every thread loads one value of B and
// multiplies it into its 8 results.
//
// What changed and why it should be faster: in rung 3 every multiply-add needs two loads from
// shared memory. Here the B value a thread loads at each k serves 8 multiply-adds, held in a
// register, so shared-memory loads per multiply-add drop from 2 to 1 + 1/8 — more arithmetic
// per load (higher arithmetic intensity per thread). The bigger 64×64 block tile also halves
// global traffic again compared with 32×32 tiles.
#include "cuda/gemm_ladder/rungs.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

namespace {

constexpr int kTile = 64;   // block tile: 64 × 64 of C
constexpr int kSliceK = 8;  // K slice in shared memory
constexpr int kTM = 8;      // results per thread, down a column
constexpr int kThreads = kTile * kTile / kTM;  // 512
static_assert(tiling(Rung::register_1d) == Tiling{kThreads, kTile, kTile, kSliceK, kTM, 1, 1, 1}, "ladder.h");

// A (M, K), B (K, N), C (M, N).
__global__ void __launch_bounds__(kThreads)
    gemm_register_1d(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    GG_SHARED(float[kTile][kSliceK], As);  // (64, 8): A[m0 + r][k0 + k] at As[r][k]
    GG_SHARED(float[kSliceK][kTile], Bs);  // (8, 64): B[k0 + k][n0 + c] at Bs[k][c]
    const int t = int(threadIdx.x), m0 = int(blockIdx.y) * kTile, n0 = int(blockIdx.x) * kTile;
    const int col = t % kTile, row0 = t / kTile * kTM;  // this thread: rows row0 .. row0 + 7 of column col
    float acc[kTM] = {};
    for (int k0 = 0; k0 < K; k0 += kSliceK) {
        // One element of each slice per thread; lanes take consecutive columns (coalesced).
        const int ar = t / kSliceK, ak = t % kSliceK, bk = t / kTile, bc = t % kTile;
        As[ar][ak] = m0 + ar < M && k0 + ak < K ? A[(m0 + ar) * K + k0 + ak] : 0.0f;
        Bs[bk][bc] = k0 + bk < K && n0 + bc < N ? B[(k0 + bk) * N + n0 + bc] : 0.0f;
        __syncthreads();
        for (int k = 0; k < kSliceK; ++k) {
            const float b = Bs[k][col];  // reused by all 8 results
            for (int i = 0; i < kTM; ++i) acc[i] += As[row0 + i][k] * b;
        }
        __syncthreads();
    }
    for (int i = 0; i < kTM; ++i) {
        const int m = m0 + row0 + i, n = n0 + col;
        if (m < M && n < N) gemm_epilogue(&C[m * N + n], alpha, acc[i], beta);
    }
}

}  // namespace

void register_1d(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    const dim3 grid(ceil_div(N, kTile), ceil_div(M, kTile));
    launch("gemm_register_1d", gemm_register_1d, grid, dim3(kThreads), 0, M, N, K, alpha, A, B, beta, C);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

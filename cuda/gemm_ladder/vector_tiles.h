// vector_tiles.h — the float4 memory traffic of rungs 6 (vectorized), 7 (warp_tiling) and 8
// (double_buffered): all compute a 128×128 tile of C per block of 256 threads, with K slices
// of 8.
//
// Per K slice each thread moves one float4 of A and one of B (global → shared):
//   A slice (128, 8):  thread t reads A[m0 + t/2][k0 + 4·(t%2) .. +4] and writes the four
//                      values down a column of As (8, 128), transposed: As[k][m]. The inner
//                      loop then finds the values of A it needs at one k side by side, and
//                      reads four of them with one float4 load.
//   B slice (8, 128):  thread t reads B[k0 + t/32][n0 + 4·(t%32) .. +4] into Bs[k][n] as is.
// C is written 4 columns at a time too.
//
// kVector: each float4 is one 16-byte load or store. That needs A, B and C 16-byte aligned and
// K and N multiples of 4, so that every row starts aligned and every float4 lies wholly
// inside the matrix or wholly past its edge. Otherwise (kVector false) the same float4s are
// assembled from four bounds-checked scalar accesses, and the kernels are unchanged.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/gemm_ladder/rungs.h"

namespace gg::cuda::GG_CUDA_BUILD::ladder {

constexpr int kVecTile = 128;  // block tile: 128 × 128 of C
constexpr int kVecSliceK = 8;  // K slice in shared memory
constexpr int kVecThreads = 256;

using VecSliceA = SharedTile<float, kVecSliceK, kVecTile>;  // (8, 128): A[m0 + m][k0 + k] at As.at[k][m]
using VecSliceB = SharedTile<float, kVecSliceK, kVecTile>;  // (8, 128): B[k0 + k][n0 + n] at Bs.at[k][n]

// Whether the kVector path applies (see above).
inline bool float4_fits(const float* A, const float* B, const float* C, int N, int K) {
    const auto aligned = [](const float* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    return aligned(A) && aligned(B) && aligned(C) && K % 4 == 0 && N % 4 == 0;
}

// Launches the kernel that kernel_for(std::bool_constant<kVector>) names, kVector as
// float4_fits says, on the grid of 128×128 tiles of C (M, N).
template <class KernelFor>
void launch_vec_tiles(const char* name, KernelFor kernel_for, int M, int N, int K, float alpha, const float* A,
                      const float* B, float beta, float* C) {
    const dim3 grid(ceil_div(N, kVecTile), ceil_div(M, kVecTile));
    if (float4_fits(A, B, C, N, K))
        launch(name, kernel_for(std::true_type{}), grid, dim3(kVecThreads), 0, M, N, K, alpha, A, B, beta, C);
    else
        launch(name, kernel_for(std::false_type{}), grid, dim3(kVecThreads), 0, M, N, K, alpha, A, B, beta, C);
}

// row[col .. col + 4], zeros from `cols` on.
template <bool kVector>
__device__ float4 load4(const float* row, int col, int cols) {
    if constexpr (kVector) {
        return col < cols ? *reinterpret_cast<const float4*>(row + col) : float4{0, 0, 0, 0};
    } else {
        float v[4];
        for (int i = 0; i < 4; ++i) v[i] = col + i < cols ? row[col + i] : 0.0f;
        return float4{v[0], v[1], v[2], v[3]};
    }
}

// row[col .. col + 4] = alpha·acc + beta·row[col .. col + 4], up to `cols`; beta == 0 reads nothing.
template <bool kVector>
__device__ void store4(float* row, int col, int cols, float4 acc, float alpha, float beta) {
    if constexpr (kVector) {
        if (col >= cols) return;
        float4& c = *reinterpret_cast<float4*>(row + col);
        const float4 old = beta == 0.0f ? float4{0, 0, 0, 0} : c;
        c = float4{alpha * acc.x + beta * old.x, alpha * acc.y + beta * old.y, alpha * acc.z + beta * old.z,
                   alpha * acc.w + beta * old.w};
    } else {
        const float v[4] = {acc.x, acc.y, acc.z, acc.w};
        for (int i = 0; i < 4; ++i)
            if (col + i < cols) gemm_epilogue(&row[col + i], alpha, v[i], beta);
    }
}

// out[0 .. 4] = p[0 .. 4] with one 16-byte shared-memory load; p is 16-byte aligned.
__device__ inline void read4(float* out, const float* p) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
}

// Where thread t's share of a slice sits: A's float4 is row ar, columns ak .. ak + 4 of the
// (128, 8) slice; B's is row bk, columns bn .. bn + 4 of the (8, 128) slice.
struct VecSlicePlace {
    int ar, ak, bk, bn;
};
__device__ inline VecSlicePlace vec_slice_place() {
    const int t = int(threadIdx.x);
    return {t / 2, 4 * (t % 2), t / 32, 4 * (t % 32)};
}

// One thread's share of a K slice on its way from global to shared memory: a float4 of A's
// rows and one of B's.
struct VecSliceShare {
    float4 a, b;
};

// Reads this thread's share of the K slice at k0 of the block tile at (m0, n0), A (M, K) and
// B (K, N): global memory → registers.
template <bool kVector>
__device__ VecSliceShare fetch_vec_slices(const float* A, const float* B, int M, int N, int K, int m0, int n0,
                                          int k0) {
    const auto [ar, ak, bk, bn] = vec_slice_place();
    return {m0 + ar < M ? load4<kVector>(A + (m0 + ar) * K, k0 + ak, K) : float4{0, 0, 0, 0},
            k0 + bk < K ? load4<kVector>(B + (k0 + bk) * N, n0 + bn, N) : float4{0, 0, 0, 0}};
}

// Writes a share into the slices: registers → shared memory, A's float4 down a column of As.
__device__ inline void stash_vec_slices(VecSliceA& As, VecSliceB& Bs, const VecSliceShare& share) {
    const auto [ar, ak, bk, bn] = vec_slice_place();
    As.at[ak + 0][ar] = share.a.x;
    As.at[ak + 1][ar] = share.a.y;
    As.at[ak + 2][ar] = share.a.z;
    As.at[ak + 3][ar] = share.a.w;
    *reinterpret_cast<float4*>(&Bs.at[bk][bn]) = share.b;
}

// Copies the K slice at k0 of the block tile at (m0, n0): A (M, K) → As, B (K, N) → Bs.
template <bool kVector>
__device__ void load_vec_slices(VecSliceA& As, VecSliceB& Bs, const float* A, const float* B, int M, int N, int K,
                                int m0, int n0, int k0) {
    stash_vec_slices(As, Bs, fetch_vec_slices<kVector>(A, B, M, N, K, m0, n0, k0));
}

}  // namespace gg::cuda::GG_CUDA_BUILD::ladder

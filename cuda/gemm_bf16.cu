// gemm_bf16.cu — the table's GEMM entry for bfloat16 (cuda/gemm.cu sends DType::bf16 here),
// on the tensor cores through mma.sync:
//
//   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b]      A, B, C bf16; sums in f32
//
// with the same operands, transposes, leading dimensions and batch strides as gemm.cu's
// opening comment. Each product of two bf16 values is exact in f32 and the sums over K stay in
// f32 registers; alpha and beta are applied in f32 and the result is rounded to bf16 once, as
// it is stored (cuBLAS's bf16 GEMM with CUBLAS_COMPUTE_32F does the same).
//
// The instruction. mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 multiplies a 16×16
// tile of A by a 16×8 tile of B into a 16×8 tile of f32 accumulators, one warp at a time; the
// operands live in registers spread over the 32 lanes. For lane l, g = l / 4, q = l mod 4, two
// bf16 per 32-bit register, the lower-numbered element in the low half (PTX ISA, "Matrix
// fragments for mma.m16n8k16"):
//
//        A (16×16)                       B (16×8)                C, D (16×8, f32)
//   a0: row g,   k 2q, 2q+1        b0: k 2q, 2q+1,   col g     c0, c1: row g,   col 2q, 2q+1
//   a1: row g+8, k 2q, 2q+1        b1: k 2q+8, 2q+9, col g     c2, c3: row g+8, col 2q, 2q+1
//   a2: row g,   k 2q+8, 2q+9
//   a3: row g+8, k 2q+8, 2q+9
//
// ldmatrix builds these registers from shared memory without any lane arithmetic on values: it
// reads four (or two) 8×8 b16 matrices, lane 8j + r naming the address of row r of matrix j,
// and hands lane l row g, columns 2q and 2q+1 of each (cuda/mma.h). With both operands stored
// k-contiguous in shared memory — As[m][k], Bs[n][k] — the 16×16 tile of A is one x4 (its
// four 8×8 quarters are a0..a3) and two neighbouring 16×8 tiles of B one x4 too.
//
// How the work is cut. A block of 128 threads (4 warps) computes a 64×64 tile of C; the warps
// form a 2×2 grid of 32×32 warp tiles, each 2 × 4 mma tiles of 16×8, so a lane keeps 2·4·4 = 32
// f32 accumulators. K is walked in slices of 32: the block copies the (64, 32) slices of op(A)
// and op(B) into shared memory (zeros past the matrix edges, so edge tiles need no other case;
// k runs along the contiguous index of global memory when the operand has one, so the warp's
// reads are coalesced either way), then each warp, per 16 of k, issues 2 + 2 ldmatrix.x4 and
// 8 mma. Grid (⌈N/64⌉, ⌈M/64⌉, batch); batches and row tiles beyond 65535 are further launches.
//
// Why it should be fast, and what it leaves to do. One mma is 2048 multiply-adds for the warp,
// and the tensor cores run many times the FP32 cores' rate; every operand value brought into
// shared memory is used 64 times. Not yet done: a cp.async pipeline that loads the next slice
// while the tensor cores work on this one, vector global loads, a swizzled shared layout
// instead of padding, larger warp tiles, and split-K for long K. Rows of 32 + 8 bf16 (80
// bytes) keep every ldmatrix row address 16-byte aligned and put the 8 rows of one 8×8
// matrix in different bank groups.
#include <algorithm>
#include <cstdint>

#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/mma.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr int kTile = 64;     // block tile: 64 × 64 of C
constexpr int kSliceK = 32;   // K slice in shared memory
constexpr int kWarpTile = 32; // 2 × 2 warps of 32 × 32
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;
constexpr int kTilesM = kWarpTile / kMmaM;  // 2 mma tiles down a warp tile
constexpr int kTilesN = kWarpTile / kMmaN;  // 4 across
constexpr int kThreads = (kTile / kWarpTile) * (kTile / kWarpTile) * 32;  // 128
constexpr int kPad = 8;
constexpr int64_t kMaxGridYZ = 65535;

// One operand's K slice in shared memory, k contiguous: slice[i][k] with i along M (A) or N (B).
using Slice = bfloat16[kTile][kSliceK + kPad];

// Copies the (kTile, kSliceK) slice of an operand starting at (i0, k0) into slice[i][k], zero
// past I rows or K columns. Element (i, k) is at X[i·ld + k] when k_contiguous, else at
// X[k·ld + i]; consecutive threads take consecutive addresses either way.
__device__ void load_slice(Slice& slice, const bfloat16* X, int64_t ld, bool k_contiguous, int64_t i0, int64_t I,
                           int64_t k0, int64_t K) {
    for (int e = int(threadIdx.x); e < kTile * kSliceK; e += kThreads) {
        const int i = k_contiguous ? e / kSliceK : e % kTile;
        const int k = k_contiguous ? e % kSliceK : e / kTile;
        const int64_t row = i0 + i, col = k0 + k;
        slice[i][k] = row < I && col < K ? X[k_contiguous ? row * ld + col : col * ld + row] : bfloat16::from_bits(0);
    }
}

// A: op(A) (M, K), B: op(B) (K, N), C (M, N), each at its batch stride; grid (⌈N/64⌉,
// ⌈M/64⌉, batch), block 128.
__global__ void __launch_bounds__(kThreads)
    gemm_bf16_mma(int64_t M, int64_t N, int64_t K, float alpha, const bfloat16* A, int64_t lda, int64_t stride_a,
                  bool trans_a, const bfloat16* B, int64_t ldb, int64_t stride_b, bool trans_b, float beta,
                  bfloat16* C, int64_t ldc, int64_t stride_c) {
    GG_SHARED(Slice, As);  // (64, 32): op(A)[m0 + m, k0 + k] at As[m][k]
    GG_SHARED(Slice, Bs);  // (64, 32): op(B)[k0 + k, n0 + n] at Bs[n][k]
    const int64_t m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
    A += int64_t(blockIdx.z) * stride_a;
    B += int64_t(blockIdx.z) * stride_b;
    C += int64_t(blockIdx.z) * stride_c;
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    const int warp_m = warp / 2 * kWarpTile, warp_n = warp % 2 * kWarpTile;  // the warp tile in the block tile

    float acc[kTilesM][kTilesN][4] = {};  // mma tile (i, j)'s c0..c3
    for (int64_t k0 = 0; k0 < K; k0 += kSliceK) {
        load_slice(As, A, lda, !trans_a, m0, M, k0, K);
        load_slice(Bs, B, ldb, trans_b, n0, N, k0, K);
        __syncthreads();  // the slices are complete
        GG_UNROLL
        for (int kk = 0; kk < kSliceK; kk += kMmaK) {
            uint32_t a[kTilesM][4], b[kTilesN][2];
            // A tile i: lane l names row l mod 16, columns from 8·(l / 16): quarters a0..a3.
            GG_UNROLL
            for (int i = 0; i < kTilesM; ++i)
                ldmatrix<4>(a[i], &As[warp_m + i * kMmaM + lane % 16][kk + 8 * (lane / 16)]);
            // B tiles j, j+1 in one x4: lane l names n row 8·(l / 16) + l mod 8 of the pair,
            // k from 8·(l / 8 mod 2): matrices (j, k 0–7), (j, k 8–15), (j+1, ...), (j+1, ...).
            GG_UNROLL
            for (int j = 0; j < kTilesN; j += 2) {
                uint32_t pair[4];
                ldmatrix<4>(pair, &Bs[warp_n + j * kMmaN + 8 * (lane / 16) + lane % 8][kk + 8 * (lane / 8 % 2)]);
                b[j][0] = pair[0], b[j][1] = pair[1], b[j + 1][0] = pair[2], b[j + 1][1] = pair[3];
            }
            GG_UNROLL
            for (int i = 0; i < kTilesM; ++i)
                GG_UNROLL
                for (int j = 0; j < kTilesN; ++j) mma_m16n8k16_bf16(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();  // every warp is done with the slices before they are overwritten
    }

    // Lane l holds rows g and g + 8, columns 2q and 2q + 1 of each mma tile.
    const int g = lane / 4, q = lane % 4;
    GG_UNROLL
    for (int i = 0; i < kTilesM; ++i)
        GG_UNROLL
        for (int j = 0; j < kTilesN; ++j)
            GG_UNROLL
            for (int e = 0; e < 4; ++e) {
                const int64_t m = m0 + warp_m + i * kMmaM + g + 8 * (e / 2), n = n0 + warp_n + j * kMmaN + 2 * q + e % 2;
                if (m < M && n < N) {
                    bfloat16& c = C[m * ldc + n];
                    // beta 0 does not read C (it may hold NaN), as BLAS promises.
                    c = bfloat16(beta == 0.0f ? alpha * acc[i][j][e] : alpha * acc[i][j][e] + beta * float(c));
                }
            }
}

}  // namespace

void gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const bfloat16* A, int64_t lda, int64_t stride_a, const bfloat16* B, int64_t ldb, int64_t stride_b,
               float beta, bfloat16* C, int64_t ldc, int64_t stride_c) {
    if (batch == 0 || M == 0 || N == 0) return;
    // BLAS reads neither A nor B when alpha is 0 (they may hold NaN): C only scales by beta.
    if (alpha == 0.0f) K = 0;
    const int64_t tiles_n = (N + kTile - 1) / kTile, tiles_m = (M + kTile - 1) / kTile;
    for (int64_t b0 = 0; b0 < batch; b0 += kMaxGridYZ)
        for (int64_t t0 = 0; t0 < tiles_m; t0 += kMaxGridYZ) {
            const int64_t m0 = t0 * kTile;
            const dim3 grid(unsigned(tiles_n), unsigned(std::min(tiles_m - t0, kMaxGridYZ)),
                            unsigned(std::min(batch - b0, kMaxGridYZ)));
            launch("gemm_bf16", gemm_bf16_mma, grid, dim3(kThreads), 0, M - m0, N, K, alpha,
                   A + b0 * stride_a + (trans_a ? m0 : m0 * lda), lda, stride_a, trans_a, B + b0 * stride_b, ldb,
                   stride_b, trans_b, beta, C + b0 * stride_c + m0 * ldc, ldc, stride_c);
        }
}

}  // namespace gg::cuda::GG_CUDA_BUILD

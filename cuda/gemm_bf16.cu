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
// four 8×8 quarters are a0..a3) and two neighbouring 16×8 tiles of B one x4 too; stored with
// m or n contiguous — As[k][m], Bs[k][n] — the same x4 with .trans, which transposes each
// matrix on its way into the registers.
//
// How the work is cut. A block of 128 threads (4 warps) computes a 64×64 tile of C; the warps
// form a 2×2 grid of 32×32 warp tiles, each 2 × 4 mma tiles of 16×8, so a lane keeps 2·4·4 = 32
// f32 accumulators. K is walked in slices of 32: the block copies the (64, 32) slices of op(A)
// and op(B) into shared memory (zeros past the matrix edges, so edge tiles need no other case),
// then each warp, per 16 of k, issues 2 + 2 ldmatrix.x4 and 8 mma. Grid (⌈N/64⌉, ⌈M/64⌉,
// batch); batches and row tiles beyond 65535 are further launches. The host picks one of two
// ways to fill the slices:
//
// - Pipelined, where every operand is 16-byte aligned: pointers, leading dimensions and batch
//   strides multiples of 8 elements, so that every run of 8 contiguous elements is one aligned
//   16-byte chunk. Each thread starts cp.async copies (cuda/async_copy.h) of its 2 + 2 chunks
//   of a slice straight into shared memory, 4 stages deep: while the warps multiply slice s,
//   slices s + 1 .. s + 3 are on their way, and a wait_group and one barrier a slice are all
//   the synchronisation. A slice keeps the operand's contiguous direction — (64, 32), k
//   contiguous, when global memory has k contiguous, else (32, 64) — and ldmatrix reads the
//   second kind with .trans; chunks are XOR-swizzled (cuda/swizzle.h) so that neither
//   ldmatrix nor the copies meet bank conflicts. Chunks past an edge are zero-filled by the
//   copy itself (its src_bytes), partly past it in part.
// - General, for the rest: the block loads each slice element by element, k along the
//   contiguous index of global memory when the operand has one (so the warp's reads are
//   coalesced either way), stores it k contiguous with rows padded by one chunk (80 bytes,
//   which puts the 8 rows of one ldmatrix in different bank groups), and meets at two
//   barriers a slice.
//
// Why it should be fast, and what it leaves to do. One mma is 2048 multiply-adds for the warp,
// and the tensor cores run many times the FP32 cores' rate; every operand value brought into
// shared memory is used 64 times, and on the pipelined path its global load hides behind three
// slices of mma. Not yet done: larger block and warp tiles (more reuse per value loaded), and
// split-K for long K with few tiles. Neither path is measured on a GPU yet.
#include <algorithm>
#include <cstdint>

#include "cuda/async_copy.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/mma.h"
#include "cuda/swizzle.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr int kTile = 64;     // block tile: 64 × 64 of C
constexpr int kSliceK = 32;   // K slice in shared memory
constexpr int kWarpTile = 32; // 2 × 2 warps of 32 × 32
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;
constexpr int kTilesM = kWarpTile / kMmaM;  // 2 mma tiles down a warp tile
constexpr int kTilesN = kWarpTile / kMmaN;  // 4 across
constexpr int kThreads = (kTile / kWarpTile) * (kTile / kWarpTile) * 32;  // 128
constexpr int kChunk = 8;     // bf16 in 16 bytes: one row of an ldmatrix matrix, one cp.async
constexpr int kStages = 4;    // slices in shared memory on the pipelined path
constexpr int64_t kMaxGridYZ = 65535;

using Accumulators = float[kTilesM][kTilesN][4];  // mma tile (i, j)'s c0..c3

// One operand's K slice in shared memory, as the warps read it: op(A) (M, K) restricted to the
// block's 64 rows, or op(B) (K, N) seen as (N, K), i along M or N. row8(i, k) is the address of
// the 8 elements that start at (i, k) and run along the slice's contiguous direction: along k
// (kKContiguous) or along i.
//
// The general path's slice: (64, 32) with k contiguous, rows padded by one chunk.
struct alignas(16) PaddedSlice {
    static constexpr bool kKContiguous = true;
    bfloat16 at[kTile][kSliceK + kChunk];
    __device__ const void* row8(int i, int k) const { return &at[i][k]; }
};

// The pipelined path's slice, in swizzled 16-byte chunks: (64, 32) k contiguous, or (32, 64)
// i contiguous.
template <bool kKContiguousSlice>
struct alignas(128) ChunkSlice {
    static constexpr bool kKContiguous = kKContiguousSlice;
    static constexpr int kRows = kKContiguous ? kTile : kSliceK, kCols = kKContiguous ? kSliceK : kTile;
    static constexpr int kRowChunks = kCols / kChunk;
    static constexpr int kChunks = kRows * kRowChunks;
    uint4 chunks[kChunks];
    // Where the chunk holding elements col .. col + 8 of stored row `row` is.
    __device__ static int index(int row, int col) { return swizzled_chunk<kRowChunks>(row, col / kChunk); }
    __device__ const void* row8(int i, int k) const { return &chunks[kKContiguous ? index(i, k) : index(k, i)]; }
};

// Four 8×8 matrices of a slice into r[0..3] with one ldmatrix.x4. Matrix q = lane / 8 starts at
// (i0, k0) plus 8 along i and k as `kOrderB` says: A's quarters a0..a3 are (0, 0), (8, 0),
// (0, 8), (8, 8); two neighbouring B tiles' b0, b1 are (0, 0), (0, 8), (8, 0), (8, 8). Lane
// 8q + r names the r-th stored row of matrix q: (i + r, k) in a k-contiguous slice, which
// ldmatrix hands out as the mma wants; (i, k + r) in an i-contiguous one, transposed on the
// way (.trans).
template <bool kOrderB, class Slice>
__device__ __forceinline__ void ldmatrix_quad(uint32_t (&r)[4], const Slice& slice, int i0, int k0) {
    const int lane = int(threadIdx.x) % 32, q = lane / 8, row = lane % 8;
    const int i = i0 + 8 * (kOrderB ? q / 2 : q % 2), k = k0 + 8 * (kOrderB ? q % 2 : q / 2);
    if constexpr (Slice::kKContiguous)
        ldmatrix<4>(r, slice.row8(i + row, k));
    else
        ldmatrix<4, true>(r, slice.row8(i, k + row));
}

// acc += this warp's products of one K slice of op(A) and op(B); the warp tile at (warp_m,
// warp_n) of the block tile.
template <class SliceA, class SliceB>
__device__ __forceinline__ void multiply_slice(Accumulators& acc, const SliceA& As, const SliceB& Bs, int warp_m,
                                               int warp_n) {
    GG_UNROLL
    for (int kk = 0; kk < kSliceK; kk += kMmaK) {
        uint32_t a[kTilesM][4], b[kTilesN][2];
        GG_UNROLL
        for (int i = 0; i < kTilesM; ++i) ldmatrix_quad<false>(a[i], As, warp_m + i * kMmaM, kk);
        GG_UNROLL
        for (int j = 0; j < kTilesN; j += 2) {  // B tiles j and j + 1 in one x4
            uint32_t pair[4];
            ldmatrix_quad<true>(pair, Bs, warp_n + j * kMmaN, kk);
            b[j][0] = pair[0], b[j][1] = pair[1], b[j + 1][0] = pair[2], b[j + 1][1] = pair[3];
        }
        GG_UNROLL
        for (int i = 0; i < kTilesM; ++i)
            GG_UNROLL
            for (int j = 0; j < kTilesN; ++j) mma_m16n8k16_bf16(acc[i][j], a[i], b[j], acc[i][j]);
    }
}

// C (M, N) = alpha·acc + beta·C over the warp tile whose first element is (m0, n0), each lane
// its own accumulators (rows g and g + 8, columns 2q and 2q + 1 of each mma tile, cuda/mma.h).
__device__ __forceinline__ void store_warp_tile(const Accumulators& acc, bfloat16* C, int64_t ldc, int64_t M,
                                                int64_t N, int64_t m0, int64_t n0, float alpha, float beta) {
    for_each_accumulator(acc, [&](int row, int col, float sum) {
        const int64_t m = m0 + row, n = n0 + col;
        if (m < M && n < N) {
            bfloat16& c = C[m * ldc + n];
            // beta 0 does not read C (it may hold NaN), as BLAS promises.
            c = bfloat16(beta == 0.0f ? alpha * sum : alpha * sum + beta * float(c));
        }
    });
}

// The arguments both kernels take: A: op(A) (M, K), B: op(B) (K, N), C (M, N), each at its
// batch stride; grid (⌈N/64⌉, ⌈M/64⌉, batch), block 128.
struct Problem {
    int64_t M, N, K;
    float alpha, beta;
    const bfloat16* A;
    int64_t lda, stride_a;
    const bfloat16* B;
    int64_t ldb, stride_b;
    bfloat16* C;
    int64_t ldc, stride_c;
};

// What every thread of a block starts from: its batch's matrices and its warp's tile.
struct BlockStart {
    int64_t m0, n0;            // the block tile in C
    int warp_m, warp_n;        // the warp tile in the block tile
    const bfloat16 *A, *B;
    bfloat16* C;
    __device__ explicit BlockStart(const Problem& p)
        : m0(int64_t(blockIdx.y) * kTile), n0(int64_t(blockIdx.x) * kTile),
          warp_m(int(threadIdx.x) / 32 / 2 * kWarpTile), warp_n(int(threadIdx.x) / 32 % 2 * kWarpTile),
          A(p.A + int64_t(blockIdx.z) * p.stride_a), B(p.B + int64_t(blockIdx.z) * p.stride_b),
          C(p.C + int64_t(blockIdx.z) * p.stride_c) {}
};

// ---- the general path ----

// Copies the (kTile, kSliceK) slice of an operand starting at (i0, k0) into slice.at[i][k], zero
// past I rows or K columns. Element (i, k) is at X[i·ld + k] when k_contiguous, else at
// X[k·ld + i]; consecutive threads take consecutive addresses either way.
__device__ void load_slice(PaddedSlice& slice, const bfloat16* X, int64_t ld, bool k_contiguous, int64_t i0,
                           int64_t I, int64_t k0, int64_t K) {
    for (int e = int(threadIdx.x); e < kTile * kSliceK; e += kThreads) {
        const int i = k_contiguous ? e / kSliceK : e % kTile;
        const int k = k_contiguous ? e % kSliceK : e / kTile;
        const int64_t row = i0 + i, col = k0 + k;
        slice.at[i][k] =
            row < I && col < K ? X[k_contiguous ? row * ld + col : col * ld + row] : bfloat16::from_bits(0);
    }
}

__global__ void __launch_bounds__(kThreads) gemm_bf16_mma(Problem p, bool trans_a, bool trans_b) {
    GG_SHARED(PaddedSlice, As);  // (64, 32): op(A)[m0 + m, k0 + k] at As.at[m][k]
    GG_SHARED(PaddedSlice, Bs);  // (64, 32): op(B)[k0 + k, n0 + n] at Bs.at[n][k]
    const BlockStart b(p);
    Accumulators acc = {};
    for (int64_t k0 = 0; k0 < p.K; k0 += kSliceK) {
        load_slice(As, b.A, p.lda, !trans_a, b.m0, p.M, k0, p.K);
        load_slice(Bs, b.B, p.ldb, trans_b, b.n0, p.N, k0, p.K);
        __syncthreads();  // the slices are complete
        multiply_slice(acc, As, Bs, b.warp_m, b.warp_n);
        __syncthreads();  // every warp is done with the slices before they are overwritten
    }
    store_warp_tile(acc, b.C, p.ldc, p.M, p.N, b.m0 + b.warp_m, b.n0 + b.warp_n, p.alpha, p.beta);
}

// ---- the pipelined path ----

// Starts the cp.async copies of this thread's chunks of the slice whose first element is
// (i0, k0) of an operand X (I, K) — element (i, k) at X[i·ld + k] when the slice is k
// contiguous, else at X[k·ld + i] — zero-filling what lies past I or K.
template <bool kKContiguous>
__device__ void copy_slice(ChunkSlice<kKContiguous>& slice, const bfloat16* X, int64_t ld, int64_t i0, int64_t I,
                           int64_t k0, int64_t K) {
    using Slice = ChunkSlice<kKContiguous>;
    // The slice's stored rows and columns in global memory: rows from r0 up to `rows`, columns
    // from c0 up to `cols`.
    const int64_t r0 = kKContiguous ? i0 : k0, rows = kKContiguous ? I : K;
    const int64_t c0 = kKContiguous ? k0 : i0, cols = kKContiguous ? K : I;
    GG_UNROLL
    for (int n = 0; n < Slice::kChunks / kThreads; ++n) {  // consecutive threads, consecutive chunks
        const int e = int(threadIdx.x) + n * kThreads;
        const int row = e / Slice::kRowChunks, col = kChunk * (e % Slice::kRowChunks);
        const int64_t r = r0 + row, c = c0 + col, left = cols - c;  // elements of the row from c on
        const int valid = r >= rows || left <= 0 ? 0 : left < kChunk ? int(left) : kChunk;
        cp_async16(&slice.chunks[Slice::index(row, col)], valid > 0 ? X + r * ld + c : X,
                   valid * int(sizeof(bfloat16)));
    }
}

template <bool kKContiguousA, bool kKContiguousB>
struct alignas(128) Stage {
    ChunkSlice<kKContiguousA> a;  // op(A)[m0 + m, k0 + k]
    ChunkSlice<kKContiguousB> b;  // op(B)[k0 + k, n0 + n], i = n
};

// kKContiguousA = !trans_a, kKContiguousB = trans_b.
template <bool kKContiguousA, bool kKContiguousB>
__global__ void __launch_bounds__(kThreads) gemm_bf16_pipelined(Problem p) {
    using Stages = Stage<kKContiguousA, kKContiguousB>[kStages];
    GG_SHARED(Stages, stages);  // (4 stages) × a slice of op(A) and one of op(B)
    const BlockStart b(p);
    const int64_t slices = (p.K + kSliceK - 1) / kSliceK;
    const auto copy = [&](int64_t s) {  // slice s into its stage, as one commit group
        if (s < slices) {
            copy_slice(stages[s % kStages].a, b.A, p.lda, b.m0, p.M, s * kSliceK, p.K);
            copy_slice(stages[s % kStages].b, b.B, p.ldb, b.n0, p.N, s * kSliceK, p.K);
        }
        cp_async_commit();  // empty groups too: "at most kStages - 2 in flight" means slice s landed
    };
    Accumulators acc = {};
    for (int s = 0; s < kStages - 1; ++s) copy(s);
    for (int64_t s = 0; s < slices; ++s) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // slice s has landed for every thread; every warp is done with slice s - 1
        copy(s + kStages - 1);  // into slice s - 1's stage
        multiply_slice(acc, stages[s % kStages].a, stages[s % kStages].b, b.warp_m, b.warp_n);
    }
    store_warp_tile(acc, b.C, p.ldc, p.M, p.N, b.m0 + b.warp_m, b.n0 + b.warp_n, p.alpha, p.beta);
}

template <bool kKContiguousA>
auto pipelined_kernel(bool trans_b) {
    return trans_b ? gemm_bf16_pipelined<kKContiguousA, true> : gemm_bf16_pipelined<kKContiguousA, false>;
}

}  // namespace

bool gemm_bf16_pipelines(int64_t batch, const bfloat16* A, int64_t lda, int64_t stride_a, const bfloat16* B,
                         int64_t ldb, int64_t stride_b) {
    const auto aligned = [](const bfloat16* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const auto whole_chunks = [&](int64_t ld, int64_t stride) {
        return ld % kChunk == 0 && (batch == 1 || stride % kChunk == 0);
    };
    return aligned(A) && aligned(B) && whole_chunks(lda, stride_a) && whole_chunks(ldb, stride_b);
}

void gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const bfloat16* A, int64_t lda, int64_t stride_a, const bfloat16* B, int64_t ldb, int64_t stride_b,
               float beta, bfloat16* C, int64_t ldc, int64_t stride_c) {
    if (batch == 0 || M == 0 || N == 0) return;
    // BLAS reads neither A nor B when alpha is 0 (they may hold NaN): C only scales by beta.
    if (alpha == 0.0f) K = 0;
    const bool pipelined = gemm_bf16_pipelines(batch, A, lda, stride_a, B, ldb, stride_b);
    const int64_t tiles_n = (N + kTile - 1) / kTile, tiles_m = (M + kTile - 1) / kTile;
    for (int64_t b0 = 0; b0 < batch; b0 += kMaxGridYZ)
        for (int64_t t0 = 0; t0 < tiles_m; t0 += kMaxGridYZ) {
            const int64_t m0 = t0 * kTile;
            const dim3 grid(unsigned(tiles_n), unsigned(std::min(tiles_m - t0, kMaxGridYZ)),
                            unsigned(std::min(batch - b0, kMaxGridYZ)));
            // The launch's share: its batches, and its row tiles from m0 on.
            const Problem p{M - m0, N, K, alpha, beta, A + b0 * stride_a + (trans_a ? m0 : m0 * lda), lda, stride_a,
                            B + b0 * stride_b, ldb, stride_b, C + b0 * stride_c + m0 * ldc, ldc, stride_c};
            if (!pipelined)
                launch("gemm_bf16", gemm_bf16_mma, grid, dim3(kThreads), 0, p, trans_a, trans_b);
            else if (trans_a)
                launch("gemm_bf16_pipelined", pipelined_kernel<false>(trans_b), grid, dim3(kThreads), 0, p);
            else
                launch("gemm_bf16_pipelined", pipelined_kernel<true>(trans_b), grid, dim3(kThreads), 0, p);
        }
}

}  // namespace gg::cuda::GG_CUDA_BUILD

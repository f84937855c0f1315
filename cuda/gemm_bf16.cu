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
// How the work is cut (the ladder's rung 10, cuda/gemm_ladder/mma_tiles.h). A block of 256
// threads (8 warps) computes a 128×128 tile of C; the warps form a 2×4 grid of 64×32 warp
// tiles, each 4 × 4 mma tiles of 16×8, so a lane keeps 4·4·4 = 64 f32 accumulators. K is
// walked in slices of 32: the block copies the (128, 32) slices of op(A) and op(B) into shared
// memory (zeros past the matrix edges, so edge tiles need no other case), then each warp, per
// 16 of k, issues 4 + 2 ldmatrix.x4 and 16 mma: 6 loads of 512 bytes for 16 · 2048
// multiply-adds, where the 32×32 warp tile of a 64×64 block paid 4 for 8 · 2048. Grid
// (⌈N/128⌉, ⌈M/128⌉, batch); batches and row tiles beyond 65535 are further launches. The
// host picks one of two ways to fill the slices:
//
// - Pipelined, where every operand is 16-byte aligned: pointers, leading dimensions and batch
//   strides multiples of 8 elements, so that every run of 8 contiguous elements is one aligned
//   16-byte chunk. Each thread starts cp.async copies (cuda/async_copy.h) of its 2 + 2 chunks
//   of a slice straight into shared memory, 4 stages deep: while the warps multiply slice s,
//   slices s + 1 .. s + 3 are on their way, and a wait_group and one barrier a slice are all
//   the synchronisation; the 4 stages are 64 KiB, dynamic shared memory. A slice keeps the
//   operand's contiguous direction — (128, 32), k contiguous, when global memory has k
//   contiguous, else (32, 128) — and ldmatrix reads the second kind with .trans; chunks are XOR-swizzled (cuda/swizzle.h) so that neither
//   ldmatrix nor the copies meet bank conflicts. Chunks past an edge are zero-filled by the
//   copy itself (its src_bytes), partly past it in part.
// - General, for the rest: the block loads each slice element by element, k along the
//   contiguous index of global memory when the operand has one (so the warp's reads are
//   coalesced either way), stores it k contiguous with rows padded by one chunk (80 bytes,
//   which puts the 8 rows of one ldmatrix in different bank groups), and meets at two
//   barriers a slice.
//
// Split-K. A product with few tiles and a long K (the 384×384 weight gradient over 8192
// tokens is 9 tiles, on a 132-SM GPU) cuts K into `splits` ranges of k_split (a multiple of
// the slice; at least kMinSplitK each) until there are about kFillBlocks blocks: grid z is then
// the range (only for batch 1), each block writes its raw f32 sums to a workspace (splits, M,
// ldw), and gemm_bf16_split_sum adds the ranges in order, applies alpha and beta and rounds:
// a fixed order, no atomics, the same bits on every run.
//
// The epilogue. A lane holds pairs of neighbouring columns (c0, c1 of each mma tile); the four
// lanes of a quad swap them with shuffles (a 4 × 4 transpose of pairs) so that each lane has 8
// neighbouring columns of one row, which it writes as one 16-byte store (and reads C with one
// load when beta is not 0) where C's rows are whole 16-byte chunks, element by element at the
// right edge and otherwise.
//
// Why it should be fast. One mma is 2048 multiply-adds for the warp, and the tensor cores run
// many times the FP32 cores' rate; every operand value brought into shared memory is used 128
// times, and on the pipelined path its global load hides behind three slices of mma. Neither
// path is measured on a GPU yet.
#include <algorithm>
#include <cstdint>

#include "cuda/async_copy.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/mma.h"
#include "cuda/packs.h"
#include "cuda/swizzle.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr int kTile = 128;    // block tile: 128 × 128 of C
constexpr int kSliceK = 32;   // K slice in shared memory
constexpr int kWarpTileM = 64, kWarpTileN = 32;  // 2 × 4 warps of 64 × 32
constexpr int kWarpsAcross = kTile / kWarpTileN;  // 4
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;
constexpr int kTilesM = kWarpTileM / kMmaM;  // 4 mma tiles down a warp tile
constexpr int kTilesN = kWarpTileN / kMmaN;  // 4 across
constexpr int kThreads = (kTile / kWarpTileM) * kWarpsAcross * 32;  // 256
constexpr int kChunk = 8;     // bf16 in 16 bytes: one row of an ldmatrix matrix, one cp.async
constexpr int kStages = 4;    // slices in shared memory on the pipelined path
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMinSplitK = 256;  // the shortest K range of a split: 8 slices through the 4 stages
static_assert(kTilesN == 4, "the epilogue's quad transpose: one mma tile of 8 columns per lane of a quad");

using Accumulators = float[kTilesM][kTilesN][4];  // mma tile (i, j)'s c0..c3

// One operand's K slice in shared memory, as the warps read it: op(A) (M, K) restricted to the
// block's 128 rows, or op(B) (K, N) seen as (N, K), i along M or N. row8(i, k) is the address of
// the 8 elements that start at (i, k) and run along the slice's contiguous direction: along k
// (kKContiguous) or along i.
//
// The general path's slice: (128, 32) with k contiguous, rows padded by one chunk.
struct alignas(16) PaddedSlice {
    static constexpr bool kKContiguous = true;
    bfloat16 at[kTile][kSliceK + kChunk];
    __device__ const void* row8(int i, int k) const { return &at[i][k]; }
};

// The pipelined path's slice, in swizzled 16-byte chunks: (128, 32) k contiguous, or (32, 128)
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

// The arguments both kernels take: A: op(A) (M, K), B: op(B) (K, N), C (M, N), each at its
// batch stride; grid (⌈N/128⌉, ⌈M/128⌉, batch or splits), block 256. With splits > 1 (batch 1),
// block z takes K range [z · k_split, (z + 1) · k_split) and writes its sums to workspace
// (splits, M, ldw) instead of C. vector_c: C's rows are whole 16-byte chunks (C aligned, ldc
// and the batch stride multiples of 8).
struct Problem {
    int64_t M, N, K;
    float alpha, beta;
    bool trans_a, trans_b;
    const bfloat16* A;
    int64_t lda, stride_a;
    const bfloat16* B;
    int64_t ldb, stride_b;
    bfloat16* C;
    int64_t ldc, stride_c;
    bool vector_c;
    int64_t splits, k_split;
    float* workspace;
    int64_t ldw;
};

// What every thread of a block starts from: its batch's matrices (from the start of its K
// range), the length of that range, and its warp's tile.
struct BlockStart {
    int64_t m0, n0;            // the block tile in C
    int warp_m, warp_n;        // the warp tile in the block tile
    int64_t split, K;          // the K range, and its length
    const bfloat16 *A, *B;
    bfloat16* C;
    __device__ explicit BlockStart(const Problem& p)
        : m0(int64_t(blockIdx.y) * kTile), n0(int64_t(blockIdx.x) * kTile),
          warp_m(int(threadIdx.x) / 32 / kWarpsAcross * kWarpTileM),
          warp_n(int(threadIdx.x) / 32 % kWarpsAcross * kWarpTileN), split(p.splits > 1 ? blockIdx.z : 0) {
        const int64_t batch = p.splits > 1 ? 0 : blockIdx.z, k0 = split * p.k_split;
        K = p.K - k0 < p.k_split ? p.K - k0 : p.k_split;
        A = p.A + batch * p.stride_a + k0 * (p.trans_a ? p.lda : 1);  // op(A)[m, k0]
        B = p.B + batch * p.stride_b + k0 * (p.trans_b ? 1 : p.ldb);  // op(B)[k0, n]
        C = p.C + batch * p.stride_c;
    }
};

// x[j] for a j known only at run time, without putting x in local memory.
__device__ __forceinline__ float pick(const float (&x)[kTilesN], int j) {
    float v = x[0];
    GG_UNROLL
    for (int t = 1; t < kTilesN; ++t) v = j == t ? x[t] : v;
    return v;
}

// f(row, col, v) for each run of 8 neighbouring columns of the warp tile: lane (g, q) gets
// columns 8q .. 8q + 7 (mma tile j = q) of rows 16i + g and 16i + g + 8. Before, lane (g, r)
// holds columns 8j + 2r, 8j + 2r + 1 of every tile j; in round d each lane reads from lane
// (g, (q + d) mod 4) the pair of tile q, which that lane offers as its tile (r − d) mod 4.
template <class F>
__device__ __forceinline__ void for_each_row8(const float (&acc)[kTilesM][kTilesN][4], F f) {
    const int lane = int(threadIdx.x) % 32, g = lane / 4, q = lane % 4;
    GG_UNROLL
    for (int i = 0; i < kTilesM; ++i)
        GG_UNROLL
        for (int half = 0; half < 2; ++half) {  // row g (c0, c1), then row g + 8 (c2, c3)
            float first[kTilesN], second[kTilesN], got[kTilesN][2];  // got[d]: from lane (g, (q + d) mod 4)
            GG_UNROLL
            for (int j = 0; j < kTilesN; ++j) first[j] = acc[i][j][2 * half], second[j] = acc[i][j][2 * half + 1];
            GG_UNROLL
            for (int d = 0; d < kTilesN; ++d) {
                const int offer = (q - d + kTilesN) % kTilesN, from = (lane & ~3) | ((q + d) % kTilesN);
                got[d][0] = __shfl_sync(0xffffffffu, pick(first, offer), from);
                got[d][1] = __shfl_sync(0xffffffffu, pick(second, offer), from);
            }
            // got[d] came from lane (g, (q + d) mod 4): rotated by q, got[r] is lane (g, r)'s,
            // columns 8q + 2r and 8q + 2r + 1; two conditional rotations keep it in registers.
            GG_UNROLL
            for (int step = 1; step < kTilesN; step *= 2) {
                float rotated[kTilesN][2];
                GG_UNROLL
                for (int r = 0; r < kTilesN; ++r)
                    GG_UNROLL
                    for (int e = 0; e < 2; ++e) rotated[r][e] = q & step ? got[(r - step + kTilesN) % kTilesN][e] : got[r][e];
                GG_UNROLL
                for (int r = 0; r < kTilesN; ++r) got[r][0] = rotated[r][0], got[r][1] = rotated[r][1];
            }
            const float v[8] = {got[0][0], got[0][1], got[1][0], got[1][1], got[2][0], got[2][1], got[3][0], got[3][1]};
            f(16 * i + g + 8 * half, kMmaN * q, v);
        }
}

// C[m, n .. n + 8) = alpha·v + beta·C, within (M, N): one 16-byte load and store where C's rows
// are whole chunks and the run lies inside N, else element by element. beta 0 does not read C
// (it may hold NaN), as BLAS promises.
__device__ __forceinline__ void store_row8(const Problem& p, bfloat16* C, int64_t m, int64_t n, const float (&v)[8]) {
    if (m >= p.M || n >= p.N) return;
    bfloat16* c = C + m * p.ldc + n;  // (8)
    if (p.vector_c && n + kChunk <= p.N) {
        Pack<bfloat16, kChunk> old, out;
        if (p.beta != 0.0f) old = load_pack<kChunk>(c);
        GG_UNROLL
        for (int e = 0; e < kChunk; ++e)
            out.at[e] = bfloat16(p.beta == 0.0f ? p.alpha * v[e] : p.alpha * v[e] + p.beta * float(old.at[e]));
        store_pack_global<kChunk>(c, out);
        return;
    }
    for (int e = 0; e < kChunk && n + e < p.N; ++e)
        c[e] = bfloat16(p.beta == 0.0f ? p.alpha * v[e] : p.alpha * v[e] + p.beta * float(c[e]));
}

// The block's warp tile into C (alpha·acc + beta·C), or, for a split of K, its raw sums into
// the split's workspace (M, ldw), two float4 a run (ldw is a multiple of 8).
__device__ __forceinline__ void store_warp_tile(const Problem& p, const BlockStart& b, const Accumulators& acc) {
    const int64_t m0 = b.m0 + b.warp_m, n0 = b.n0 + b.warp_n;
    for_each_row8(acc, [&](int row, int col, const float (&v)[8]) {
        const int64_t m = m0 + row, n = n0 + col;
        if (p.splits == 1) return store_row8(p, b.C, m, n, v);
        if (m >= p.M || n >= p.N) return;
        float* w = p.workspace + (b.split * p.M + m) * p.ldw + n;  // (8)
        store_pack_global<4>(w, Pack<float, 4>{{v[0], v[1], v[2], v[3]}});
        store_pack_global<4>(w + 4, Pack<float, 4>{{v[4], v[5], v[6], v[7]}});
    });
}

// C (M, N) = alpha · Σ_z workspace[z] + beta · C, z = 0, 1, … in order: the second pass of a
// split-K product, one thread per run of 8 columns (grid-strided).
__global__ void gemm_bf16_split_sum(Problem p) {
    const int64_t runs = (p.N + kChunk - 1) / kChunk;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.M * runs;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t m = i / runs, n = kChunk * (i % runs);
        float v[8] = {};
        for (int64_t z = 0; z < p.splits; ++z) {
            const float* w = p.workspace + (z * p.M + m) * p.ldw + n;  // (8)
            const Pack<float, 4> lo = load_pack<4>(w), hi = load_pack<4>(w + 4);
            GG_UNROLL
            for (int e = 0; e < 4; ++e) v[e] += lo.at[e], v[4 + e] += hi.at[e];
        }
        store_row8(p, p.C, m, n, v);
    }
}

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

__global__ void __launch_bounds__(kThreads) gemm_bf16_mma(Problem p) {
    GG_SHARED(PaddedSlice, As);  // (128, 32): op(A)[m0 + m, k0 + k] at As.at[m][k]
    GG_SHARED(PaddedSlice, Bs);  // (128, 32): op(B)[k0 + k, n0 + n] at Bs.at[n][k]
    const BlockStart b(p);
    Accumulators acc = {};
    for (int64_t k0 = 0; k0 < b.K; k0 += kSliceK) {
        load_slice(As, b.A, p.lda, !p.trans_a, b.m0, p.M, k0, b.K);
        load_slice(Bs, b.B, p.ldb, p.trans_b, b.n0, p.N, k0, b.K);
        __syncthreads();  // the slices are complete
        multiply_slice(acc, As, Bs, b.warp_m, b.warp_n);
        __syncthreads();  // every warp is done with the slices before they are overwritten
    }
    store_warp_tile(p, b, acc);
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
    using Slices = Stage<kKContiguousA, kKContiguousB>;
    GG_DYNAMIC_SHARED(Slices, stages);  // (4 stages) × a slice of op(A) and one of op(B): 64 KiB
    const BlockStart b(p);
    const int64_t slices = (b.K + kSliceK - 1) / kSliceK;
    const auto copy = [&](int64_t s) {  // slice s into its stage, as one commit group
        if (s < slices) {
            copy_slice(stages[s % kStages].a, b.A, p.lda, b.m0, p.M, s * kSliceK, b.K);
            copy_slice(stages[s % kStages].b, b.B, p.ldb, b.n0, p.N, s * kSliceK, b.K);
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
    store_warp_tile(p, b, acc);
}

static_assert(sizeof(Stage<true, false>) == sizeof(Stage<false, true>) && sizeof(Stage<true, true>) == 16384,
              "every pair of slice layouts is two 8 KiB slices");

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

namespace {

// How gemm_bf16 cuts K: `splits` ranges of k_split (1 range of K when it does not split).
struct SplitK {
    int64_t splits, k_split;
};
SplitK split_k(int64_t batch, int64_t M, int64_t N, int64_t K) {
    const int64_t blocks = batch * ((M + kTile - 1) / kTile) * ((N + kTile - 1) / kTile);
    if (batch != 1 || blocks >= kFillBlocks || K < 2 * kMinSplitK) return {1, std::max<int64_t>(K, 1)};
    const int64_t want = std::min((kFillBlocks + blocks - 1) / blocks, K / kMinSplitK);
    const int64_t k_split = ((K + want - 1) / want + kSliceK - 1) / kSliceK * kSliceK;
    return {(K + k_split - 1) / k_split, k_split};
}

}  // namespace

int64_t gemm_bf16_splits(int64_t batch, int64_t M, int64_t N, int64_t K) { return split_k(batch, M, N, K).splits; }

void gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const bfloat16* A, int64_t lda, int64_t stride_a, const bfloat16* B, int64_t ldb, int64_t stride_b,
               float beta, bfloat16* C, int64_t ldc, int64_t stride_c) {
    if (batch == 0 || M == 0 || N == 0) return;
    // BLAS reads neither A nor B when alpha is 0 (they may hold NaN): C only scales by beta.
    if (alpha == 0.0f) K = 0;
    const bool pipelined = gemm_bf16_pipelines(batch, A, lda, stride_a, B, ldb, stride_b);
    const bool vector_c =
        reinterpret_cast<uintptr_t>(C) % 16 == 0 && ldc % kChunk == 0 && (batch == 1 || stride_c % kChunk == 0);
    const SplitK split = split_k(batch, M, N, K);
    const int64_t tiles_n = (N + kTile - 1) / kTile, tiles_m = (M + kTile - 1) / kTile;
    const size_t stage_bytes = kStages * sizeof(Stage<true, true>);  // every Stage is two 8 KiB slices
    const auto run = [&](const Problem& p, dim3 grid) {
        if (!pipelined)
            launch("gemm_bf16", gemm_bf16_mma, grid, dim3(kThreads), 0, p);
        else if (trans_a)
            launch("gemm_bf16_pipelined", pipelined_kernel<false>(trans_b), grid, dim3(kThreads), stage_bytes, p);
        else
            launch("gemm_bf16_pipelined", pipelined_kernel<true>(trans_b), grid, dim3(kThreads), stage_bytes, p);
    };
    if (split.splits > 1) {  // few tiles (so one launch), batch 1, a long K
        const int64_t ldw = (N + kChunk - 1) / kChunk * kChunk;
        const size_t bytes = size_t(split.splits * M * ldw) * sizeof(float);
        auto* workspace = static_cast<float*>(allocate(bytes));
        const Problem p{M, N, K, alpha, beta, trans_a, trans_b, A, lda, stride_a, B, ldb, stride_b, C, ldc, stride_c,
                        vector_c, split.splits, split.k_split, workspace, ldw};
        run(p, dim3(unsigned(tiles_n), unsigned(tiles_m), unsigned(split.splits)));
        launch("gemm_bf16_split_sum", gemm_bf16_split_sum, grid_covering(M * (ldw / kChunk), kThreads),
               dim3(kThreads), 0, p);
        deallocate(workspace, bytes);  // one stream: a later kernel that reuses it runs after these two
        return;
    }
    for (int64_t b0 = 0; b0 < batch; b0 += kMaxGridYZ)
        for (int64_t t0 = 0; t0 < tiles_m; t0 += kMaxGridYZ) {
            const int64_t m0 = t0 * kTile;
            const dim3 grid(unsigned(tiles_n), unsigned(std::min(tiles_m - t0, kMaxGridYZ)),
                            unsigned(std::min(batch - b0, kMaxGridYZ)));
            // The launch's share: its batches, and its row tiles from m0 on.
            run(Problem{M - m0, N, K, alpha, beta, trans_a, trans_b, A + b0 * stride_a + (trans_a ? m0 : m0 * lda),
                        lda, stride_a, B + b0 * stride_b, ldb, stride_b, C + b0 * stride_c + m0 * ldc, ldc, stride_c,
                        vector_c, 1, split.k_split, nullptr, 0},
                grid);
        }
}

}  // namespace gg::cuda::GG_CUDA_BUILD

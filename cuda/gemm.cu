// gemm.cu — the table's GEMM entry (cuda/kernels.h), with the CPU's meaning (tensor/backend.h):
//
//   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b]      for b < batch, f32 or f64
//
// (bf16 goes to the tensor-core kernel of cuda/gemm_bf16.cu, after the same checks.)
//
//   op(A[b])  (M, K)  element (m, k) at A + b·stride_a + (trans_a ? k·lda + m : m·lda + k)
//   op(B[b])  (K, N)  element (k, n) at B + b·stride_b + (trans_b ? n·ldb + k : k·ldb + n)
//   C[b]      (M, N)  element (m, n) at C + b·stride_c + m·ldc + n
//
// A batch stride of 0 broadcasts that operand over the batch.
//
// The kernel, gemm_warp_tiled: the teaching ladder's rung 7 (cuda/gemm_ladder/7_warp_tiling.cu)
// made general. W is one 16-byte pack: 4 floats or 2 doubles.
//  - Block (x, y, z) computes the Tile × Tile tile of C[z] at rows Tile·y, columns Tile·x;
//    batches beyond grid.z's 65535 (and row tiles beyond grid.y's) are further launches.
//  - The block tile is cut into warp tiles and each warp tile into its 32 lanes, an 8 × 4 grid
//    of lanes, each owning IterM × IterN sub-tiles of W × W results, 8W rows and 4W columns
//    apart:
//        row    = (warp's first row)    + 8W·i + W·(lane / 4) + r      i < IterM, r < W
//        column = (warp's first column) + 4W·j + W·(lane % 4) + c      j < IterN, c < W
//    Three tilings: f32 128 × 128 (8 warps of 64 × 32, 8 × 8 results per lane), f32 64 × 64
//    and f64 64 × 64 (4 warps of 32 × 32, 4 × 8 per lane: 32 doubles are 64 registers).
//  - K is walked in slices of 8. Shared memory holds each operand's slice k-major, As[k][m]
//    and Bs[k][n], so at each k a lane reads its sub-tiles' column of op(A) and row of op(B)
//    as IterM + IterN packs, and the lanes of a warp read neighbouring packs: no bank conflicts,
//    one 16-byte load per W values.
//  - Global memory is always read along the operand's contiguous index (k for A and for Bᵀ,
//    m for Aᵀ, n for B), so every warp's read is coalesced whatever the transposes; they are
//    template parameters, which only decide whether a thread's pack goes into shared memory
//    as a row (contiguous along m or n) or down a column (contiguous along k).
//  - The pipeline: while a warp multiplies slice s out of one shared buffer, the loads of slice
//    s + 1 are already in flight into registers; they go into the other buffer after the
//    multiply, and one barrier per slice separates the two.
//  - Loads come in two builds, picked on the host (gemm_plan): where A and B start on 16 bytes
//    and their leading dimensions and batch strides are multiples of W, every pack of an
//    interior slice (inside the matrix in every direction) is one 16-byte load with no test;
//    edge slices, and every slice of operands that miss that alignment, load element by
//    element with a bounds test, zero past the edges, so edge tiles need no other case.
//  - Why it should be fast: each value brought into shared memory is used Tile times, and each
//    value a lane reads from shared memory 4 or 8 times (once per column or row of its
//    results), so the multiply-adds rather than the memory traffic set the pace; the 128 × 128
//    tile does 16 multiply-adds per shared-memory load instruction (the ladder's rung 5, whose
//    threads own results 16 apart, does 4). The loads of the next slice hide behind the
//    multiply of this one. C is written element by element, with its bounds test, once
//    per tile rather than once per slice.
//
// Split-K, for products with few tiles of C and a long K. A weight's gradient, Xᵀ·dY, is
// such a product: (384, 8192)·(8192, 384) has 9 tiles of 128 × 128, so 9 blocks would each
// walk all 8192 of K while most of a 132-SM GPU idles. Then K is cut into `splits` ranges;
// block (x, y, z) takes tile (x, y) of batch z / splits over range z mod splits and writes its
// sum, without alpha and beta, to its own (M, N) slab of a workspace. A second kernel,
// gemm_sum_splits, adds each element's slabs in order 0, 1, … and applies alpha and beta: no
// atomics, so the result is the same on every run.
//
// f32 accumulates in float and f64 in double, as OpenBLAS's sgemm and dgemm do. On a GPU,
// gemm can also run cuBLAS (gemm_cublas, switched by GATEDGRAD_GEMM; cuda/gemm.h).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/packs.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr int kSliceK = 8;  // the K slice held in shared memory at a time
constexpr int kWarpSize = 32;
constexpr int kLaneRows = 8, kLaneCols = 4;  // the lanes of a warp over its warp tile
constexpr int64_t kMaxGridYZ = 65535;
// Split-K: when a product's blocks would fill at most half of kFillBlocks (cuda/launch.h), K is
// split until it has about kFillBlocks, each range keeping at least kMinSplitK of K. Only then:
// splitting at least doubles the busy SMs, which pays for the workspace's extra pass over C.
constexpr int64_t kMinSplitK = 256;
// f32 products with at least this many 128×128 tiles (one wave), or with a K long enough to
// split, take the large tile.
constexpr int64_t kLargeTileBlocks = 132;
constexpr unsigned kSumThreads = 256;  // gemm_sum_splits' block

// How a block's tile of C is cut (see the opening comment): Tile × Tile per block, warps of
// kWarpM × kWarpN, lanes of IterM × IterN sub-tiles of kSub × kSub, kSub one 16-byte pack.
// MinBlocks: the blocks an SM must be able to hold at once, which caps the registers per thread
// (65536 per SM): 128 for the large tile, enough for its 64 sums and the next slice's loads
// with no spill (nvcc picks 129 uncapped, and then an SM holds one block of 8 warps).
template <class T, int Tile, int IterM, int IterN, int MinBlocks>
struct Tiling {
    using Element = T;
    static constexpr int kTile = Tile, kIterM = IterM, kIterN = IterN, kMinBlocks = MinBlocks;
    static constexpr int kSub = kPackWidth<T>;
    static constexpr int kStrideM = kLaneRows * kSub, kStrideN = kLaneCols * kSub;  // between a lane's sub-tiles
    static constexpr int kWarpM = kStrideM * IterM, kWarpN = kStrideN * IterN;
    static constexpr int kWarpsAcross = Tile / kWarpN;
    static constexpr int kThreads = Tile / kWarpM * kWarpsAcross * kWarpSize;
    static_assert(Tile % kWarpM == 0 && Tile % kWarpN == 0, "whole warp tiles");
};
using LargeTiling = Tiling<float, 128, 2, 2, 2>;   // 256 threads, 64 sums each, ≤ 128 registers
using SmallTiling = Tiling<float, 64, 1, 2, 4>;    // 128 threads, 32 sums each, ≤ 128 registers
using DoubleTiling = Tiling<double, 64, 2, 4, 3>;  // 128 threads, 32 sums each (64 registers), ≤ 168

// One operand's two K slices in shared memory (one being multiplied, one being filled),
// k-major: at[s][k][i] with i along M (for A) or N (for B). Rows are one pack longer than the
// tile: when a warp writes packs down columns (k the operand's contiguous index), the f32
// rows 132 words apart put its writes in 32 different banks, where rows of 128 would put two
// in each; rows stay a whole number of packs, so every pack in them is 16-byte aligned.
template <class T, int Tile>
struct alignas(16) Slices {
    T at[2][kSliceK][Tile + kPackWidth<T>];
};

// One operand's share of the block's K slices, for one thread: fetch() brings the thread's
// packs of the current slice from global memory into registers, store() writes them into a
// shared slice, next() moves on by kSliceK.
//
// The slice as stored is (Tile, kSliceK) with k contiguous when KContiguous (A, or B
// transposed: element (i, k) at X[i·ld + k]), else (kSliceK, Tile) with i contiguous
// (element (i, k) at X[k·ld + i]). Either way a thread's packs run along the stored rows, and
// consecutive threads take consecutive packs, so each warp reads whole runs of memory.
template <class T, int Tile, int Threads, bool KContiguous, bool Vector>
class SliceLoader {
    static constexpr int W = kPackWidth<T>;
    static constexpr int kRows = KContiguous ? Tile : kSliceK, kCols = KContiguous ? kSliceK : Tile;
    static constexpr int kPacks = kRows * kCols / W / Threads;  // this thread's packs per slice
    static_assert(kPacks >= 1 && kRows * kCols % (W * Threads) == 0, "every thread loads whole packs");

    const T* origin_;  // the slice's element (0, 0): (i0, k0) of the operand
    int64_t ld_;
    int64_t i_left_;   // the operand's rows (A) or columns (B) from i0 on
    int row_[kPacks], col_[kPacks];  // each pack's first element in the stored slice
    Pack<T, W> staged_[kPacks];

  public:
    // X: the batch's operand; the slice begins at (i0, k0) of its I rows (A) or columns (B).
    __device__ SliceLoader(const T* X, int64_t ld, int64_t i0, int64_t I, int64_t k0)
        : origin_(X + (KContiguous ? i0 * ld + k0 : k0 * ld + i0)), ld_(ld), i_left_(I - i0) {
        GG_UNROLL
        for (int p = 0; p < kPacks; ++p) {
            const int pack = int(threadIdx.x) + Threads * p;
            row_[p] = pack / (kCols / W);
            col_[p] = W * (pack % (kCols / W));
        }
    }

    // k_left: how much of the block's K range is left from this slice on.
    __device__ void fetch(int64_t k_left) {
        const int64_t row_limit = KContiguous ? i_left_ : k_left, col_limit = KContiguous ? k_left : i_left_;
        if (Vector && i_left_ >= Tile && k_left >= kSliceK) {  // an interior slice: no test
            GG_UNROLL
            for (int p = 0; p < kPacks; ++p) staged_[p] = load_pack<W>(origin_ + row_[p] * ld_ + col_[p]);
            return;
        }
        GG_UNROLL
        for (int p = 0; p < kPacks; ++p)
            GG_UNROLL
            for (int w = 0; w < W; ++w)
                staged_[p].at[w] =
                    row_[p] < row_limit && col_[p] + w < col_limit ? origin_[row_[p] * ld_ + col_[p] + w] : T(0);
    }

    // slice (kSliceK, Tile + W), k-major.
    __device__ void store(T (&slice)[kSliceK][Tile + W]) const {
        GG_UNROLL
        for (int p = 0; p < kPacks; ++p) {
            if constexpr (KContiguous) {
                GG_UNROLL
                for (int w = 0; w < W; ++w) slice[col_[p] + w][row_[p]] = staged_[p].at[w];
            } else {
                store_pack<W>(&slice[row_[p]][col_[p]], staged_[p]);
            }
        }
    }

    __device__ void next() { origin_ += KContiguous ? kSliceK : kSliceK * ld_; }
};

// A: op(A) (M, K), B: op(B) (K, N), each at its batch stride from the pointer; grid
// (⌈N/Tile⌉, ⌈M/Tile⌉, batch · splits), block Tiling::kThreads. Block z sums k in
// [s·k_split, (s+1)·k_split) for s = z mod splits, of batch z / splits, into C + z·stride_c:
// C itself when splits is 1, else the workspace (then alpha 1 and beta 0).
template <class Tiling, bool TransA, bool TransB, bool Vector, class T = typename Tiling::Element>
__global__ void __launch_bounds__(Tiling::kThreads, Tiling::kMinBlocks)
    gemm_warp_tiled(int64_t M, int64_t N, int64_t K, int64_t splits, int64_t k_split, T alpha, const T* A,
                    int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C,
                    int64_t ldc, int64_t stride_c) {
    constexpr int kTile = Tiling::kTile, kSub = Tiling::kSub, kIterM = Tiling::kIterM, kIterN = Tiling::kIterN;
    constexpr int kThreads = Tiling::kThreads;
    using OperandSlices = Slices<T, kTile>;
    GG_SHARED(OperandSlices, As);  // (2, 8, Tile): op(A)[m0 + m, k0 + k] at As.at[s][k][m]
    GG_SHARED(OperandSlices, Bs);  // (2, 8, Tile): op(B)[k0 + k, n0 + n] at Bs.at[s][k][n]
    const int64_t batch = blockIdx.z / splits, m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
    const int64_t k_begin = (blockIdx.z % splits) * k_split, k_end = k_begin + k_split < K ? k_begin + k_split : K;
    SliceLoader<T, kTile, kThreads, !TransA, Vector> a_slices(A + batch * stride_a, lda, m0, M, k_begin);
    SliceLoader<T, kTile, kThreads, TransB, Vector> b_slices(B + batch * stride_b, ldb, n0, N, k_begin);
    C += int64_t(blockIdx.z) * stride_c;
    // This lane's first row and column in the block tile; its sub-tiles follow kStrideM rows
    // and kStrideN columns further on.
    const int warp = int(threadIdx.x) / kWarpSize, lane = int(threadIdx.x) % kWarpSize;
    const int row0 = Tiling::kWarpM * (warp / Tiling::kWarpsAcross) + kSub * (lane / kLaneCols);
    const int col0 = Tiling::kWarpN * (warp % Tiling::kWarpsAcross) + kSub * (lane % kLaneCols);

    // C[m0 + row0 + kStrideM·i + r, n0 + col0 + kStrideN·j + c] before alpha and beta
    T acc[kIterM][kIterN][kSub][kSub] = {};
    const int64_t slices = (k_end - k_begin + kSliceK - 1) / kSliceK;
    if (slices > 0) {
        a_slices.fetch(k_end - k_begin), b_slices.fetch(k_end - k_begin);
        a_slices.store(As.at[0]), b_slices.store(Bs.at[0]);
        __syncthreads();  // slice 0 is complete
    }
    for (int64_t s = 0; s < slices; ++s) {
        const int now = int(s % 2);
        const bool more = s + 1 < slices;
        if (more) {  // slice s + 1's loads, in flight while slice s is multiplied
            const int64_t k_left = k_end - k_begin - (s + 1) * kSliceK;
            a_slices.next(), b_slices.next();
            a_slices.fetch(k_left), b_slices.fetch(k_left);
        }
        GG_UNROLL
        for (int k = 0; k < kSliceK; ++k) {
            Pack<T, kSub> a[kIterM], b[kIterN];  // the sub-tiles' column of op(A) and row of op(B) at k
            GG_UNROLL
            for (int i = 0; i < kIterM; ++i) a[i] = load_pack<kSub>(&As.at[now][k][row0 + Tiling::kStrideM * i]);
            GG_UNROLL
            for (int j = 0; j < kIterN; ++j) b[j] = load_pack<kSub>(&Bs.at[now][k][col0 + Tiling::kStrideN * j]);
            GG_UNROLL
            for (int i = 0; i < kIterM; ++i)
                GG_UNROLL
                for (int j = 0; j < kIterN; ++j)
                    GG_UNROLL
                    for (int r = 0; r < kSub; ++r)
                        GG_UNROLL
                        for (int c = 0; c < kSub; ++c) acc[i][j][r][c] += a[i].at[r] * b[j].at[c];
        }
        if (more) {
            // The other buffer was last read in slice s − 1, before the barrier that ended it.
            a_slices.store(As.at[1 - now]), b_slices.store(Bs.at[1 - now]);
            __syncthreads();  // slice s + 1 is complete, and everyone is done with slice s
        }
    }

    GG_UNROLL
    for (int i = 0; i < kIterM; ++i)
        GG_UNROLL
        for (int r = 0; r < kSub; ++r) {
            const int64_t m = m0 + row0 + Tiling::kStrideM * i + r;
            if (m >= M) continue;
            GG_UNROLL
            for (int j = 0; j < kIterN; ++j)
                GG_UNROLL
                for (int c = 0; c < kSub; ++c) {
                    const int64_t n = n0 + col0 + Tiling::kStrideN * j + c;
                    if (n < N) gemm_epilogue(&C[m * ldc + n], alpha, acc[i][j][r][c], beta);
                }
        }
}

// C[b] = alpha · Σ_s W[b·splits + s] + beta · C[b], the slabs W (M, N) added in order s = 0, 1, …;
// one thread per element of the batch's (M, N), grid-stride.
template <class T>
__global__ void gemm_sum_splits(int64_t batch, int64_t M, int64_t N, int64_t splits, const T* W, T alpha, T beta, T* C,
                                int64_t ldc, int64_t stride_c) {
    const int64_t count = batch * M * N;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += int64_t(gridDim.x) * blockDim.x) {
        const int64_t b = e / (M * N), m = e / N % M, n = e % N;
        const T* w = W + b * splits * M * N + m * N + n;
        T sum = w[0];
        for (int64_t s = 1; s < splits; ++s) sum += w[s * M * N];
        gemm_epilogue(&C[b * stride_c + m * ldc + n], alpha, sum, beta);
    }
}

// The checks BLAS makes (it reports them through xerbla; we throw): a dtype with a kernel,
// no negative sizes, and leading dimensions that hold a whole stored row.
void check_gemm_arguments(const char* op, DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M,
                          int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
    if (dtype != DType::f32 && dtype != DType::f64 && dtype != DType::bf16)
        throw std::invalid_argument(std::string(op) + ": no kernel for " + dtype_name(dtype));
    const auto dims = [&] {
        return " (batch " + std::to_string(batch) + ", M " + std::to_string(M) + ", N " + std::to_string(N) + ", K " +
               std::to_string(K) + ", trans_a " + std::to_string(trans_a) + ", trans_b " + std::to_string(trans_b) +
               ")";
    };
    if (batch < 0 || M < 0 || N < 0 || K < 0) throw std::invalid_argument(std::string(op) + ": negative size" + dims());
    const auto check_ld = [&](const char* name, int64_t ld, int64_t row_length) {
        if (ld < std::max<int64_t>(row_length, 1))
            throw std::invalid_argument(std::string(op) + ": " + name + " " + std::to_string(ld) +
                                        " is shorter than a stored row of " + std::to_string(row_length) + dims());
    };
    check_ld("lda", lda, trans_a ? M : K);
    check_ld("ldb", ldb, trans_b ? K : N);
    check_ld("ldc", ldc, N);
}

// Runs body.template operator()<TransA, TransB, Vector>() for the run-time flags.
template <class Body>
void by_layout(bool trans_a, bool trans_b, bool vector_loads, Body&& body) {
    const auto pick = [](bool flag, auto&& then) {
        flag ? then(std::true_type{}) : then(std::false_type{});
    };
    pick(trans_a, [&](auto ta) {
        pick(trans_b, [&](auto tb) {
            pick(vector_loads, [&](auto v) {
                body.template operator()<decltype(ta)::value, decltype(tb)::value, decltype(v)::value>();
            });
        });
    });
}

template <class T>
void gemm_ours(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C, int64_t ldc,
               int64_t stride_c) {
    // BLAS reads neither A nor B when alpha is 0 (they may hold NaN): C only scales by beta.
    if (alpha == T(0)) K = 0;
    constexpr DType dtype = std::is_same_v<T, float> ? DType::f32 : DType::f64;
    const GemmPlan plan = gemm_plan(dtype, batch, M, N, K, A, lda, stride_a, B, ldb, stride_b);
    const auto run = [&]<class Tiling>() {
        constexpr int kTile = Tiling::kTile;
        const int64_t tiles_n = (N + kTile - 1) / kTile, tiles_m = (M + kTile - 1) / kTile;
        by_layout(trans_a, trans_b, plan.vector_loads, [&]<bool TransA, bool TransB, bool Vector>() {
            const auto kernel = gemm_warp_tiled<Tiling, TransA, TransB, Vector>;
            const dim3 block(Tiling::kThreads);
            if (plan.splits == 1) {
                // One launch per chunk of batches and row tiles that the grid's y and z can hold.
                for (int64_t b0 = 0; b0 < batch; b0 += kMaxGridYZ)
                    for (int64_t t0 = 0; t0 < tiles_m; t0 += kMaxGridYZ) {
                        const int64_t m0 = t0 * kTile;
                        const dim3 grid(unsigned(tiles_n), unsigned(std::min(tiles_m - t0, kMaxGridYZ)),
                                        unsigned(std::min(batch - b0, kMaxGridYZ)));
                        launch("gemm", kernel, grid, block, 0, M - m0, N, K, int64_t(1), K, alpha,
                               A + b0 * stride_a + (TransA ? m0 : m0 * lda), lda, stride_a, B + b0 * stride_b, ldb,
                               stride_b, beta, C + b0 * stride_c + m0 * ldc, ldc, stride_c);
                    }
                return;
            }
            // Split-K: gemm_plan splits only products of at most kFillBlocks / 2 tiles, into
            // fewer than kFillBlocks + tiles blocks, so one launch holds them.
            const size_t bytes = size_t(batch * plan.splits * M * N) * sizeof(T);
            T* W = static_cast<T*>(allocate(bytes));
            const dim3 grid(unsigned(tiles_n), unsigned(tiles_m), unsigned(batch * plan.splits));
            launch("gemm_split_k", kernel, grid, block, 0, M, N, K, plan.splits, plan.k_split, T(1), A, lda, stride_a,
                   B, ldb, stride_b, T(0), W, N, M * N);
            launch("gemm_sum_splits", gemm_sum_splits<T>, grid_covering(batch * M * N, kSumThreads), dim3(kSumThreads),
                   0, batch, M, N, plan.splits, static_cast<const T*>(W), alpha, beta, C, ldc, stride_c);
            deallocate(W, bytes);  // one stream: a later kernel that reuses W runs after these two
        });
    };
    if constexpr (std::is_same_v<T, double>)
        run.template operator()<DoubleTiling>();
    else if (plan.tile == LargeTiling::kTile)
        run.template operator()<LargeTiling>();
    else
        run.template operator()<SmallTiling>();
}

#ifdef __CUDACC__
GemmKernel kernel_from_environment() {
    const char* name = std::getenv("GATEDGRAD_GEMM");
    if (name == nullptr || std::string(name) == "ours") return GemmKernel::ours;
    if (std::string(name) == "cublas") return GemmKernel::cublas;
    throw std::invalid_argument(std::string("GATEDGRAD_GEMM=") + name + ": expected 'ours' or 'cublas'");
}
std::atomic<GemmKernel>& selected_kernel() {
    static std::atomic<GemmKernel> kernel{kernel_from_environment()};
    return kernel;
}

void check_cublas(cublasStatus_t status, const char* call) {
    if (status != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string("gemm_cublas: ") + call + ": " + cublasGetStatusString(status));
}
// cuBLAS takes sizes and leading dimensions as int.
int as_int(int64_t value, const char* name) {
    if (value > INT32_MAX) throw std::invalid_argument(std::string("gemm_cublas: ") + name + " " +
                                                       std::to_string(value) + " does not fit in an int");
    return int(value);
}
#endif

}  // namespace

GemmPlan gemm_plan(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                   int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b) {
    GemmPlan plan;
    const int64_t width = 16 / int64_t(dtype_size(dtype));  // elements per 16-byte pack
    plan.vector_loads = aligned16(A, B) && lda % width == 0 && ldb % width == 0 && stride_a % width == 0 &&
                        stride_b % width == 0;
    const auto blocks = [&](int64_t tile) { return (M + tile - 1) / tile * ((N + tile - 1) / tile) * batch; };
    const bool long_k = K >= 2 * kMinSplitK;
    plan.tile = dtype == DType::f32 && (blocks(128) >= kLargeTileBlocks || long_k) ? 128 : 64;
    const int64_t tiles = blocks(plan.tile);
    if (2 * tiles <= kFillBlocks && long_k) {
        const int64_t splits = std::min((kFillBlocks + tiles - 1) / tiles, K / kMinSplitK);
        // Each range is a whole number of K slices, so that interior ranges stay interior.
        plan.k_split = ((K + splits - 1) / splits + kSliceK - 1) / kSliceK * kSliceK;
        plan.splits = (K + plan.k_split - 1) / plan.k_split;
    } else {
        plan.splits = 1, plan.k_split = K;
    }
    return plan;
}

#ifdef __CUDACC__
GemmKernel gemm_kernel() { return selected_kernel().load(); }
void set_gemm_kernel(GemmKernel kernel) { selected_kernel().store(kernel); }

void gemm_cublas(DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                 double alpha, const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb,
                 int64_t stride_b, double beta, void* C, int64_t ldc, int64_t stride_c) {
    check_gemm_arguments("gemm_cublas", dtype, batch, trans_a, trans_b, M, N, K, lda, ldb, ldc);
    if (batch == 0 || M == 0 || N == 0) return;
    const cublasHandle_t handle = cublas_handle();
    check_cublas(cublasSetStream(handle, current_stream()), "cublasSetStream");
    // cuBLAS is column-major. Row-major C (M, N) is column-major Cᵀ (N, M) with the same
    // ldc, and Cᵀ = op(B)ᵀ · op(A)ᵀ, where row-major op(B) read column-major is op(B)ᵀ: so
    // cuBLAS computes our product with the operands swapped, each keeping its own flag.
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = as_int(N, "N"), n = as_int(M, "M"), k = as_int(K, "K"), count = as_int(batch, "batch");
    const int ld_a = as_int(lda, "lda"), ld_b = as_int(ldb, "ldb"), ld_c = as_int(ldc, "ldc");
    if (dtype == DType::bf16) {
        // bf16 operands and C, products summed in f32 (CUBLAS_COMPUTE_32F), alpha and beta f32.
        const float a = float(alpha), b = float(beta);
        check_cublas(cublasGemmStridedBatchedEx(handle, op_b, op_a, m, n, k, &a, B, CUDA_R_16BF, ld_b, stride_b, A,
                                                CUDA_R_16BF, ld_a, stride_a, &b, C, CUDA_R_16BF, ld_c, stride_c,
                                                count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmStridedBatchedEx");
    } else if (dtype == DType::f32) {
        const float a = float(alpha), b = float(beta);
        check_cublas(cublasSgemmStridedBatched(handle, op_b, op_a, m, n, k, &a, static_cast<const float*>(B), ld_b,
                                               stride_b, static_cast<const float*>(A), ld_a, stride_a, &b,
                                               static_cast<float*>(C), ld_c, stride_c, count),
                     "cublasSgemmStridedBatched");
    } else {
        check_cublas(cublasDgemmStridedBatched(handle, op_b, op_a, m, n, k, &alpha, static_cast<const double*>(B),
                                               ld_b, stride_b, static_cast<const double*>(A), ld_a, stride_a, &beta,
                                               static_cast<double*>(C), ld_c, stride_c, count),
                     "cublasDgemmStridedBatched");
    }
}
#endif

void gemm(DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
          const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b, double beta,
          void* C, int64_t ldc, int64_t stride_c) {
    check_gemm_arguments("gemm", dtype, batch, trans_a, trans_b, M, N, K, lda, ldb, ldc);
    if (batch == 0 || M == 0 || N == 0) return;
#ifdef __CUDACC__
    if (gemm_kernel() == GemmKernel::cublas)
        return gemm_cublas(dtype, batch, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C,
                           ldc, stride_c);
#endif
    if (dtype == DType::bf16)
        gemm_bf16(batch, trans_a, trans_b, M, N, K, float(alpha), static_cast<const bfloat16*>(A), lda, stride_a,
                  static_cast<const bfloat16*>(B), ldb, stride_b, float(beta), static_cast<bfloat16*>(C), ldc,
                  stride_c);
    else if (dtype == DType::f32)
        gemm_ours(batch, trans_a, trans_b, M, N, K, float(alpha), static_cast<const float*>(A), lda, stride_a,
                  static_cast<const float*>(B), ldb, stride_b, float(beta), static_cast<float*>(C), ldc, stride_c);
    else
        gemm_ours(batch, trans_a, trans_b, M, N, K, alpha, static_cast<const double*>(A), lda, stride_a,
                  static_cast<const double*>(B), ldb, stride_b, beta, static_cast<double*>(C), ldc, stride_c);
}

}  // namespace gg::cuda::GG_CUDA_BUILD

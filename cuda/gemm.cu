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
// The kernel, gemm_tiled<Tile>: shared-memory tiles with 2-D register blocking, 256 threads
// (16×16) per block, each owning a micro-tile of (Tile/16)×(Tile/16) results.
//  - Block (x, y, z) computes the Tile×Tile tile of C[z] at rows Tile·y, columns Tile·x;
//    batches beyond grid.z's 65535 (and row tiles beyond grid.y's) are further launches.
//  - K is walked in slices of 16. For each, the block's threads copy the (Tile, 16) slice of
//    op(A) and the (16, Tile) slice of op(B) into shared memory, zero past the matrix edges,
//    then each thread multiplies out of shared memory into its own micro-tile of C.
//  - Thread (tx, ty) owns rows ty + 16·i and columns tx + 16·j (i, j < Tile/16): the 16
//    threads of a half-warp read 16 consecutive words of the B slice (no shared-memory bank
//    conflicts) and write 16 consecutive elements of a row of C (coalesced).
//  - Why it should be fast: every value brought from global memory is used Tile times (once
//    per row or column of the block tile), and every value read from shared memory Tile/16
//    times (once per row or column of the micro-tile), so arithmetic rather than memory
//    traffic sets the pace. The teaching ladder (cuda/gemm_ladder/) goes further, rung by rung.
//  - Two tile sizes: 128 (8×8 results per thread) for f32 products with enough tiles to fill
//    the GPU, half the loads per multiply-add of 64; and 64 (4×4) for the rest, f64 among them
//    (64 double accumulators would not fit in registers).
//  - Transposes cost nothing extra: they only change which index of the slice is the
//    contiguous one when it is copied into shared memory, and the copy always walks memory in
//    order, so it stays coalesced.
//
// Split-K, for products with few tiles of C and a long K. A weight's gradient, Xᵀ·dY, is
// such a product: (384, 8192)·(8192, 384) has 36 tiles of C, so 36 blocks would each walk
// all 8192 of K while most of a 132-SM GPU idles. Then K is cut into `splits` ranges; block
// (x, y, z) takes tile (x, y) of batch z / splits over range z mod splits and writes its sum,
// without alpha and beta, to its own (M, N) slab of a workspace. A second kernel, gemm_sum_splits,
// adds each element's slabs in order 0, 1, … and applies alpha and beta: no atomics, so the
// result is the same on every run.
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

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr int kSliceK = 16;         // the K slice held in shared memory at a time
constexpr int kThreadsPerDim = 16;  // 16×16 threads per block
constexpr int kThreads = kThreadsPerDim * kThreadsPerDim;
// Row padding of the shared slices. When k is the operand's contiguous index, a warp copies
// 16 k × 2 rows i, writing slice[k][i]: in f32, with slice rows 66 (or 130) words apart, word
// 66k + i sits in bank (2k + i) mod 32, 32 different banks, where 64-word rows would put all
// 16 k in one bank.
constexpr int kPad = 2;
constexpr int64_t kMaxGridYZ = 65535;
// Split-K: when a product has fewer blocks than kFillBlocks (cuda/launch.h), K is split until
// it has about that many, each range keeping at least kMinSplitK of K.
constexpr int64_t kMinSplitK = 256;
// f32 products with at least this many 128×128 tiles (one wave) take the large tile.
constexpr int64_t kLargeTileBlocks = 132;

// One operand's K slice in shared memory, k-major: slice[k][i] with i along M (for A) or N
// (for B), so that the inner loop reads a row of it for each k.
template <class T, int Tile>
using Slice = T[kSliceK][Tile + kPad];

// Copies the (Tile, kSliceK) slice of an operand starting at (i0, k0) into slice[k][i],
// with zeros where it runs past I rows or K columns, so edge tiles need no other case.
// The operand's element (i, k) is at X[i·ld + k] when k_contiguous (A as stored, or B
// transposed) and at X[k·ld + i] otherwise; consecutive threads take consecutive addresses
// in either case, so every warp's read is coalesced.
template <class T, int Tile>
__device__ void load_slice(Slice<T, Tile>& slice, const T* X, int64_t ld, bool k_contiguous, int64_t i0, int64_t I,
                           int64_t k0, int64_t K) {
    const int thread = int(threadIdx.y) * kThreadsPerDim + int(threadIdx.x);
    for (int e = thread; e < kSliceK * Tile; e += kThreads) {
        const int i = k_contiguous ? e / kSliceK : e % Tile;
        const int k = k_contiguous ? e % kSliceK : e / Tile;
        const int64_t row = i0 + i, col = k0 + k;
        slice[k][i] = row < I && col < K ? X[k_contiguous ? row * ld + col : col * ld + row] : T(0);
    }
}

// A: op(A) (M, K), B: op(B) (K, N), each at its batch stride from the pointer; grid
// (⌈N/Tile⌉, ⌈M/Tile⌉, batch · splits), block (16, 16). Block z sums k in [s·k_split, (s+1)·k_split)
// for s = z mod splits, of batch z / splits, into C + z·stride_c: C itself when splits is 1,
// else the workspace (then alpha 1 and beta 0).
template <class T, int Tile>
__global__ void __launch_bounds__(kThreads)
    gemm_tiled(int64_t M, int64_t N, int64_t K, int64_t splits, int64_t k_split, T alpha, const T* A, int64_t lda,
               int64_t stride_a, bool trans_a, const T* B, int64_t ldb, int64_t stride_b, bool trans_b, T beta, T* C,
               int64_t ldc, int64_t stride_c) {
    constexpr int kMicro = Tile / kThreadsPerDim;  // each thread's micro-tile: kMicro × kMicro results
    using TileSlice = Slice<T, Tile>;
    GG_SHARED(TileSlice, As);  // (16, Tile): op(A)[m0 + m, k0 + k] at As[k][m]
    GG_SHARED(TileSlice, Bs);  // (16, Tile): op(B)[k0 + k, n0 + n] at Bs[k][n]
    const int64_t batch = blockIdx.z / splits, m0 = int64_t(blockIdx.y) * Tile, n0 = int64_t(blockIdx.x) * Tile;
    const int64_t k_begin = (blockIdx.z % splits) * k_split, k_end = k_begin + k_split < K ? k_begin + k_split : K;
    A += batch * stride_a;
    B += batch * stride_b;
    C += int64_t(blockIdx.z) * stride_c;
    const int tx = int(threadIdx.x), ty = int(threadIdx.y);

    T acc[kMicro][kMicro] = {};  // C[m0 + ty + 16i, n0 + tx + 16j] before alpha and beta
    for (int64_t k0 = k_begin; k0 < k_end; k0 += kSliceK) {
        load_slice<T, Tile>(As, A, lda, !trans_a, m0, M, k0, k_end);
        load_slice<T, Tile>(Bs, B, ldb, trans_b, n0, N, k0, k_end);
        __syncthreads();  // the slices are complete
        for (int k = 0; k < kSliceK; ++k) {
            T a[kMicro], b[kMicro];  // the micro-tile's column of op(A) and row of op(B) at k
            for (int i = 0; i < kMicro; ++i) a[i] = As[k][ty + kThreadsPerDim * i];
            for (int j = 0; j < kMicro; ++j) b[j] = Bs[k][tx + kThreadsPerDim * j];
            for (int i = 0; i < kMicro; ++i)
                for (int j = 0; j < kMicro; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // everyone is done with the slices before they are overwritten
    }

    for (int i = 0; i < kMicro; ++i)
        for (int j = 0; j < kMicro; ++j) {
            const int64_t m = m0 + ty + kThreadsPerDim * i, n = n0 + tx + kThreadsPerDim * j;
            if (m < M && n < N) gemm_epilogue(&C[m * ldc + n], alpha, acc[i][j], beta);
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

template <class T>
void gemm_ours(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C, int64_t ldc,
               int64_t stride_c) {
    // BLAS reads neither A nor B when alpha is 0 (they may hold NaN): C only scales by beta.
    if (alpha == T(0)) K = 0;
    const dim3 block(kThreadsPerDim, kThreadsPerDim);
    // One launch per chunk of batches and row tiles that the grid's y and z can hold.
    const auto tiled = [&]<int Tile>() {
        const int64_t tiles_n = (N + Tile - 1) / Tile, tiles_m = (M + Tile - 1) / Tile;
        for (int64_t b0 = 0; b0 < batch; b0 += kMaxGridYZ)
            for (int64_t t0 = 0; t0 < tiles_m; t0 += kMaxGridYZ) {
                const int64_t m0 = t0 * Tile;
                const dim3 grid(unsigned(tiles_n), unsigned(std::min(tiles_m - t0, kMaxGridYZ)),
                                unsigned(std::min(batch - b0, kMaxGridYZ)));
                launch("gemm", gemm_tiled<T, Tile>, grid, block, 0, M - m0, N, K, int64_t(1), K, alpha,
                       A + b0 * stride_a + (trans_a ? m0 : m0 * lda), lda, stride_a, trans_a, B + b0 * stride_b, ldb,
                       stride_b, trans_b, beta, C + b0 * stride_c + m0 * ldc, ldc, stride_c);
            }
    };
    if constexpr (std::is_same_v<T, float>)
        if ((N + 127) / 128 * ((M + 127) / 128) * batch >= kLargeTileBlocks) return tiled.template operator()<128>();
    constexpr int kTile = 64;
    const int64_t tiles_n = (N + kTile - 1) / kTile, tiles_m = (M + kTile - 1) / kTile;
    const int64_t blocks = tiles_n * tiles_m * batch;
    int64_t splits = 1;
    if (blocks < kFillBlocks && K >= 2 * kMinSplitK)
        splits = std::min((kFillBlocks + blocks - 1) / blocks, K / kMinSplitK);
    if (splits == 1) return tiled.template operator()<kTile>();
    // Split-K: fewer than kFillBlocks blocks, so tiles_m · tiles_n · batch · splits < 2 · kFillBlocks
    // fits one launch. Each range is a whole number of K slices.
    const int64_t k_split = ((K + splits - 1) / splits + kSliceK - 1) / kSliceK * kSliceK;
    splits = (K + k_split - 1) / k_split;
    const size_t bytes = size_t(batch * splits * M * N) * sizeof(T);
    T* W = static_cast<T*>(allocate(bytes));
    const dim3 grid(unsigned(tiles_n), unsigned(tiles_m), unsigned(batch * splits));
    launch("gemm_split_k", gemm_tiled<T, kTile>, grid, block, 0, M, N, K, splits, k_split, T(1), A, lda, stride_a, trans_a, B,
           ldb, stride_b, trans_b, T(0), W, N, M * N);
    launch("gemm_sum_splits", gemm_sum_splits<T>, grid_covering(batch * M * N, kThreads), dim3(kThreads), 0, batch, M,
           N, splits, static_cast<const T*>(W), alpha, beta, C, ldc, stride_c);
    deallocate(W, bytes);  // one stream: a later kernel that reuses W runs after these two
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

// gemm.cu — the table's GEMM entry (cuda/kernels.h), with the CPU's meaning (tensor/backend.h):
//
//   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b]      for b < batch, f32 or f64
//
//   op(A[b])  (M, K)  element (m, k) at A + b·stride_a + (trans_a ? k·lda + m : m·lda + k)
//   op(B[b])  (K, N)  element (k, n) at B + b·stride_b + (trans_b ? n·ldb + k : k·ldb + n)
//   C[b]      (M, N)  element (m, n) at C + b·stride_c + m·ldc + n
//
// A batch stride of 0 broadcasts that operand over the batch.
//
// The kernel, gemm_tiled: shared-memory tiles with 2-D register blocking.
//  - Block (x, y, z) computes the 64×64 tile of C[z] at rows 64·y, columns 64·x; batches
//    beyond grid.z's 65535 (and row tiles beyond grid.y's) are further launches.
//  - K is walked in slices of 16. For each, the block's 256 threads copy the (64, 16) slice of
//    op(A) and the (16, 64) slice of op(B) into shared memory, zero past the matrix edges,
//    then each thread multiplies out of shared memory into its own 4×4 micro-tile of C.
//  - Thread (tx, ty) of the 16×16 block owns rows ty + 16·i and columns tx + 16·j (i, j < 4):
//    the 16 threads of a half-warp read 16 consecutive words of the B slice (no shared-memory
//    bank conflicts) and write 16 consecutive elements of a row of C (coalesced).
//  - Why it should be fast: every value brought from global memory is used 64 times (once per
//    row or column of the block tile), and every value read from shared memory 4 times (once
//    per row or column of the micro-tile), so arithmetic rather than memory traffic sets the
//    pace. The teaching ladder (cuda/gemm_ladder/) goes further, rung by rung.
//  - Transposes cost nothing extra: they only change which index of the slice is the
//    contiguous one when it is copied into shared memory, and the copy always walks memory in
//    order, so it stays coalesced.
//
// f32 accumulates in float and f64 in double, as OpenBLAS's sgemm and dgemm do. On a GPU,
// gemm can also run cuBLAS (gemm_cublas, switched by GATEDGRAD_GEMM; cuda/gemm.h).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "cuda/gemm.h"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr int kTile = 64;                       // block tile: 64 rows × 64 columns of C
constexpr int kSliceK = 16;                     // the K slice held in shared memory at a time
constexpr int kMicro = 4;                       // each thread's micro-tile: 4×4 results
constexpr int kThreadsPerDim = kTile / kMicro;  // 16×16 threads
constexpr int kThreads = kThreadsPerDim * kThreadsPerDim;
// Row padding of the shared slices. When k is the operand's contiguous index, a warp copies
// 16 k × 2 rows i, writing slice[k][i]: in f32, with slice rows 66 words apart, word 66k + i
// sits in bank (2k + i) mod 32, 32 different banks, where 64-word rows would put all 16 k in
// one bank.
constexpr int kPad = 2;
constexpr int64_t kMaxGridYZ = 65535;

// One operand's K slice in shared memory, k-major: slice[k][i] with i along M (for A) or N
// (for B), so that the inner loop reads a row of it for each k.
template <class T>
using Slice = T[kSliceK][kTile + kPad];

// Copies the (kTile, kSliceK) slice of an operand starting at (i0, k0) into slice[k][i],
// with zeros where it runs past I rows or K columns, so edge tiles need no other case.
// The operand's element (i, k) is at X[i·ld + k] when k_contiguous (A as stored, or B
// transposed) and at X[k·ld + i] otherwise; consecutive threads take consecutive addresses
// in either case, so every warp's read is coalesced.
template <class T>
__device__ void load_slice(Slice<T>& slice, const T* X, int64_t ld, bool k_contiguous, int64_t i0, int64_t I,
                           int64_t k0, int64_t K) {
    const int thread = int(threadIdx.y) * kThreadsPerDim + int(threadIdx.x);
    for (int e = thread; e < kSliceK * kTile; e += kThreads) {
        const int i = k_contiguous ? e / kSliceK : e % kTile;
        const int k = k_contiguous ? e % kSliceK : e / kTile;
        const int64_t row = i0 + i, col = k0 + k;
        slice[k][i] = row < I && col < K ? X[k_contiguous ? row * ld + col : col * ld + row] : T(0);
    }
}

// A: op(A) (M, K), B: op(B) (K, N), C: (M, N), each at its batch stride from the pointer;
// grid (⌈N/64⌉, ⌈M/64⌉, batch), block (16, 16).
template <class T>
__global__ void __launch_bounds__(kThreads)
    gemm_tiled(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, int64_t stride_a, bool trans_a,
               const T* B, int64_t ldb, int64_t stride_b, bool trans_b, T beta, T* C, int64_t ldc, int64_t stride_c) {
    GG_SHARED(Slice<T>, As);  // (16, 64): op(A)[m0 + m, k0 + k] at As[k][m]
    GG_SHARED(Slice<T>, Bs);  // (16, 64): op(B)[k0 + k, n0 + n] at Bs[k][n]
    const int64_t batch = blockIdx.z, m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
    A += batch * stride_a;
    B += batch * stride_b;
    C += batch * stride_c;
    const int tx = int(threadIdx.x), ty = int(threadIdx.y);

    T acc[kMicro][kMicro] = {};  // C[m0 + ty + 16i, n0 + tx + 16j] before alpha and beta
    for (int64_t k0 = 0; k0 < K; k0 += kSliceK) {
        load_slice(As, A, lda, !trans_a, m0, M, k0, K);
        load_slice(Bs, B, ldb, trans_b, n0, N, k0, K);
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

// The checks BLAS makes (it reports them through xerbla; we throw): a dtype with a kernel,
// no negative sizes, and leading dimensions that hold a whole stored row.
void check_gemm_arguments(const char* op, DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M,
                          int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
    if (dtype != DType::f32 && dtype != DType::f64)
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
    const int64_t tiles_n = (N + kTile - 1) / kTile, tiles_m = (M + kTile - 1) / kTile;
    for (int64_t b0 = 0; b0 < batch; b0 += kMaxGridYZ)
        for (int64_t t0 = 0; t0 < tiles_m; t0 += kMaxGridYZ) {
            const int64_t m0 = t0 * kTile;
            const dim3 grid(unsigned(tiles_n), unsigned(std::min(tiles_m - t0, kMaxGridYZ)),
                            unsigned(std::min(batch - b0, kMaxGridYZ)));
            launch("gemm", gemm_tiled<T>, grid, dim3(kThreadsPerDim, kThreadsPerDim), 0, M - m0, N, K, alpha,
                   A + b0 * stride_a + (trans_a ? m0 : m0 * lda), lda, stride_a, trans_a, B + b0 * stride_b, ldb,
                   stride_b, trans_b, beta, C + b0 * stride_c + m0 * ldc, ldc, stride_c);
        }
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
    if (dtype == DType::f32) {
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
    if (dtype == DType::f32)
        gemm_ours(batch, trans_a, trans_b, M, N, K, float(alpha), static_cast<const float*>(A), lda, stride_a,
                  static_cast<const float*>(B), ldb, stride_b, float(beta), static_cast<float*>(C), ldc, stride_c);
    else
        gemm_ours(batch, trans_a, trans_b, M, N, K, alpha, static_cast<const double*>(A), lda, stride_a,
                  static_cast<const double*>(B), ldb, stride_b, beta, static_cast<double*>(C), ldc, stride_c);
}

}  // namespace gg::cuda::GG_CUDA_BUILD

// gemm.h — what the GEMM kernels share beyond the table entry in cuda/kernels.h: the switch
// between our kernel and cuBLAS on the GPU, the cuBLAS entry itself, and the epilogue every
// GEMM kernel ends with (cuda/gemm.cu and the teaching ladder in cuda/gemm_ladder/).
#pragma once
#include <cstdint>

#include "cuda/launch.h"
#include "tensor/bf16.h"
#include "tensor/dtype.h"

#ifdef __CUDACC__
#include <cublas_v2.h>
#endif

namespace gg::cuda {

// C = alpha·acc + beta·C for one element. With beta == 0, C is not read, as BLAS promises:
// an output buffer fresh from the allocator may hold NaN, and 0·NaN would be NaN.
template <class T>
__device__ __forceinline__ void gemm_epilogue(T* c, T alpha, T acc, T beta) {
    *c = beta == T(0) ? alpha * acc : alpha * acc + beta * *c;
}

// The table's gemm for DType::bf16 (cuda/gemm_bf16.cu): the tensor-core kernel, bf16 operands,
// f32 sums, alpha and beta in f32, C rounded to bf16 once. The arguments are gemm's, checked.
namespace GG_CUDA_BUILD {
void gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const bfloat16* A, int64_t lda, int64_t stride_a, const bfloat16* B, int64_t ldb, int64_t stride_b,
               float beta, bfloat16* C, int64_t ldc, int64_t stride_c);
// Whether gemm_bf16 takes its pipelined path (cp.async, 16-byte chunks) for these operands:
// A and B 16-byte aligned, their leading dimensions and (with batch > 1) batch strides
// multiples of 8 elements. Otherwise it loads element by element.
bool gemm_bf16_pipelines(int64_t batch, const bfloat16* A, int64_t lda, int64_t stride_a, const bfloat16* B,
                         int64_t ldb, int64_t stride_b);
// How many ranges gemm_bf16 cuts K into (split-K, 1 when it does not): more than one only for
// batch 1, fewer than kFillBlocks tiles of 128×128 and K of at least 512.
int64_t gemm_bf16_splits(int64_t batch, int64_t M, int64_t N, int64_t K);
}

// How the f32/f64 GEMM (cuda/gemm.cu) runs a product, decided on the host from gemm's arguments
// (alpha already applied: K is 0 when alpha is): its block tile (128 or 64 a side), the
// ranges K is split into (splits of k_split each, the last shorter; 1 range of K when not
// split), and whether interior slices load A and B as 16-byte packs. For batch, M and N above 0
// (gemm returns before otherwise). Tests check the choice.
namespace GG_CUDA_BUILD {
struct GemmPlan {
    int tile;
    int64_t splits, k_split;
    bool vector_loads;
};
GemmPlan gemm_plan(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                   int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b);
}

// Which kernel gg::cuda::gpu::gemm runs. The emulated build has no cuBLAS and always runs ours.
enum class GemmKernel { ours, cublas };

#ifdef __CUDACC__
// The cuBLAS handle of the current device, bound to current_stream(). Defined by the CUDA
// runtime (cuda/runtime.cu), which creates it once and destroys it at exit.
cublasHandle_t cublas_handle();
#endif

}  // namespace gg::cuda

namespace gg::cuda::gpu {

// The kernel gemm runs: GATEDGRAD_GEMM=ours|cublas in the environment at the first call
// (ours when unset; another value throws), until set_gemm_kernel changes it.
GemmKernel gemm_kernel();
void set_gemm_kernel(GemmKernel kernel);

// The same contract as gemm (cuda/kernels.h), computed by cuBLAS: the reference our kernels
// are measured against, and the option GATEDGRAD_GEMM=cublas selects.
void gemm_cublas(DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                 double alpha, const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb,
                 int64_t stride_b, double beta, void* C, int64_t ldc, int64_t stride_c);

}  // namespace gg::cuda::gpu

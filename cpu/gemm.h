// cpu/gemm.h — the CPU backend's GEMM (OpenBLAS), in float32, float64 and bfloat16.
//
// C[i] = α·op(A[i])·op(B[i]) + β·C[i] for i < batch, row-major, op() a transpose or not, with
// the reference BLAS's promises: β = 0 never reads C, α = 0 (or K = 0) never reads A or B.
// The backend table's gemm entry (tensor/backend.h) is cpu_gemm.
#pragma once
#include <cstdint>

#include "gatedgrad_config.h"
#include "tensor/dtype.h"

namespace gg {

void cpu_gemm(DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              double alpha, const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb,
              int64_t stride_b, double beta, void* C, int64_t ldc, int64_t stride_c);

// The float32 copies a bfloat16 GEMM makes at most, in floats, per operand (32 MiB).
constexpr int64_t kBf16GemmPanel = int64_t(1) << 23;

// Up to this many rows of op(A) (a decoding step's tokens), a bfloat16 GEMM reads B as it is
// instead of through a float32 copy (cpu/gemm_bf16.cpp).
constexpr int64_t kFewRows = 4;

// bfloat16 operands and result, float32 sums (cpu/gemm_bf16.cpp): on the CPU's bfloat16
// instructions where it has them (cpu/gemm_dnnl.cpp), through float32 copies elsewhere.
// `panel` bounds the float32 copies of each operand, and on the instructions the blocks of C
// each oneDNN call gets; only tests pass a smaller one, to reach the panel loops with small
// matrices.
void cpu_gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                   const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b,
                   double beta, void* C, int64_t ldc, int64_t stride_c, int64_t panel = kBf16GemmPanel);

// Whether cpu_gemm_bf16 runs on the CPU's bfloat16 dot-product instructions: the build has
// oneDNN, the CPU has AVX512-BF16 or AMX, and neither GATEDGRAD_BF16_GEMM=widened in the
// environment nor allow_bf16_hardware(false) has turned it off. GATEDGRAD_BF16_GEMM=hardware
// makes every bfloat16 GEMM throw where that path is missing.
bool bf16_gemm_on_hardware();
// Turns the hardware path on or off (tests compare it with the widened path on the same
// operands; the widened path is the only one a CPU without the instructions has). Returns the
// previous setting.
bool allow_bf16_hardware(bool allowed);

#if GG_HAVE_DNNL
// cpu/gemm_dnnl.cpp: whether this CPU has the instructions, and the GEMM on them (false where
// oneDNN does not take the layout).
bool dnnl_bf16_available();
bool dnnl_gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                    const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b,
                    double beta, void* C, int64_t ldc, int64_t stride_c);
#endif

}  // namespace gg

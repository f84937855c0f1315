// cpu/gemm.h — the CPU backend's GEMM (OpenBLAS), in float32, float64 and bfloat16.
//
// C[i] = α·op(A[i])·op(B[i]) + β·C[i] for i < batch, row-major, op() a transpose or not, with
// the reference BLAS's promises: β = 0 never reads C, α = 0 (or K = 0) never reads A or B.
// The backend table's gemm entry (tensor/backend.h) is cpu_gemm.
#pragma once
#include <cstdint>

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

// bfloat16 operands and result, float32 sums (cpu/gemm_bf16.cpp). `panel` bounds the
// float32 copies of each operand; only tests pass a smaller one, to reach the panel loop
// with small matrices.
void cpu_gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                   const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b,
                   double beta, void* C, int64_t ldc, int64_t stride_c, int64_t panel = kBf16GemmPanel);

}  // namespace gg

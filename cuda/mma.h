// mma.h — the two tensor-core instructions the bf16 GEMM (cuda/gemm_bf16.cu) and the bf16
// attention (cuda/attention_mma.cuh) are built from, and the conversion that packs floats into
// their operands, one name for both builds: inline PTX under nvcc, the emulator's model (cuda/emulator/mma.h),
// which holds the same registers in the same lanes, under g++.
//
//   mma_m16n8k16_bf16(d, a, b, c)   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32:
//                                   d = a · b + c, A (16, 16) and B (16, 8) in bf16, C, D (16, 8)
//                                   in f32; one warp, every lane at the same call
//   ldmatrix<X, Trans>(r, row)      ldmatrix.sync.aligned.m8n8.xX{.trans}.shared.b16: X 8×8
//                                   b16 matrices from shared memory into X registers a lane
//   pack_bf16x2(first, second)      cvt.rn.bf16x2.f32: two floats rounded into one register of
//                                   an A or B fragment (the attention kernels build P's so)
//   for_each_accumulator(acc, f)    f(row, col, value) for each accumulator a lane holds of a
//                                   grid of mma tiles (an epilogue's loop)
//
// Where each element lives (PTX ISA, "Matrix fragments for mma.m16n8k16"), for lane l with
// g = l / 4 and q = l mod 4; each 32-bit register holds two bf16, the first in its low half:
//
//   A (16×16, row)   a[0] = A(g, 2q..2q+1)      a[1] = A(g+8, 2q..2q+1)
//                    a[2] = A(g, 2q+8..2q+9)    a[3] = A(g+8, 2q+8..2q+9)
//   B (16×8, col)    b[0] = B(2q..2q+1, g)      b[1] = B(2q+8..2q+9, g)
//   C, D (16×8 f32)  c[0], c[1] = C(g, 2q), C(g, 2q+1)     c[2], c[3] = C(g+8, 2q), C(g+8, 2q+1)
//
// ldmatrix produces exactly these registers from a tile in shared memory: lane 8j + r gives
// the address of row r of matrix j, and lane l receives row g, columns 2q and 2q+1 of each
// matrix (.trans: column g, rows 2q and 2q+1). So a 16×16 tile of A stored row-major
// (k contiguous) is one x4 with lane l pointing at row l mod 16, column 8·(l / 16): matrices
// 0..3 are the (rows 0–7, k 0–7), (8–15, 0–7), (0–7, 8–15), (8–15, 8–15) quarters, a[0..3].
// A 16×8 tile of B stored n-major (k contiguous) is one x2, lane l at row l mod 8, column
// 8·(l / 8 mod 2); stored k-major (n contiguous) it is the same x2 with .trans.
#pragma once
#include <cstdint>

#include "cuda/launch.h"
#include "tensor/bf16.h"

namespace gg::cuda {

#ifdef __CUDACC__

// Two floats rounded to bf16 (to nearest, ties to even) in one register, `first` in the low half,
// as the fragments above hold them: cvt.rn.bf16x2.f32, one instruction, whose first operand goes
// to the high half.
__device__ __forceinline__ uint32_t pack_bf16x2(float first, float second) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(second), "f"(first));
    return r;
}

__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
}

template <int X, bool Trans = false>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[X], const void* row_address) {
    static_assert(X == 1 || X == 2 || X == 4, "ldmatrix loads 1, 2 or 4 matrices");
    const unsigned address = unsigned(__cvta_generic_to_shared(row_address));
    if constexpr (X == 1 && !Trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(address));
    else if constexpr (X == 1)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(address));
    else if constexpr (X == 2 && !Trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(address));
    else if constexpr (X == 2)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(address));
    else if constexpr (!Trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(address));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(address));
}

#else

inline uint32_t pack_bf16x2(float first, float second) {
    return uint32_t(bf16_bits_from_float(first)) | uint32_t(bf16_bits_from_float(second)) << 16;
}

using emu::ldmatrix;
using emu::mma_m16n8k16_bf16;

#endif

// Calls visit(row, col, value) for each f32 accumulator this lane holds of a kTilesM × kTilesN
// grid of 16×8 mma tiles, acc[i][j] being tile (i, j)'s c[0..3]: row and col count from the
// grid's first element. The layout is the C, D row of the table above.
template <int kTilesM, int kTilesN, class Visit>
__device__ __forceinline__ void for_each_accumulator(const float (&acc)[kTilesM][kTilesN][4], Visit visit) {
    const int lane = int(threadIdx.x) % 32, g = lane / 4, q = lane % 4;
    GG_UNROLL
    for (int i = 0; i < kTilesM; ++i)
        GG_UNROLL
        for (int j = 0; j < kTilesN; ++j)
            GG_UNROLL
            for (int e = 0; e < 4; ++e) visit(16 * i + g + 8 * (e / 2), 8 * j + 2 * q + e % 2, acc[i][j][e]);
}

}  // namespace gg::cuda

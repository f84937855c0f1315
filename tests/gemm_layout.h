// gemm_layout.h — one GEMM call's geometry for the CUDA GEMM tests (test_cuda_gemm.cpp in
// f32/f64, test_cuda_gemm_bf16.cpp in bf16): the operands' padded rows and batch strides, and
// how to name a case in a failure message.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

namespace gg::testing {

// One GEMM call. Each stored row is `pad` elements longer than it needs to be; a batch
// stride of -1 means tight (the matrix's stored rows × ld), 0 broadcasts the operand; each
// operand starts `offset` elements past the start of its 16-byte aligned buffer (the f32/f64
// tests, which reach both load paths of cuda/gemm.cu this way).
struct Gemm {
    int64_t batch = 1;
    bool trans_a = false, trans_b = false;
    int64_t M = 1, N = 1, K = 1;
    double alpha = 1, beta = 0;
    int64_t pad_a = 0, pad_b = 0, pad_c = 0;
    int64_t stride_a = -1, stride_b = -1, stride_c = -1;
    int64_t offset = 0;
};

// One operand's memory: stored (rows, cols) matrices `ld` apart, `stride` apart over the batch,
// the first at element `offset` of a buffer of `size`.
struct Operand {
    int64_t rows, ld, stride, offset, size;
    Operand(int64_t batch, int64_t rows, int64_t cols, int64_t pad, int64_t stride_or_tight, int64_t offset)
        : rows(rows), ld(std::max<int64_t>(cols + pad, 1)),
          stride(stride_or_tight < 0 ? rows * ld : stride_or_tight), offset(offset),
          size(offset + std::max<int64_t>((batch - 1) * stride + rows * ld, 1)) {}
};

struct Layout {
    Operand a, b, c;
    explicit Layout(const Gemm& g)
        : a(g.batch, g.trans_a ? g.K : g.M, g.trans_a ? g.M : g.K, g.pad_a, g.stride_a, g.offset),
          b(g.batch, g.trans_b ? g.N : g.K, g.trans_b ? g.K : g.N, g.pad_b, g.stride_b, g.offset),
          c(g.batch, g.M, g.N, g.pad_c, g.stride_c, g.offset) {}
};

inline std::string describe(const Gemm& g) {
    const Layout l(g);
    return "batch " + std::to_string(g.batch) + " trans_a " + std::to_string(g.trans_a) + " trans_b " +
           std::to_string(g.trans_b) + " M " + std::to_string(g.M) + " N " + std::to_string(g.N) + " K " +
           std::to_string(g.K) + " alpha " + std::to_string(g.alpha) + " beta " + std::to_string(g.beta) + " lda " +
           std::to_string(l.a.ld) + " ldb " + std::to_string(l.b.ld) + " offset " + std::to_string(g.offset);
}

}  // namespace gg::testing

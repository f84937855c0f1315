// cpu/gemm_dnnl.cpp — bfloat16 GEMM on the CPU's bfloat16 instructions, through oneDNN.
//
// A CPU with AVX512-BF16 (Intel since Cooper Lake, AMD since Zen 4) or AMX multiplies
// bfloat16 pairs in hardware: vdpbf16ps adds a[2i]·b[2i] + a[2i+1]·b[2i+1] into a float32
// lane, twice the products per instruction of a float32 FMA and half the bytes read.
// cpu/gemm_bf16.cpp's widened copies cannot reach that, so where the CPU has the instructions
// a bfloat16 GEMM goes to oneDNN's matmul (Debian's libdnnl, the library PyTorch's own CPU
// bfloat16 matmuls run on), which packs the operands for them.
//
// The arithmetic is the widened path's: exact products (8 + 8 significant bits fit in
// float32's 24), float32 sums, α·sum + β·C in float32, rounded once to bfloat16; NaN and
// infinity propagate. Two differences, both of the instruction: the sums run in another order
// (so the last bits of C differ, as they do between two BLAS kernels), and a subnormal
// bfloat16 operand (below 1.2·10⁻³⁸ in magnitude) counts as zero.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <memory>

#include "tensor/bf16.h"
#include "cpu/float32.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"

namespace gg {

namespace {

using dnnl::memory;

// oneDNN's own answer to which instructions this CPU has: AVX512-BF16 or AMX.
bool cpu_has_bf16_dot() {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

// A batch of rows × cols matrices as oneDNN sees it: dims (batch, rows, cols) and the step of
// each; a transposed matrix swaps its last two steps. One matrix is two dimensions: oneDNN's
// fastest kernels (brgemm) take a batch only with dense steps. A batch stride of 0 (one matrix
// shared by every product) is oneDNN's broadcast, a batch dimension of 1.
memory::desc matrices(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld, bool transposed) {
    const memory::dims steps = transposed ? memory::dims{1, ld} : memory::dims{ld, 1};
    if (batch == 1) return memory::desc({rows, cols}, memory::data_type::bf16, steps);
    const int64_t dense = (transposed ? cols : rows) * ld;  // a shared matrix's batch step: never taken
    return memory::desc({stride == 0 ? 1 : batch, rows, cols}, memory::data_type::bf16,
                        {stride == 0 ? dense : stride, steps[0], steps[1]});
}

}  // namespace

bool dnnl_bf16_available() {
    static const bool available = cpu_has_bf16_dot();
    return available;
}

namespace {

// C = α·op(A)·op(B) + β·C as one oneDNN matmul; false where oneDNN does not take the layout.
bool matmul(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const void* A,
            int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b, double beta, void* C,
            int64_t ldc, int64_t stride_c) {
    static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    thread_local dnnl::stream stream(engine);  // a stream runs one call at a time
    const memory::desc a = matrices(batch, stride_a, M, K, lda, trans_a);
    const memory::desc b = matrices(batch, stride_b, K, N, ldb, trans_b);
    const memory::desc c = matrices(batch, stride_c, M, N, ldc, false);
    dnnl::primitive_attr attr;
    if (alpha != 1) attr.set_output_scales(0, {float(alpha)});
    if (beta != 0) {  // β = 0 never reads C: no sum, and oneDNN only writes it
        dnnl::post_ops sum;
        sum.append_sum(float(beta));
        attr.set_post_ops(sum);
    }
    dnnl::matmul::primitive_desc plan;
    try {
        plan = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine);
    } catch (const dnnl::error&) {
        return false;  // a layout oneDNN does not take: the widened path does it
    }
    // oneDNN keeps the primitives it built (its primitive cache), so a shape seen before is
    // not compiled again; only the plan above is made per call.
    dnnl::matmul(plan).execute(stream, {{DNNL_ARG_SRC, memory(a, engine, const_cast<void*>(A))},
                                        {DNNL_ARG_WEIGHTS, memory(b, engine, const_cast<void*>(B))},
                                        {DNNL_ARG_DST, memory(c, engine, C)}});
    stream.wait();
    return true;
}

// rows rows of cols elements, from rows `from_ld` apart to rows `to_ld` apart.
void copy_rows(bfloat16* to, int64_t to_ld, const bfloat16* from, int64_t from_ld, int64_t rows, int64_t cols) {
    parallel_range(rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) std::copy_n(from + r * from_ld, cols, to + r * to_ld);
    }, cols);
}

}  // namespace

bool dnnl_gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                    const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b,
                    double beta, void* C, int64_t ldc, int64_t stride_c) {
    if (ldc == N && (batch == 1 || stride_c == M * N))
        return matmul(batch, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                      stride_c);
    // oneDNN 2.6's fastest kernels (brgemm) write only a dense C. A C whose rows lie further
    // apart (a block of a wider C, one part of a joined projection's output) fell to its older
    // GEMM at a third of the speed or less (a 4096 × 2048 × 1024 block: 96–210 ms against 29–31), so
    // such a C is made in a dense copy and copied into place: O(MN) next to the product's O(MNK).
    auto* c = static_cast<bfloat16*>(C);
    const auto dense = CachedScratch<bfloat16>::make(batch * M * N);  // warm pages, reused
    for (int64_t i = 0; beta != 0 && i < batch; ++i) copy_rows(dense.get() + i * M * N, N, c + i * stride_c, ldc, M, N);
    if (!matmul(batch, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, dense.get(), N,
                M * N))
        return false;
    for (int64_t i = 0; i < batch; ++i) copy_rows(c + i * stride_c, ldc, dense.get() + i * M * N, N, M, N);
    return true;
}

}  // namespace gg

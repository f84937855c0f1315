// cpu/gemm_bf16.cpp — bfloat16 GEMM on the CPU: exact products, float32 sums, bounded memory.
//
// OpenBLAS has sbgemm for this, but Debian builds 0.3.21 without it (cblas.h declares
// cblas_sbgemm; libopenblas.so has no such symbol). Widening a bfloat16 to float32 is exact and
// so is the product of two of them (8 + 8 significant bits fit in float32's 24), so sgemm on
// widened copies does the arithmetic of a bfloat16 tensor core: exact products, float32 sums,
// and C is rounded once.
//
// The copies cost O(MK + KN + MN) next to the GEMM's O(MNK), but their memory is what counts
// at a real model's size: a language-model head of 151,936 words times 4,096 tokens would
// widen 1.2 GB of weights and hold a 2.5 GB float32 C beside its 1.2 GB bfloat16 result. So a
// large product runs panel by panel: C in blocks of rows × columns, each from a float32 copy
// of the rows of op(A) and of the columns of op(B) it needs, every copy at most `panel` floats
// (32 MiB), which still keeps sgemm at full speed. Small products (attention's many small
// matrices) are widened whole and run as one batched call, which splits over the batch.
//
// Where the CPU multiplies bfloat16 in hardware (AVX512-BF16, AMX) and the build has oneDNN,
// products of more than a few rows go there instead (cpu/gemm_dnnl.cpp); a decoding step's
// few rows stay here, where reading the weight once in place is what counts.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/bf16.h"
#include "cpu/float32.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"

namespace gg {

namespace {

bool hardware_available() {
#if GG_HAVE_DNNL
    return dnnl_bf16_available();
#else
    return false;
#endif
}

// The path a process starts with: the hardware where it is available, unless
// GATEDGRAD_BF16_GEMM names one (widened: the digits of a CPU without the instructions).
bool initially_allowed() {
    const char* name = std::getenv("GATEDGRAD_BF16_GEMM");
    if (!name) return true;
    if (name == std::string("widened")) return false;
    if (name != std::string("hardware"))
        throw std::invalid_argument(std::string("GATEDGRAD_BF16_GEMM=") + name + ": expected hardware or widened");
    if (!hardware_available())
        throw std::invalid_argument("GATEDGRAD_BF16_GEMM=hardware: this " +
                                    std::string(GG_HAVE_DNNL ? "CPU has no bfloat16 dot-product instructions"
                                                             : "build has no oneDNN"));
    return true;
}

std::atomic<bool>& hardware_allowed() {
    static std::atomic<bool> allowed{initially_allowed()};
    return allowed;
}

// The float32 copies come from the CPU's caching allocator, as the other kernels' copies do
// (cpu/float32.h): fresh memory each call (malloc maps blocks this large anew) was faulted in
// page by page, every GEMM, 6.9× the page faults of a forward on the hardware path.
using Floats = CachedScratch<float>::Block;

// rows × cols elements of a row-major bfloat16 matrix whose rows are ld apart, as a packed
// float32 copy (rows × cols, no padding).
Floats widen(const bfloat16* src, int64_t rows, int64_t cols, int64_t ld) {
    Floats out = CachedScratch<float>::make(rows * cols);
    parallel_range(rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) std::copy_n(src + r * ld, cols, out.get() + r * cols);
    }, cols);
    return out;
}

// n consecutive elements, widened.
Floats widen(const bfloat16* src, int64_t n) {
    Floats out = CachedScratch<float>::make(n);
    parallel_range(n, [&](int64_t begin, int64_t end) { std::copy(src + begin, src + end, out.get() + begin); });
    return out;
}

// The reverse: a packed float32 block rounded into a bfloat16 matrix whose rows are ld apart.
void narrow(bfloat16* dst, const float* src, int64_t rows, int64_t cols, int64_t ld) {
    parallel_range(rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) std::copy_n(src + r * cols, cols, dst + r * ld);
    }, cols);
}

// The elements a batch of (rows, cols) matrices spans, from the first to the last one read.
int64_t span(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld) {
    return cols <= 0 ? 0 : (batch - 1) * stride + (rows - 1) * ld + cols;
}

// One matrix, panel by panel. op(A) is M × K: its rows m0… are rows of A (ld lda), or, when A
// is transposed, columns m0… of the K × M matrix A. op(B) is K × N likewise. A panel of op(A)
// keeps op(A)'s orientation, packed: ld K, or ld mm when transposed; the same for op(B).
void gemm_panels(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const bfloat16* A,
                 int64_t lda, const bfloat16* B, int64_t ldb, double beta, bfloat16* C, int64_t ldc, int64_t panel) {
    // As many rows as a panel of op(A) holds, then as many columns as fit beside them: each
    // thread's sgemm (cpu_gemm splits C's rows) packs its panel of op(B) once for all of its
    // rows, so tall panels keep that packing small next to the products.
    const int64_t mb = std::clamp<int64_t>(panel / std::max<int64_t>(K, 1), 1, M);
    const int64_t nb = std::clamp<int64_t>(panel / std::max({K, mb, int64_t(1)}), 1, N);
    const auto rows_of_a = [&](int64_t m0, int64_t mm) {
        return trans_a ? widen(A + m0, K, mm, lda) : widen(A + m0 * lda, mm, K, lda);
    };
    Floats whole_a = mb == M ? rows_of_a(0, M) : nullptr;  // one row panel: widened once for every column panel
    for (int64_t n0 = 0; n0 < N; n0 += nb) {
        const int64_t nn = std::min(nb, N - n0);
        const Floats b = trans_b ? widen(B + n0 * ldb, nn, K, ldb) : widen(B + n0, K, nn, ldb);
        for (int64_t m0 = 0; m0 < M; m0 += mb) {
            const int64_t mm = std::min(mb, M - m0);
            const Floats own_a = whole_a ? nullptr : rows_of_a(m0, mm);
            const float* a = whole_a ? whole_a.get() : own_a.get();
            bfloat16* c_block = C + m0 * ldc + n0;
            Floats c = beta != 0 ? widen(c_block, mm, nn, ldc) : CachedScratch<float>::make(mm * nn);
            cpu_gemm(DType::f32, 1, trans_a, trans_b, mm, nn, K, alpha, a, trans_a ? mm : K, 0, b.get(),
                     trans_b ? K : nn, 0, beta, c.get(), nn, 0);
            narrow(c_block, c.get(), mm, nn, ldc);
        }
    }
}

// Σ_k a[k]·b[k] in float32: the products exact, the sum kept in kLanes partial sums that the
// compiler holds in vector registers (a single running sum would be a chain it may not reorder).
float dot(const float* a, const bfloat16* b, int64_t K) {
    constexpr int64_t kLanes = 16;
    float lanes[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= K; k += kLanes)
        for (int64_t j = 0; j < kLanes; ++j) lanes[j] += a[k + j] * float(b[k + j]);
    float sum = 0;
    for (const float lane : lanes) sum += lane;
    for (; k < K; ++k) sum += a[k] * float(b[k]);
    return sum;
}

// One matrix with at most kFewRows rows of op(A): decoding's layers, one token times a weight.
// There the widened copy of op(B) is the whole cost (B read once, written and read again twice
// as wide, for a product that reads it once), so op(B) is read in place, as bfloat16, and only
// op(A)'s few rows are widened. Same arithmetic: exact products, float32 sums, and C rounded
// to float32, then to bfloat16, as the widened path's float32 C is.
// Where op(B)'s rows run along K (B transposed: a Linear's weight, N × K) each C element is
// one dot product; otherwise (K × N) row k of B is added into C's rows, a block of columns at a
// time, so that the float32 sums stay in cache.
void gemm_few_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const bfloat16* A,
                   int64_t lda, const bfloat16* B, int64_t ldb, double beta, bfloat16* C, int64_t ldc) {
    const auto store = [&](int64_t m, int64_t n, float sum) {
        bfloat16& c = C[m * ldc + n];
        c = float(alpha * sum + (beta != 0 ? beta * float(c) : 0.0));  // β = 0 never reads C
    };
    if (alpha == 0 || K == 0) {  // C = β·C, and A and B are never read
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) store(m, n, 0);
        return;
    }
    // op(A) as M packed float32 rows of K: (M, K)
    const Floats a = trans_a ? widen(A, K, M, lda) : widen(A, M, K, lda);
    Floats rows;
    if (trans_a) {  // widen gave op(A)ᵀ (K, M): transpose the few rows into place
        rows = CachedScratch<float>::make(M * K);
        for (int64_t k = 0; k < K; ++k)
            for (int64_t m = 0; m < M; ++m) rows[size_t(m * K + k)] = a[size_t(k * M + m)];
    }
    const float* a_rows = trans_a ? rows.get() : a.get();
    if (trans_b) {
        parallel_range(N, [&](int64_t begin, int64_t end) {
            for (int64_t n = begin; n < end; ++n)
                for (int64_t m = 0; m < M; ++m) store(m, n, dot(a_rows + m * K, B + n * ldb, K));
        }, M * K);
        return;
    }
    constexpr int64_t kColumns = 512;  // a block's sums: M × 512 floats, 2 KB a row
    parallel_range((N + kColumns - 1) / kColumns, [&](int64_t begin, int64_t end) {
        std::vector<float> sums(size_t(M * kColumns));
        for (int64_t block = begin; block < end; ++block) {
            const int64_t n0 = block * kColumns, nn = std::min(kColumns, N - n0);
            std::fill(sums.begin(), sums.end(), 0.0f);
            for (int64_t k = 0; k < K; ++k)
                for (int64_t m = 0; m < M; ++m) {
                    const float a_mk = a_rows[m * K + k];
                    float* sum = sums.data() + m * kColumns;
                    for (int64_t j = 0; j < nn; ++j) sum[j] += a_mk * float(B[k * ldb + n0 + j]);
                }
            for (int64_t m = 0; m < M; ++m)
                for (int64_t j = 0; j < nn; ++j) store(m, n0 + j, sums[size_t(m * kColumns + j)]);
        }
    }, M * K * kColumns);
}

}  // namespace

bool bf16_gemm_on_hardware() { return hardware_allowed() && hardware_available(); }

bool allow_bf16_hardware(bool allowed) { return hardware_allowed().exchange(allowed); }

namespace {

// Through float32 copies and sgemm, or, for a few rows, with B read in place.
void widened_gemm(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                  const bfloat16* a, int64_t lda, int64_t stride_a, const bfloat16* b, int64_t ldb, int64_t stride_b,
                  double beta, bfloat16* c, int64_t ldc, int64_t stride_c, int64_t panel) {
    const int64_t span_a = span(batch, stride_a, trans_a ? K : M, trans_a ? M : K, lda);
    const int64_t span_b = span(batch, stride_b, trans_b ? N : K, trans_b ? K : N, ldb);
    const int64_t span_c = span(batch, stride_c, M, N, ldc);
    if (M <= kFewRows) {
        for (int64_t i = 0; i < batch; ++i)
            gemm_few_rows(trans_a, trans_b, M, N, K, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                          c + i * stride_c, ldc);
        return;
    }
    if (std::max({span_a, span_b, span_c}) > panel) {
        for (int64_t i = 0; i < batch; ++i)
            gemm_panels(trans_a, trans_b, M, N, K, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                        c + i * stride_c, ldc, panel);
        return;
    }
    // Whole copies keep the operands' layout (strides, leading dimensions, padding), so one
    // batched sgemm runs them; only C's own rows are rounded back, padding between them stays.
    const Floats wa = widen(a, span_a), wb = widen(b, span_b);
    Floats wc = beta != 0 ? widen(c, span_c) : CachedScratch<float>::make(span_c);
    cpu_gemm(DType::f32, batch, trans_a, trans_b, M, N, K, alpha, wa.get(), lda, stride_a, wb.get(), ldb, stride_b,
             beta, wc.get(), ldc, stride_c);
    parallel_range(batch * M, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
            const int64_t at = row / M * stride_c + row % M * ldc;
            std::copy_n(wc.get() + at, N, c + at);
        }
    }, N);
}

#if GG_HAVE_DNNL
// On the bfloat16 instructions, in blocks of C of at most `panel` elements: oneDNN keeps a
// product's float32 sums and its packed B in its own scratch memory, which for a language-model
// head (4,096 tokens × 151,936 words) grew the forward's peak by 2.2 GB. A block is a view of
// the same operands (an offset, the same leading dimensions); the ragged last ones are one
// more shape each for oneDNN's cache. A block oneDNN does not take runs widened.
void hardware_gemm(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                   const bfloat16* a, int64_t lda, int64_t stride_a, const bfloat16* b, int64_t ldb, int64_t stride_b,
                   double beta, bfloat16* c, int64_t ldc, int64_t stride_c, int64_t panel) {
    const int64_t nb = std::clamp<int64_t>(panel / (batch * M), 1, N);
    const int64_t mb = std::clamp<int64_t>(panel / (batch * nb), 1, M);
    for (int64_t m0 = 0; m0 < M; m0 += mb)
        for (int64_t n0 = 0; n0 < N; n0 += nb) {
            const int64_t mm = std::min(mb, M - m0), nn = std::min(nb, N - n0);
            const bfloat16* a_block = a + (trans_a ? m0 : m0 * lda);
            const bfloat16* b_block = b + (trans_b ? n0 * ldb : n0);
            bfloat16* c_block = c + m0 * ldc + n0;
            if (!dnnl_gemm_bf16(batch, trans_a, trans_b, mm, nn, K, alpha, a_block, lda, stride_a, b_block, ldb,
                                stride_b, beta, c_block, ldc, stride_c))
                widened_gemm(batch, trans_a, trans_b, mm, nn, K, alpha, a_block, lda, stride_a, b_block, ldb, stride_b,
                             beta, c_block, ldc, stride_c, panel);
        }
}
#endif

}  // namespace

void cpu_gemm_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                   const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b,
                   double beta, void* C, int64_t ldc, int64_t stride_c, int64_t panel) {
    if (batch <= 0 || M <= 0 || N <= 0) return;
    const auto* a = static_cast<const bfloat16*>(A);
    const auto* b = static_cast<const bfloat16*>(B);
    auto* c = static_cast<bfloat16*>(C);
#if GG_HAVE_DNNL
    // α = 0 or K = 0 (C = β·C) stays widened, where A and B are never used; so do a few rows
    if (M > kFewRows && alpha != 0 && K > 0 && bf16_gemm_on_hardware())
        return hardware_gemm(batch, trans_a, trans_b, M, N, K, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                             stride_c, panel);
#endif
    widened_gemm(batch, trans_a, trans_b, M, N, K, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                 panel);
}

}  // namespace gg

// cpu/backend.cpp — the CPU implementation of the backend table (tensor/backend.h).
//
// Dense operands take a flat loop; strided or broadcast ones walk an N-d index. Loops
// split over OpenMP threads once they are large enough (cpu/parallel.h); GEMM is
// OpenBLAS. Every kernel is templated on the element type T. A bfloat16 operand computes in
// float32 and rounds once on the way out: element-wise kernels take T = gg::bfloat16 (which
// reads as a float), fused ones run their float32 form on float32 copies (cpu_float32.h),
// and GEMM multiplies widened copies with sgemm (exact products, float32 sums:
// cpu/gemm_bf16.cpp).
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/backend.h"
#include "cpu/blas_buffers.h"
#include "tensor/caching_allocator.h"
#include "cpu/gemm.h"
#include "cpu/host_memory.h"
#include "cpu/float32.h"
#include "cpu/parallel.h"
#include "cpu/vector_math.h"

namespace gg {

// cpu/attention.cpp
void cpu_attention_forward(const AttentionShape& s, const View& O, const View& lse, const View& probs,
                           const View& Q, const View& K, const View& V, const View& sink);
void cpu_attention_backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV,
                            const View& dO, const View& Q, const View& K, const View& V, const View& O,
                            const View& lse, const View& probs);
// cpu/fused.cpp
void cpu_rms_norm_forward(const View& y, const View& rstd, const View& x, const View& weight, int64_t rows,
                          int64_t cols, double eps);
void cpu_rms_norm_backward(const View& dx, const View& dweight, const View& dy, const View& x, const View& weight,
                           const View& rstd, int64_t rows, int64_t cols);
void cpu_swiglu_forward(const View& y, const View& a, const View& b);
void cpu_swiglu_backward(const View& da, const View& db, const View& dy, const View& a, const View& b);
void cpu_sigmoid_gate_forward(const View& y, const View& s, const View& a);
void cpu_sigmoid_gate_backward(const View& ds, const View& da, const View& dy, const View& s, const View& a);
void cpu_rope(const View& out, const View& x, const View& cos, const View& sin, bool transpose);
void cpu_adamw_step(std::span<const AdamWTensors> params);
void cpu_sgd_step(const SGDStep& s, const View& param, const View& grad, const View& momentum_buffer);
void cpu_sum_squares(const View& acc, std::span<const View> xs);
void cpu_scale_list(double factor, std::span<const View> xs);

namespace {

bool is_dense(const View& v) {
    int64_t expected = 1;
    for (int i = v.ndim; i-- > 0;) {
        if (v.shape[i] != 1 && v.strides[i] != expected) return false;
        expected *= v.shape[i];
    }
    return true;
}

// The operands with neighbouring dims merged wherever every operand walks them as one
// (stride[d] = stride[d + 1] · shape[d + 1]) and dims of size 1 dropped: a (B, T, C)
// operand broadcast from (C) is walked as (B·T, C), so rows are as long as the layouts allow.
template <size_t N>
std::array<View, N> coalesce(const std::array<const View*, N>& views) {
    const View& out = *views[0];
    std::array<View, N> merged;
    for (size_t k = 0; k < N; ++k) merged[k] = *views[k], merged[k].ndim = 0;
    for (int d = 0; d < out.ndim; ++d) {
        if (out.shape[d] == 1) continue;
        const int m = merged[0].ndim;
        bool joins = m > 0;
        for (size_t k = 0; k < N; ++k) joins = joins && merged[k].strides[m - 1] == views[k]->strides[d] * out.shape[d];
        for (size_t k = 0; k < N; ++k) {
            View& v = merged[k];
            if (joins) {
                v.shape[m - 1] *= out.shape[d];
                v.strides[m - 1] = views[k]->strides[d];
            } else {
                v.shape[m] = out.shape[d];
                v.strides[m] = views[k]->strides[d];
                v.ndim = m + 1;
            }
        }
    }
    return merged;
}

// Visits every index of out's shape in row-major order, passing the element offset of
// each of the N operands (each with its own strides; all of out's shape). Chunks of the
// index space go to threads. The innermost dimension is a plain loop that adds each
// operand's stride; only at the end of a row does the odometer carry into the outer dims.
// When every operand's row is contiguous the loop adds a constant 1, which the compiler
// turns into vector code, as it does for a dense operand.
template <size_t N, class F>
void for_each_offset(const std::array<const View*, N>& operands, F&& f) {
    const std::array<View, N> views = coalesce(operands);
    const View& out = views[0];
    const int64_t n = out.numel(), nd = out.ndim;
    const int64_t inner = nd > 0 ? out.shape[nd - 1] : 1;
    std::array<int64_t, N> step{};  // each operand's stride along the innermost dimension
    if (nd > 0)
        for (size_t k = 0; k < N; ++k) step[k] = views[k].strides[nd - 1];
    const bool unit_steps = std::ranges::all_of(step, [](int64_t s) { return s == 1; });
    parallel_range(n, [&](int64_t begin, int64_t end) {
        std::array<int64_t, kMaxDims> idx{};
        std::array<int64_t, N> off{};
        for (int64_t d = nd - 1, rem = begin; d >= 0; --d) {
            idx[d] = rem % out.shape[d];
            rem /= out.shape[d];
            for (size_t k = 0; k < N; ++k) off[k] += idx[d] * views[k].strides[d];
        }
        const int64_t last = std::max<int64_t>(nd - 1, 0);
        for (int64_t i = begin; i < end;) {
            const int64_t run = std::min(end - i, inner - idx[last]);  // to the end of this row
            if (unit_steps) {
                for (int64_t j = 0; j < run; ++j) {
                    std::array<int64_t, N> at = off;
                    for (size_t k = 0; k < N; ++k) at[k] += j;
                    f(at);
                }
                for (size_t k = 0; k < N; ++k) off[k] += run;
            } else {
                for (int64_t j = 0; j < run; ++j) {
                    f(off);
                    for (size_t k = 0; k < N; ++k) off[k] += step[k];
                }
            }
            i += run;
            if ((idx[last] += run) < inner) continue;
            for (size_t k = 0; k < N; ++k) off[k] -= step[k] * inner;  // back to the row's start
            idx[last] = 0;
            for (int64_t d = nd - 2; d >= 0; --d) {  // odometer carry over the outer dimensions
                for (size_t k = 0; k < N; ++k) off[k] += views[k].strides[d];
                if (++idx[d] < out.shape[d]) break;
                for (size_t k = 0; k < N; ++k) off[k] -= views[k].strides[d] * out.shape[d];
                idx[d] = 0;
            }
        }
    });
}

template <class T>
T* ptr(const View& v) { return static_cast<T*>(v.data); }

// out = f(in), element-wise.
template <class T, class F>
void map1(const View& out, const View& in, F f) {
    T* o = ptr<T>(out);
    const T* x = ptr<T>(in);
    if (is_dense(in)) {
        parallel_range(out.numel(), [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) o[i] = f(x[i]);
        });
    } else {
        for_each_offset<2>({&out, &in}, [&](const auto& off) { o[off[0]] = f(x[off[1]]); });
    }
}

// out = f(a, b), element-wise over already-broadcast operands.
template <class T, class F>
void map2(const View& out, const View& a, const View& b, F f) {
    T* o = ptr<T>(out);
    const T *x = ptr<T>(a), *y = ptr<T>(b);
    if (is_dense(a) && is_dense(b)) {
        parallel_range(out.numel(), [&](int64_t s, int64_t e) {
            for (int64_t i = s; i < e; ++i) o[i] = f(x[i], y[i]);
        });
    } else {
        for_each_offset<3>({&out, &a, &b},
                           [&](const auto& off) { o[off[0]] = f(x[off[1]], y[off[2]]); });
    }
}

// Freed tensors' memory is kept for the next tensor of its size (tensor/caching_allocator.h):
// an op's output then lands in warm pages instead of faulting in fresh ones. At most 1 GiB is
// kept: a training step of the models this library trains frees far less, and a real model's
// single large blocks (a 152k-word head's logits) fault in once per forward, in huge pages
// (cpu/host_memory.h), which costs a fraction of a second next to the forward itself. Never
// destroyed, so that tensors in static storage can still be freed at exit. GATEDGRAD_CPU_CACHE=0 turns
// it off (tools/sanitize does, so that AddressSanitizer sees every block's end).
CachingAllocator& cpu_allocator() {
    static CachingAllocator* instance =
        new CachingAllocator(host_allocate, host_free, caching_enabled_by_environment("GATEDGRAD_CPU_CACHE"),
                             size_t(1) << 30);
    return *instance;
}

void* cpu_allocate(size_t nbytes) { return cpu_allocator().allocate(nbytes); }
void cpu_deallocate(void* p, size_t) { cpu_allocator().deallocate(p); }
void cpu_synchronize() {}
void cpu_memcpy(void* dst, const void* src, size_t nbytes) { std::memcpy(dst, src, nbytes); }

void cpu_fill(const View& out, double value) {
    dispatch_with_bf16(out.dtype, [&]<class T>() {
        T* o = ptr<T>(out);
        const T v = static_cast<T>(value);
        parallel_range(out.numel(), [&](int64_t b, int64_t e) { std::fill(o + b, o + e, v); });
    });
}

void cpu_arange(const View& out, double start, double step) {
    dispatch_with_bf16(out.dtype, [&]<class T>() {
        T* o = ptr<T>(out);
        for (int64_t i = 0; i < out.numel(); ++i) o[i] = static_cast<T>(start + i * step);
    });
}

}  // namespace

// Declared in cpu/float32.h, which widens and rounds bfloat16 operands with it.
void cpu_copy(const View& out, const View& in) {
    if (out.dtype == in.dtype && is_dense(out) && is_dense(in)) {
        std::memcpy(out.data, in.data, out.numel() * dtype_size(out.dtype));
        return;
    }
    dispatch_with_bf16(out.dtype, [&]<class O>() {
        dispatch_with_bf16(in.dtype, [&]<class I>() {
            O* o = ptr<O>(out);
            const I* x = ptr<I>(in);
            for_each_offset<2>({&out, &in},
                               [&](const auto& off) { o[off[0]] = static_cast<O>(x[off[1]]); });
        });
    });
}

namespace {

void cpu_unary(UnaryOp op, const View& out, const View& in, double exponent) {
    dispatch_with_bf16(out.dtype, [&]<class T>() {
        switch (op) {
            case UnaryOp::neg: map1<T>(out, in, [](T x) { return T(-x); }); break;
            case UnaryOp::exp: map1<T>(out, in, [](T x) { return T(std::exp(x)); }); break;
            case UnaryOp::log: map1<T>(out, in, [](T x) { return T(std::log(x)); }); break;
            case UnaryOp::sqrt: map1<T>(out, in, [](T x) { return T(std::sqrt(x)); }); break;
            case UnaryOp::rsqrt: map1<T>(out, in, [](T x) { return T(1 / std::sqrt(x)); }); break;
            case UnaryOp::tanh: map1<T>(out, in, [](T x) { return T(std::tanh(x)); }); break;
            case UnaryOp::sigmoid:
                if constexpr (std::is_floating_point_v<T>) {
                    if (is_dense(in)) {  // the G1 gate's σ, at the vector width (cpu/vector_math.h)
                        parallel_range(out.numel(), [&](int64_t b, int64_t e) {
                            vec::sigmoid(ptr<T>(out) + b, ptr<T>(in) + b, e - b);
                        });
                        break;
                    }
                }
                map1<T>(out, in, [](T x) { return T(1 / (1 + std::exp(-x))); });
                break;
            case UnaryOp::relu: map1<T>(out, in, [](T x) { return x > 0 ? x : T(0); }); break;
            case UnaryOp::silu: map1<T>(out, in, [](T x) { return T(x / (1 + std::exp(-x))); }); break;
            case UnaryOp::gelu:  // exact GELU, x Φ(x), as torch's default
                map1<T>(out, in, [](T x) { return T(0.5 * x * (1 + std::erf(x * M_SQRT1_2))); });
                break;
            case UnaryOp::erf: map1<T>(out, in, [](T x) { return T(std::erf(x)); }); break;
            case UnaryOp::abs: map1<T>(out, in, [](T x) { return x < 0 ? T(-x) : x; }); break;
            case UnaryOp::pow:
                map1<T>(out, in, [=](T x) {
                    const double r = std::pow(double(x), exponent);
                    if constexpr (std::is_integral_v<T>) {
                        // Into an integer: a result within 1e-12 of an integer is that integer, as on
                        // the GPU, whose pow is not correctly rounded (cuda/elementwise.cu).
                        const double n = std::rint(r);
                        return T(std::fabs(r - n) <= 1e-12 * std::fmax(1.0, std::fabs(n)) ? n : r);
                    }
                    return T(r);
                });
                break;
        }
    });
}

void cpu_binary(BinaryOp op, const View& out, const View& a, const View& b) {
    dispatch_with_bf16(out.dtype, [&]<class T>() {
        switch (op) {
            case BinaryOp::add: map2<T>(out, a, b, [](T x, T y) { return T(x + y); }); break;
            case BinaryOp::sub: map2<T>(out, a, b, [](T x, T y) { return T(x - y); }); break;
            case BinaryOp::mul: map2<T>(out, a, b, [](T x, T y) { return T(x * y); }); break;
            case BinaryOp::div: map2<T>(out, a, b, [](T x, T y) { return T(x / y); }); break;
            case BinaryOp::maximum: map2<T>(out, a, b, [](T x, T y) { return x > y ? x : y; }); break;
            case BinaryOp::minimum: map2<T>(out, a, b, [](T x, T y) { return x < y ? x : y; }); break;
            case BinaryOp::eq: map2<T>(out, a, b, [](T x, T y) { return T(x == y); }); break;
            case BinaryOp::ne: map2<T>(out, a, b, [](T x, T y) { return T(x != y); }); break;
            case BinaryOp::lt: map2<T>(out, a, b, [](T x, T y) { return T(x < y); }); break;
            case BinaryOp::le: map2<T>(out, a, b, [](T x, T y) { return T(x <= y); }); break;
            case BinaryOp::gt: map2<T>(out, a, b, [](T x, T y) { return T(x > y); }); break;
            case BinaryOp::ge: map2<T>(out, a, b, [](T x, T y) { return T(x >= y); }); break;
        }
    });
}

void cpu_where(const View& out, const View& cond, const View& a, const View& b) {
    dispatch_with_bf16(out.dtype, [&]<class T>() {
        T* o = ptr<T>(out);
        const T *c = ptr<T>(cond), *x = ptr<T>(a), *y = ptr<T>(b);
        for_each_offset<4>({&out, &cond, &a, &b},
                           [&](const auto& off) { o[off[0]] = c[off[1]] != T(0) ? x[off[2]] : y[off[3]]; });
    });
}

// Reduces over the middle axis of (outer, R, inner). Accumulates floats in double.
void cpu_reduce(ReduceOp op, const View& out, const View& in, int64_t outer, int64_t R, int64_t inner) {
    dispatch_with_bf16(out.dtype, [&]<class T>() {
        constexpr bool floating = std::is_floating_point_v<compute_type<T>>;
        using Acc = std::conditional_t<floating, double, int64_t>;
        // max starts below every value: −∞ for floats (so a run of −∞ gives −∞), the lowest
        // integer for int64; min likewise from above.
        const Acc lowest = floating ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::lowest();
        const Acc highest = floating ? std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::max();
        const Acc init = op == ReduceOp::sum ? Acc(0) : op == ReduceOp::max ? lowest : highest;
        auto combine = [op](Acc acc, T x) -> Acc {
            if (op == ReduceOp::sum) return acc + x;
            if (op == ReduceOp::max) return std::isnan(double(x)) || x > acc ? Acc(x) : acc;
            return std::isnan(double(x)) || x < acc ? Acc(x) : acc;
        };
        const T* x = ptr<T>(in);
        T* o = ptr<T>(out);
        if (op != ReduceOp::sum && R == 0)
            throw std::invalid_argument("reduce: max/min over an empty dim");
        // Work item = one output element; consecutive items share rows of the input, so a
        // chunk walks the input row by row (contiguous) rather than column by column.
        parallel_range(outer * inner, [&](int64_t begin, int64_t end) {
            std::vector<Acc> acc;
            for (int64_t item = begin; item < end;) {
                const int64_t o_idx = item / inner, j0 = item % inner;
                const int64_t j1 = std::min(inner, j0 + (end - item));
                acc.assign(j1 - j0, init);
                for (int64_t r = 0; r < R; ++r) {
                    const T* row = x + (o_idx * R + r) * inner;
                    for (int64_t j = j0; j < j1; ++j) acc[j - j0] = combine(acc[j - j0], row[j]);
                }
                for (int64_t j = j0; j < j1; ++j) o[o_idx * inner + j] = static_cast<T>(acc[j - j0]);
                item += j1 - j0;
            }
        }, R);
    });
}

void cpu_softmax(const View& out, const View& in, int64_t rows, int64_t cols, bool log) {
    if (any_bf16({out, in}))
        return via_float32<1, 1>({in}, {out}, [&](auto& i, auto& o) { cpu_softmax(o[0], i[0], rows, cols, log); });
    dispatch(out.dtype, [&]<class T>() {
        const T* x = ptr<T>(in);
        T* y = ptr<T>(out);
        parallel_range(rows, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const T* xr = x + r * cols;
                T* yr = y + r * cols;
                // Subtracting the max keeps exp() finite; it cancels in the ratio.
                const T m = vec::max_value(xr, cols);
                const double z = vec::exp_shifted(yr, xr, m, cols);  // yr = e^{x − m} (cpu/vector_math.h)
                if (log) {
                    const double lz = std::log(z);
                    for (int64_t c = 0; c < cols; ++c) yr[c] = T(xr[c] - m - lz);
                } else {
                    const T inv_z = T(1 / z);
                    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv_z;
                }
            }
        }, cols);
    });
}

// softmax:     dx = y ⊙ (dy − Σ dy⊙y)
// log_softmax: dx = dy − exp(y) Σ dy
void cpu_softmax_backward(const View& dx, const View& y, const View& dy, int64_t rows, int64_t cols, bool log) {
    if (any_bf16({dx, y, dy}))
        return via_float32<2, 1>({y, dy}, {dx}, [&](auto& i, auto& o) {
            cpu_softmax_backward(o[0], i[0], i[1], rows, cols, log);
        });
    dispatch(dx.dtype, [&]<class T>() {
        const T *yp = ptr<T>(y), *gp = ptr<T>(dy);
        T* out = ptr<T>(dx);
        parallel_range(rows, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const T *yr = yp + r * cols, *gr = gp + r * cols;
                T* o = out + r * cols;
                double dot = 0;
                for (int64_t c = 0; c < cols; ++c) dot += log ? double(gr[c]) : double(gr[c]) * yr[c];
                for (int64_t c = 0; c < cols; ++c)
                    o[c] = log ? T(gr[c] - std::exp(double(yr[c])) * dot) : T(yr[c] * (gr[c] - dot));
            }
        }, cols);
    });
}

}  // namespace

// OpenBLAS runs each call on the calling thread (cpu_backend_table sets that up); the
// threads are OpenMP's, the same pool every other kernel uses. Two pools on the same cores
// (OpenBLAS's pthreads spinning while OpenMP's wait, and the reverse) made a 2-thread step
// slower than a 1-thread one. A batch splits over its matrices, one matrix over C's rows.
void cpu_gemm(DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              double alpha, const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb,
              int64_t stride_b, double beta, void* C, int64_t ldc, int64_t stride_c) {
    if (dtype == DType::bf16) return cpu_gemm_bf16(batch, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb,
                                                   stride_b, beta, C, ldc, stride_c);
    if (dtype != DType::f32 && dtype != DType::f64)
        throw std::invalid_argument(std::string("gemm: no kernel for ") + dtype_name(dtype));
    if (batch <= 0 || M <= 0 || N <= 0) return;
    const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    // The reference BLAS defines β = 0 as "C is not read" and α = 0 (or K = 0) as "A and B are
    // not read", so NaN or garbage there never reaches the result. OpenBLAS keeps that on some
    // CPUs and not on others (its SkylakeX and Cooperlake kernels multiply A·B by α = 0, so a NaN
    // in A gives NaN), and which kernels run depends on the machine. So α = 0 never calls BLAS
    // here: C is only scaled by β. β = 0 with a product is left to OpenBLAS, whose every kernel
    // writes C without reading it then (test_cpu_gemm checks that on each core type); zeroing
    // C first would add a pass over C to every GEMM of a step.
    const bool product = alpha != 0 && K > 0;
    const auto scale_rows = [&](int64_t i, int64_t m0, int64_t rows) {  // C ← β·C, without reading C when β = 0
        dispatch(dtype, [&]<class T>() {
            for (int64_t m = m0; m < m0 + rows; ++m) {
                T* c = static_cast<T*>(C) + i * stride_c + m * ldc;
                if (beta == 0) std::fill_n(c, N, T(0));
                else if (beta != 1) for (int64_t n = 0; n < N; ++n) c[n] = T(beta * c[n]);
            }
        });
    };
    // Rows [m0, m0 + rows) of C[i] from the same rows of op(A[i]): row m of op(A) starts at
    // A + m·lda, or at column m (A + m) when A is transposed.
    const auto rows_of = [&](int64_t i, int64_t m0, int64_t rows) {
        if (!product) return scale_rows(i, m0, rows);
        const int64_t a_offset = i * stride_a + m0 * (trans_a ? 1 : lda), c_offset = i * stride_c + m0 * ldc;
        if (dtype == DType::f32)
            cblas_sgemm(CblasRowMajor, ta, tb, rows, N, K, float(alpha), static_cast<const float*>(A) + a_offset, lda,
                        static_cast<const float*>(B) + i * stride_b, ldb, float(beta),
                        static_cast<float*>(C) + c_offset, ldc);
        else
            cblas_dgemm(CblasRowMajor, ta, tb, rows, N, K, alpha, static_cast<const double*>(A) + a_offset, lda,
                        static_cast<const double*>(B) + i * stride_b, ldb, beta,
                        static_cast<double*>(C) + c_offset, ldc);
    };
    if (batch > 1)
        parallel_range(batch, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) rows_of(i, 0, M);
        }, M * N * K);
    else if (batch == 1)
        parallel_range(M, [&](int64_t begin, int64_t end) { rows_of(0, begin, end - begin); }, N * K);
}

namespace {

// Index tensors are checked once, serially, so kernels never index out of bounds (and
// never throw from inside a parallel region).
void check_indices(const char* op, const int64_t* idx, int64_t n, int64_t limit, int64_t ignore = INT64_MIN) {
    for (int64_t i = 0; i < n; ++i)
        if (idx[i] != ignore && (idx[i] < 0 || idx[i] >= limit))
            throw std::out_of_range(std::string(op) + ": index " + std::to_string(idx[i]) + " at position " +
                                    std::to_string(i) + " is out of range [0, " + std::to_string(limit) + ")");
}

void cpu_index_select_rows(const View& out, const View& table, const View& idx) {
    const int64_t N = idx.shape[0], V = table.shape[0], D = table.shape[1];
    const int64_t* ids = ptr<int64_t>(idx);
    check_indices("embedding", ids, N, V);
    const size_t row_bytes = D * dtype_size(out.dtype);
    parallel_range(N, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
            std::memcpy(static_cast<char*>(out.data) + i * row_bytes,
                        static_cast<const char*>(table.data) + ids[i] * row_bytes, row_bytes);
    }, D);
}

void cpu_index_add_rows(const View& table, const View& idx, const View& src) {
    // Repeated ids add up in float32 and each row is rounded once, at the end.
    if (table.dtype == DType::bf16)
        return via_float32<2, 1>({table, src}, {table}, [&](auto& i, auto& o) {
            cpu_copy(o[0], i[0]);
            cpu_index_add_rows(o[0], idx, i[1]);
        });
    const int64_t N = idx.shape[0], V = table.shape[0], D = table.shape[1];
    const int64_t* ids = ptr<int64_t>(idx);
    check_indices("index_add", ids, N, V);
    dispatch(table.dtype, [&]<class T>() {
        T* t = ptr<T>(table);
        const T* s = ptr<T>(src);
        // Threads own disjoint column ranges, so repeated ids never race.
        parallel_range(D, [&](int64_t c0, int64_t c1) {
            for (int64_t i = 0; i < N; ++i)
                for (int64_t c = c0; c < c1; ++c) t[ids[i] * D + c] += s[i * D + c];
        }, N);
    });
}

void cpu_gather_last(const View& out, const View& in, const View& idx) {
    const int64_t rows = out.shape[0], k = out.shape[1], C = in.shape[1];
    const int64_t* ids = ptr<int64_t>(idx);
    check_indices("gather", ids, rows * k, C);
    dispatch_with_bf16(out.dtype, [&]<class T>() {
        for (int64_t i = 0; i < rows * k; ++i) ptr<T>(out)[i] = ptr<T>(in)[(i / k) * C + ids[i]];
    });
}

void cpu_scatter_add_last(const View& out, const View& idx, const View& src) {
    if (out.dtype == DType::bf16)  // as index_add_rows: sums in float32, rounded once
        return via_float32<2, 1>({out, src}, {out}, [&](auto& i, auto& o) {
            cpu_copy(o[0], i[0]);
            cpu_scatter_add_last(o[0], idx, i[1]);
        });
    const int64_t rows = src.shape[0], k = src.shape[1], C = out.shape[1];
    const int64_t* ids = ptr<int64_t>(idx);
    check_indices("scatter_add", ids, rows * k, C);
    dispatch(out.dtype, [&]<class T>() {
        for (int64_t i = 0; i < rows * k; ++i) ptr<T>(out)[(i / k) * C + ids[i]] += ptr<T>(src)[i];
    });
}

void cpu_topk_last(const View& values, const View& indices, const View& in, int64_t k) {
    const int64_t rows = in.shape[0], C = in.shape[1];
    dispatch_with_bf16(in.dtype, [&]<class T>() {
        const T* x = ptr<T>(in);
        parallel_range(rows, [&](int64_t b, int64_t e) {
            std::vector<int64_t> order(C);
            for (int64_t r = b; r < e; ++r) {
                const T* xr = x + r * C;
                std::iota(order.begin(), order.end(), 0);
                // Largest first; ties keep the lower index first, so results are deterministic.
                std::partial_sort(order.begin(), order.begin() + k, order.end(),
                                  [&](int64_t i, int64_t j) { return xr[i] > xr[j] || (xr[i] == xr[j] && i < j); });
                for (int64_t j = 0; j < k; ++j) {
                    ptr<T>(values)[r * k + j] = xr[order[j]];
                    ptr<int64_t>(indices)[r * k + j] = order[j];
                }
            }
        }, C);
    });
}

// The loss of each row and, when dlogits is given, its gradient from the same e^{x − m}: the
// exponentials go straight into the gradient row, which one multiply then scales.
void cpu_cross_entropy(const View& loss, const View& dlogits, const View& logits, const View& targets,
                       const View& row_scale, int64_t ignore_index) {
    check_logits_and_targets("cross_entropy", logits, targets);
    if (any_bf16({loss, dlogits, logits, row_scale}))
        return via_float32<2, 2>({logits, row_scale}, {loss, dlogits}, [&](auto& i, auto& o) {
            cpu_cross_entropy(o[0], o[1], i[0], targets, i[1], ignore_index);
        });
    const int64_t N = logits.shape[0], V = logits.shape[1];
    const int64_t* t = ptr<int64_t>(targets);
    check_indices("cross_entropy", t, N, V, ignore_index);
    dispatch(logits.dtype, [&]<class T>() {
        const T *x = ptr<T>(logits), *s = ptr<T>(row_scale);
        T *l = ptr<T>(loss), *d = ptr<T>(dlogits);
        parallel_range(N, [&](int64_t b, int64_t e) {
            std::vector<T> exps(d ? 0 : V);  // e^{x − m} of one row where no gradient row holds them
            for (int64_t i = b; i < e; ++i) {
                T* dr = d ? d + i * V : nullptr;  // (V)
                if (t[i] == ignore_index) {
                    l[i] = 0;
                    if (dr) std::fill(dr, dr + V, T(0));
                    continue;
                }
                const T* xr = x + i * V;
                const T m = vec::max_value(xr, V);
                const double z = vec::exp_shifted(dr ? dr : exps.data(), xr, m, V);  // (cpu/vector_math.h)
                l[i] = T(m + std::log(z) - xr[t[i]]);  // logsumexp − target logit
                if (!dr) continue;
                const T scale = T(s[i] / z);  // dr = e^{x − m} · s / z − s · onehot
                for (int64_t c = 0; c < V; ++c) dr[c] *= scale;
                dr[t[i]] -= s[i];
            }
        }, V);
    });
}

// Forward's attention probabilities are kept for backward up to 8 MiB a call: a (B, H, T, T)
// float32 buffer of B·H = 64 heads of T = 128, or 16 of 256 (cpu/attention.cpp).
constexpr int64_t kAttentionKeepBytes = int64_t(8) << 20;

const Backend cpu_backend{
    "cpu",
    cpu_allocate,
    cpu_deallocate,
    cpu_memcpy,
    cpu_memcpy,
    cpu_synchronize,
    cpu_fill,
    cpu_arange,
    cpu_copy,
    cpu_unary,
    cpu_binary,
    cpu_where,
    cpu_reduce,
    cpu_softmax,
    cpu_softmax_backward,
    cpu_gemm,
    cpu_index_select_rows,
    cpu_index_add_rows,
    cpu_gather_last,
    cpu_scatter_add_last,
    cpu_topk_last,
    cpu_cross_entropy,
    cpu_attention_forward,
    cpu_attention_backward,
    kAttentionKeepBytes,
    cpu_rms_norm_forward,
    cpu_rms_norm_backward,
    cpu_swiglu_forward,
    cpu_swiglu_backward,
    cpu_sigmoid_gate_forward,
    cpu_sigmoid_gate_backward,
    cpu_rope,
    cpu_adamw_step,
    cpu_sgd_step,
    cpu_sum_squares,
    cpu_scale_list,
};

}  // namespace

const Backend& cpu_backend_table() {
    // GEMMs thread through OpenMP (cpu_gemm), so OpenBLAS keeps to the thread that calls it, and
    // OpenMP runs no more threads than the address space holds OpenBLAS's buffers for.
    static const bool blas_set_up = (openblas_set_num_threads(1), fit_threads_to_address_space(), true);
    (void)blas_set_up;
    return cpu_backend;
}

}  // namespace gg

// cpu/fused.cpp — the CPU's fused kernels for a training step (tensor/backend.h): RMSNorm
// forward and backward, SwiGLU's gating product and RoPE's rotation each way, the AdamW and
// SGD updates, the sum of squares for the gradient norm and the scaling that clips it. Each
// is one pass over its data where a chain of ops would make several. A bfloat16 call runs the
// float32 kernel on float32 copies of its operands (cpu/float32.h), except the scaling,
// which reads each bfloat16 as a float in place; the optimiser steps take the float32 master
// weights of mixed-precision training only.
#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/backend.h"
#include "cpu/float32.h"
#include "cpu/parallel.h"
#include "cpu/vector_math.h"

namespace gg {

namespace {

template <class T>
T* ptr(const View& v) { return static_cast<T*>(v.data); }

// Σ_{j < n} term(j) in double, as four interleaved partial sums: one running sum makes every
// addition wait for the one before it (4 cycles each), four let the CPU overlap them. The
// order is fixed, so the sum never depends on how rows are split over threads.
template <class F>
double sum_of(int64_t n, F&& term) {
    double part[4] = {0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (int lane = 0; lane < 4; ++lane) part[lane] += term(j + lane);
    for (; j < n; ++j) part[0] += term(j);
    return (part[0] + part[1]) + (part[2] + part[3]);
}

template <class F>
void dispatch_floating(DType dtype, F&& f) {
    if (dtype == DType::f32) f.template operator()<float>();
    else if (dtype == DType::f64) f.template operator()<double>();
    else throw std::invalid_argument(std::string("cpu kernel: needs float32 or float64 operands, not ") + dtype_name(dtype));
}

}  // namespace

// y = x · rstd · w with rstd = 1/√(mean(x²) + ε), one row per work item; the mean in double.
void cpu_rms_norm_forward(const View& y, const View& rstd, const View& x, const View& weight, int64_t rows,
                          int64_t cols, double eps) {
    if (any_bf16({y, rstd, x, weight}))
        return via_float32<2, 2>({x, weight}, {y, rstd}, [&](auto& i, auto& o) {
            cpu_rms_norm_forward(o[0], o[1], i[0], i[1], rows, cols, eps);
        });
    dispatch_floating(x.dtype, [&]<class T>() {
        const T *xp = ptr<T>(x), *w = ptr<T>(weight);
        T *yp = ptr<T>(y), *r = ptr<T>(rstd);
        parallel_range(rows, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                const T* xr = xp + i * cols;
                const double sum_sq = sum_of(cols, [&](int64_t c) { return double(xr[c]) * double(xr[c]); });
                const T ri = T(1 / std::sqrt(sum_sq / double(cols) + eps));
                r[i] = ri;
                T* yr = yp + i * cols;
                for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * ri * w[c];
            }
        }, cols);
    });
}

// dx = rstd (w dy − x rstd² mean(w dy x));  dw = Σ_rows dy x rstd, each column summed over the
// rows in order by the thread that owns it, so dw does not depend on the thread count.
void cpu_rms_norm_backward(const View& dx, const View& dweight, const View& dy, const View& x, const View& weight,
                           const View& rstd, int64_t rows, int64_t cols) {
    if (any_bf16({dx, dweight, dy, x, weight, rstd}))
        return via_float32<4, 2>({dy, x, weight, rstd}, {dx, dweight}, [&](auto& i, auto& o) {
            cpu_rms_norm_backward(o[0], o[1], i[0], i[1], i[2], i[3], rows, cols);
        });
    dispatch_floating(x.dtype, [&]<class T>() {
        const T *xp = ptr<T>(x), *w = ptr<T>(weight), *g = ptr<T>(dy), *r = ptr<T>(rstd);
        T *dxp = ptr<T>(dx), *dw = ptr<T>(dweight);
        parallel_range(rows, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                const T *xr = xp + i * cols, *gr = g + i * cols;
                const double dot = sum_of(cols, [&](int64_t c) {  // Σ_c w_c dy_c x_c
                    return double(w[c]) * double(gr[c]) * double(xr[c]);
                });
                const T ri = r[i], correction = T(dot / double(cols)) * ri * ri;
                T* dxr = dxp + i * cols;
                for (int64_t c = 0; c < cols; ++c) dxr[c] = ri * (w[c] * gr[c] - xr[c] * correction);
            }
        }, cols);
        parallel_range(cols, [&](int64_t c0, int64_t c1) {
            std::vector<double> acc(c1 - c0, 0.0);
            for (int64_t i = 0; i < rows; ++i) {
                const T *xr = xp + i * cols, *gr = g + i * cols;
                const double ri = r[i];
                for (int64_t c = c0; c < c1; ++c) acc[c - c0] += double(gr[c]) * double(xr[c]) * ri;
            }
            for (int64_t c = c0; c < c1; ++c) dw[c] = T(acc[c - c0]);
        }, rows);
    });
}

namespace {

// Calls f(j, σ(a_j)) for j in [begin, end): σ is taken a block at a time at the vector width
// (cpu/vector_math.h) into a buffer that stays in L1, then f reads it.
template <class T, class F>
void with_sigmoid(const T* a, int64_t begin, int64_t end, F&& f) {
    constexpr int64_t kBlock = 512;
    T sig[kBlock];
    for (int64_t j0 = begin; j0 < end; j0 += kBlock) {
        const int64_t n = std::min(kBlock, end - j0);
        vec::sigmoid(sig, a + j0, n);
        for (int64_t i = 0; i < n; ++i) f(j0 + i, sig[i]);
    }
}

// The gating products below take every operand as (rows, C) with contiguous channels, its
// rows at its own stride: the halves of one (rows, 2C) product (nn/layers.h's SwiGLU), or its
// slices, are read and written in place. Row r of operand v:
template <class T>
T* row(const View& v, int64_t r) {
    return ptr<T>(v) + r * (v.ndim > 1 ? v.strides[v.ndim - 2] : 0);
}
// Calls f(r, C) for each row r of the (rows, C) operand v.
template <class F>
void for_each_row(const View& v, F&& f) {
    const int64_t C = v.ndim ? v.shape[v.ndim - 1] : 1, rows = C ? v.numel() / C : 0;
    parallel_range(rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) f(r, C);
    }, C);
}

}  // namespace

// y = a σ(a) b, element by element; backward from the same σ(a).
void cpu_swiglu_forward(const View& y, const View& a, const View& b) {
    if (any_bf16({y, a, b}))
        return via_float32<2, 1>({a, b}, {y}, [&](auto& i, auto& o) { cpu_swiglu_forward(o[0], i[0], i[1]); });
    dispatch_floating(a.dtype, [&]<class T>() {
        for_each_row(a, [&](int64_t r, int64_t C) {
            const T *ap = row<const T>(a, r), *bp = row<const T>(b, r);
            T* yp = row<T>(y, r);
            with_sigmoid(ap, 0, C, [=](int64_t j, T sig) { yp[j] = ap[j] * sig * bp[j]; });
        });
    });
}

void cpu_swiglu_backward(const View& da, const View& db, const View& dy, const View& a, const View& b) {
    if (any_bf16({da, db, dy, a, b}))
        return via_float32<3, 2>({dy, a, b}, {da, db}, [&](auto& i, auto& o) {
            cpu_swiglu_backward(o[0], o[1], i[0], i[1], i[2]);
        });
    dispatch_floating(a.dtype, [&]<class T>() {
        for_each_row(a, [&](int64_t r, int64_t C) {
            const T *ap = row<const T>(a, r), *bp = row<const T>(b, r), *g = row<const T>(dy, r);
            T *dap = row<T>(da, r), *dbp = row<T>(db, r);
            with_sigmoid(ap, 0, C, [=](int64_t j, T sig) {
                dap[j] = g[j] * bp[j] * sig * (1 + ap[j] * (1 - sig));  // d silu/da = σ (1 + a (1 − σ))
                dbp[j] = g[j] * ap[j] * sig;
            });
        });
    });
}

// y = σ(s) a, element by element (the G1 gate); backward from the same σ(s).
void cpu_sigmoid_gate_forward(const View& y, const View& s, const View& a) {
    if (any_bf16({y, s, a}))
        return via_float32<2, 1>({s, a}, {y}, [&](auto& i, auto& o) { cpu_sigmoid_gate_forward(o[0], i[0], i[1]); });
    dispatch_floating(s.dtype, [&]<class T>() {
        for_each_row(s, [&](int64_t r, int64_t C) {
            const T *sp = row<const T>(s, r), *ap = row<const T>(a, r);
            T* yp = row<T>(y, r);
            with_sigmoid(sp, 0, C, [=](int64_t j, T sig) { yp[j] = sig * ap[j]; });
        });
    });
}

void cpu_sigmoid_gate_backward(const View& ds, const View& da, const View& dy, const View& s, const View& a) {
    if (any_bf16({ds, da, dy, s, a}))
        return via_float32<3, 2>({dy, s, a}, {ds, da}, [&](auto& i, auto& o) {
            cpu_sigmoid_gate_backward(o[0], o[1], i[0], i[1], i[2]);
        });
    dispatch_floating(s.dtype, [&]<class T>() {
        for_each_row(s, [&](int64_t r, int64_t C) {
            const T *sp = row<const T>(s, r), *ap = row<const T>(a, r), *g = row<const T>(dy, r);
            T *dsp = row<T>(ds, r), *dap = row<T>(da, r);
            with_sigmoid(sp, 0, C, [=](int64_t j, T sig) {
                dsp[j] = g[j] * ap[j] * sig * (1 - sig);  // dσ/ds = σ (1 − σ)
                dap[j] = g[j] * sig;
            });
        });
    });
}

namespace {

// Where RoPE reads and writes: x and out as (B, H, T, D) through their strides, and the
// (T, D) tables.
template <class E>
struct RopeRows {
    const E *x, *cos, *sin;
    E* out;
    int64_t H, T, D;
    int64_t x_strides[3], out_strides[3];  // of b, h, t
    E sign;                                // −1 for the transpose (backward)
};

// Rows [begin, end) of the B·H·T (b, h, t) rows, D channels each, x's at channel_stride.
template <class E, class Stride>
[[gnu::always_inline]] inline void rotate_rows(const RopeRows<E>& a, int64_t begin, int64_t end, Stride channel_stride) {
    const int64_t half = a.D / 2;
    // The first row's (b, h, t), then counted on: three divisions a row cost more than
    // rotating its channels.
    int64_t b = begin / (a.H * a.T), h = begin / a.T % a.H, t = begin % a.T;
    for (int64_t row = begin; row < end; ++row) {
        const E* xr = a.x + b * a.x_strides[0] + h * a.x_strides[1] + t * a.x_strides[2];  // (D)
        const E *c = a.cos + t * a.D, *s = a.sin + t * a.D;                                  // (D) each
        E* o = a.out + b * a.out_strides[0] + h * a.out_strides[1] + t * a.out_strides[2];  // (D)
        // out is a fresh tensor (autograd/nn_ops.cpp), never x: without this GCC keeps the
        // loop scalar rather than check at run time that o does not overlap xr.
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#else
#pragma GCC ivdep
#endif
        for (int64_t i = 0; i < half; ++i) {
            const E x1 = xr[i * channel_stride], x2 = xr[(i + half) * channel_stride];
            o[i] = x1 * c[i] - a.sign * x2 * s[i];
            o[i + half] = x2 * c[i + half] + a.sign * x1 * s[i + half];
        }
        if (++t == a.T) {
            t = 0;
            if (++h == a.H) h = 0, ++b;
        }
    }
}

// The float32 rows with contiguous channels, at the CPU's widest vectors, as AdamW's update
// below: compiled for AVX-512, AVX2 and the baseline, one picked as the program loads. The
// build forbids fused multiply-adds (meson.build), so each form gives the same bits.
#if defined(__x86_64__)
[[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
void rotate_rows_f32(const RopeRows<float>& a, int64_t begin, int64_t end) {
    rotate_rows(a, begin, end, std::integral_constant<int64_t, 1>{});
}

}  // namespace

// One (b, h, t) row of D channels per work item; x is read and out written through their
// strides, so the (B, H, T, D) view of a (B, T, H·D) projection needs no copy either way. Its
// channels are usually contiguous: a stride of 1 known at compile time lets the compiler
// vectorise the row.
void cpu_rope(const View& out, const View& x, const View& cos, const View& sin, bool transpose) {
    if (any_bf16({out, x, cos, sin}))
        return via_float32<3, 1>({x, cos, sin}, {out}, [&](auto& i, auto& o) {
            cpu_rope(o[0], i[0], i[1], i[2], transpose);
        });
    dispatch_floating(x.dtype, [&]<class E>() {
        const RopeRows<E> a{ptr<E>(x), ptr<E>(cos), ptr<E>(sin), ptr<E>(out), x.shape[1], x.shape[2], x.shape[3],
                            {x.strides[0], x.strides[1], x.strides[2]},
                            {out.strides[0], out.strides[1], out.strides[2]}, transpose ? E(-1) : E(1)};
        parallel_range(x.shape[0] * a.H * a.T, [&](int64_t begin, int64_t end) {
            if constexpr (std::is_same_v<E, float>)
                if (x.strides[3] == 1) return rotate_rows_f32(a, begin, end);
            if (x.strides[3] == 1) rotate_rows(a, begin, end, std::integral_constant<int64_t, 1>{});
            else rotate_rows(a, begin, end, x.strides[3]);
        }, a.D);
    });
}

namespace {

// One AdamW step's scalars, rounded to T once, as torch does; the bias corrections fold into
// two of them: m̂ / (√v̂ + ε) = (m / bc1) / (√v / √bc2 + ε).
template <class T>
struct AdamWScalars {
    T decay, step_size, bc2_sqrt, b1, b2, one_minus_b1, one_minus_b2, eps;
};

// Elements [begin, end) of one parameter.
template <class T>
[[gnu::always_inline]] inline void adamw_update(const AdamWScalars<T>& k, T* p, T* m, T* v, const T* g,
                                                int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
        p[j] *= k.decay;                                        // p *= 1 − lr λ (decoupled decay)
        m[j] = k.b1 * m[j] + k.one_minus_b1 * g[j];             // m = β1 m + (1 − β1) g
        v[j] = k.b2 * v[j] + k.one_minus_b2 * g[j] * g[j];      // v = β2 v + (1 − β2) g²
        const T denom = std::sqrt(v[j]) / k.bc2_sqrt + k.eps;   // √v̂ + ε
        p[j] -= k.step_size * m[j] / denom;                     // p −= lr m̂ / (√v̂ + ε)
    }
}

// The float32 update at the CPU's widest vectors: the library is built for any x86-64 (4
// floats a vector), so GCC compiles this loop three times, for AVX-512, AVX2 and that
// baseline, and picks one as the program loads (target_clones). A square root and a division
// per element make it one of a step's slowest loops at 4 floats.
#if defined(__x86_64__)
[[gnu::target_clones("avx512f", "avx2", "default")]]
#endif
void adamw_update_f32(const AdamWScalars<float>& k, float* p, float* m, float* v, const float* g, int64_t begin,
                      int64_t end) {
    adamw_update(k, p, m, v, g, begin, end);
}

void adamw_one(const AdamWTensors& a) {
    const AdamWStep& s = a.step;
    dispatch_floating(a.param.dtype, [&]<class T>() {
        const AdamWScalars<T> k{T(1 - s.lr * s.weight_decay), T(s.lr / s.bias_correction1),
                                T(std::sqrt(s.bias_correction2)), T(s.beta1), T(s.beta2), T(1 - s.beta1),
                                T(1 - s.beta2), T(s.eps)};
        T *p = ptr<T>(a.param), *m = ptr<T>(a.exp_avg), *v = ptr<T>(a.exp_avg_sq);
        const T* g = ptr<T>(a.grad);
        parallel_range(a.param.numel(), [&](int64_t begin, int64_t end) {
            if constexpr (std::is_same_v<T, float>) adamw_update_f32(k, p, m, v, g, begin, end);
            else adamw_update(k, p, m, v, g, begin, end);
        });
    });
}

}  // namespace

// Parameter by parameter: on the CPU a call per tensor costs nothing worth fusing away.
void cpu_adamw_step(std::span<const AdamWTensors> params) {
    for (const AdamWTensors& a : params) adamw_one(a);
}

void cpu_sgd_step(const SGDStep& s, const View& param, const View& grad, const View& momentum_buffer) {
    dispatch_floating(param.dtype, [&]<class T>() {
        T* p = ptr<T>(param);
        const T* g = ptr<T>(grad);
        T* buf = ptr<T>(momentum_buffer);
        const T lr = T(s.lr), mu = T(s.momentum), wd = T(s.weight_decay);
        parallel_range(param.numel(), [=](int64_t begin, int64_t end) {
            for (int64_t j = begin; j < end; ++j) {
                T d = g[j] + wd * p[j];                 // d = g + λ p (L2 decay, through the gradient)
                if (buf) d = buf[j] = mu * buf[j] + d;  // buf = μ buf + d
                p[j] -= lr * d;
            }
        });
    });
}

// In one thread and in order, tensor after tensor: the norm, and so whether to clip, never
// depends on threads.
void cpu_sum_squares(const View& acc, std::span<const View> xs) {
    for (const View& x : xs) {
        if (x.dtype == DType::bf16) {
            via_float32<1, 0>({x}, {}, [&](auto& i, auto&) { cpu_sum_squares(acc, {&i[0], 1}); });
            continue;
        }
        dispatch_floating(x.dtype, [&]<class T>() {
            const T* xp = ptr<T>(x);
            *ptr<double>(acc) += sum_of(x.numel(), [&](int64_t j) { return double(xp[j]) * double(xp[j]); });
        });
    }
}

// x *= factor in the type each x computes in (float for bf16, rounded once as it is stored).
void cpu_scale_list(double factor, std::span<const View> xs) {
    check_contiguous_floats("scale_list", xs);
    for (const View& x : xs) {
        const auto scale = [&]<class T, class C>() {
            T* xp = ptr<T>(x);
            const C f = C(factor);
            parallel_range(x.numel(), [=](int64_t begin, int64_t end) {
                for (int64_t j = begin; j < end; ++j) xp[j] = T(C(xp[j]) * f);
            });
        };
        if (x.dtype == DType::bf16) scale.template operator()<bfloat16, float>();
        else dispatch_floating(x.dtype, [&]<class T>() { scale.template operator()<T, T>(); });
    }
}

}  // namespace gg

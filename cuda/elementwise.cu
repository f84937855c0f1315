// elementwise.cu — fill, arange, copy, unary, binary and where (tensor/backend.h): one
// output element at a time, over strided N-d views of any dtype (f32, f64, i64, bf16).
//
//   fill    out_i = value                 arange  out_i = start + i · step
//   copy    out_i = (O) in_i              (any pair of dtypes, any strides on both sides)
//   unary   out_i = f(in_i)               f: neg exp log sqrt rsqrt tanh sigmoid relu silu
//                                            gelu erf abs pow
//   binary  out_i = a_i ∘ b_i             ∘: + − × ÷ max min, and == != < <= > >= giving 1 or 0
//                                            in the operands' dtype
//   where   out_i = cond_i ≠ 0 ? a_i : b_i
//
// Operands arrive already broadcast to out's shape (a broadcast dim has stride 0). Each
// formula is the CPU's (cpu/backend.cpp) in the same types, so on the emulator, whose
// maths library is the CPU's, results are bit for bit the CPU's, and on a GPU they differ
// by the device maths library's few ulps. For example f32 sigmoid is 1 / (1 + expf(−x)) in
// float, while gelu, as on the CPU, is 0.5 x (1 + erf(x / √2)) in double for every dtype.
// bf16 is computed as f32 is, from its value widened to float, and rounded once on the way
// out (a bf16 result is the f32 formula's result rounded to bf16); a copy from f64 rounds to
// bf16 in one step (bf16_from_double), never through a float.
//
// Threads and blocks: 256 threads a block and a grid-stride loop. Thread t of the G threads
// of the grid handles elements t, t + G, t + 2G, ..., so a grid of at most kMaxBlocks blocks
// covers any n (past 2³¹ too), and the 32 lanes of a warp touch 32 neighbouring elements.
// Where element i lives in operand k:
//   dense path    every operand contiguous: at offset i. When every pointer is 16-byte
//                 aligned, thread t takes the W-element packs (cuda/packs.h) starting at
//                 W·t, W·(t + G), ...: one 16-byte load per input and one store per pack,
//                 W = 4 for f32 and 2 for f64 and int64 (the widest operand's, for a copy
//                 between dtypes). The last n mod W elements go one to a thread, to the
//                 grid's first threads. A misaligned view takes W = 1: the same kernel,
//                 one element per access.
//   strided path  i is split into an index (i_0, ..., i_{r−1}) of out's shape, innermost
//                 dim fastest, and operand k's element is at Σ_d i_d · stride_k[d].
// First the host merges the dims that every operand walks as one (collapse()): an expanded
// bias (B, T, C) with strides (0, 0, 1) and a dense out become 2 dims (B·T, C); a
// transposed copy keeps the 2 dims that really jump. Dense operands end as one dim of
// stride 1, which is how the dense path is recognised.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/packs.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // ×256 threads: several waves on any GPU; the loop does the rest

// The dims of one element-wise call after collapse(); operand 0 is the output.
template <int N>
struct Geometry {
    int ndim = 0;
    int64_t shape[kMaxDims] = {};
    int64_t strides[N][kMaxDims] = {};

    bool dense() const {
        if (ndim == 0) return true;  // one element
        if (ndim > 1) return false;
        for (int k = 0; k < N; ++k)
            if (strides[k][0] != 1) return false;
        return true;
    }
};

// Drops dims of size 1 and merges a dim into the one outside it when, for every operand,
// a step of the outer dim is a whole sweep of the inner one: the same elements in the same
// order, with fewer index divisions per element.
template <int N>
Geometry<N> collapse(const std::array<const View*, N>& views) {
    const View& out = *views[0];
    Geometry<N> g;
    for (int d = 0; d < out.ndim; ++d) {
        if (out.shape[d] == 1) continue;
        bool merges = g.ndim > 0;
        for (int k = 0; k < N && merges; ++k)
            merges = g.strides[k][g.ndim - 1] == views[k]->strides[d] * out.shape[d];
        if (merges) {
            g.shape[g.ndim - 1] *= out.shape[d];
            for (int k = 0; k < N; ++k) g.strides[k][g.ndim - 1] = views[k]->strides[d];
        } else {
            g.shape[g.ndim] = out.shape[d];
            for (int k = 0; k < N; ++k) g.strides[k][g.ndim] = views[k]->strides[d];
            ++g.ndim;
        }
    }
    return g;
}

// out_i = f(i, in_i...) for i < n, every operand contiguous: W-element packs, then the last
// n mod W elements one to a thread.
template <int W, class F, class O, class... I>
__global__ void elementwise_dense(int64_t n, F f, O* out, const I*... in) {
    for_each_pack<W>(n, [&]<int V>(int64_t i) { map_pack<V>(i, f, out, in...); });
}

// out[off[0]] = f(i, in_k[off[k + 1]]...): operand k's element at its own offset.
template <class F, class O, class... I, size_t... K>
__device__ void write_at(int64_t i, const int64_t* off, std::index_sequence<K...>, F f, O* out, const I*... in) {
    out[off[0]] = f(i, in[off[K + 1]]...);
}

// out_i = f(i, in_i...) for the n elements of g.shape, each at its own offset in every operand.
template <class F, class O, class... I>
__global__ void elementwise_strided(Geometry<1 + sizeof...(I)> g, int64_t n, F f, O* out, const I*... in) {
    constexpr int N = 1 + sizeof...(I);
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        int64_t off[N] = {};
        int64_t rest = i;
        for (int d = g.ndim - 1; d >= 0; --d) {
            const int64_t index = rest % g.shape[d];
            rest /= g.shape[d];
            for (int k = 0; k < N; ++k) off[k] += index * g.strides[k][d];
        }
        write_at(i, off, std::index_sequence_for<I...>{}, f, out, in...);
    }
}

template <class T>
T* ptr(const View& v) {
    return static_cast<T*>(v.data);
}

// One View per input type.
template <class, class V>
using ViewFor = V;

// out_i = f(i, in_i...) over every element of out's shape, with O and I... the element types;
// launches nothing for an empty tensor.
template <class O, class... I, class F>
void for_each_element(const char* name, F f, const View& out, const ViewFor<I, View>&... in) {
    const int64_t n = out.numel();
    if (n == 0) return;
    const Geometry<1 + sizeof...(I)> g = collapse<1 + sizeof...(I)>({&out, &in...});
    const auto grid = [](int64_t threads) {
        return dim3(unsigned(std::min((threads + kThreads - 1) / kThreads, kMaxBlocks)));
    };
    if (!g.dense()) {
        launch(name, elementwise_strided<F, O, I...>, grid(n), dim3(kThreads), 0, g, n, f, ptr<O>(out),
               ptr<const I>(in)...);
        return;
    }
    by_pack_width<O, I...>(aligned16(ptr<O>(out), ptr<I>(in)...), [&]<int W>() {
        launch(name, elementwise_dense<W, F, O, I...>, grid((n + W - 1) / W), dim3(kThreads), 0, n, f, ptr<O>(out),
               ptr<const I>(in)...);
    });
}

// The type the CPU's std:: maths call computes in for an element of type T: float for
// float; double for double, and for int64 (std::exp of an integer is exp of a double).
// double for int64 (std::exp of an integer is exp of a double). bfloat16 computes as float.
template <class T>
using MathType = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, bfloat16>, float, double>;

template <class T>
__device__ T unary_value(UnaryOp op, T x, double exponent) {
    using M = MathType<T>;
    const M m = M(x);
    switch (op) {
        case UnaryOp::neg: return T(-x);
        case UnaryOp::exp: return T(std::exp(m));
        case UnaryOp::log: return T(std::log(m));
        case UnaryOp::sqrt: return T(std::sqrt(m));
        case UnaryOp::rsqrt: return T(1 / std::sqrt(m));
        case UnaryOp::tanh: return T(std::tanh(m));
        case UnaryOp::sigmoid: return T(1 / (1 + std::exp(-m)));
        case UnaryOp::relu: return x > 0 ? x : T(0);
        case UnaryOp::silu: return T(m / (1 + std::exp(-m)));
        // Exact GELU, x Φ(x), in double: the CPU's constants 0.5 and 1/√2 are doubles.
        case UnaryOp::gelu: return T(0.5 * double(x) * (1 + std::erf(double(x) * M_SQRT1_2)));
        case UnaryOp::erf: return T(std::erf(m));
        case UnaryOp::abs: return x < 0 ? T(-x) : x;
        case UnaryOp::pow: {
            const double r = std::pow(double(x), exponent);  // in double: the exponent is one
            if constexpr (std::is_integral_v<T>) {
                // The GPU's pow is not correctly rounded (9^0.5 gives 2.9999999999999996), and
                // truncation would make that 2: a result within 1e-12 of an integer is that integer,
                // as on the CPU.
                const double n = std::rint(r);
                return T(std::fabs(r - n) <= 1e-12 * std::fmax(1.0, std::fabs(n)) ? n : r);
            }
            return T(r);
        }
    }
    return x;  // not reached: every op has its case
}

template <class T>
__device__ T binary_value(BinaryOp op, T x, T y) {
    switch (op) {
        case BinaryOp::add: return T(x + y);
        case BinaryOp::sub: return T(x - y);
        case BinaryOp::mul: return T(x * y);
        case BinaryOp::div: return T(x / y);
        case BinaryOp::maximum: return x > y ? x : y;
        case BinaryOp::minimum: return x < y ? x : y;
        case BinaryOp::eq: return T(x == y);
        case BinaryOp::ne: return T(x != y);
        case BinaryOp::lt: return T(x < y);
        case BinaryOp::le: return T(x <= y);
        case BinaryOp::gt: return T(x > y);
        case BinaryOp::ge: return T(x >= y);
    }
    return x;  // not reached: every op has its case
}

// A double rounded to bf16 in one step. Through a float it would be rounded twice, and a value
// just above a bf16 tie that the float rounding puts exactly on the tie would then go to even,
// which may be the wrong way. Such a float is moved one float ulp back toward x, off the tie.
__host__ __device__ inline bfloat16 bf16_from_double(double x) {
    const float f = float(x);
    uint32_t bits = float_to_bits(f);
    const auto magnitude = [](double v) { return v < 0 ? -v : v; };
    if ((bits & 0xffffu) == 0x8000u && double(f) != x) bits = magnitude(x) > magnitude(double(f)) ? bits + 1 : bits - 1;
    return bfloat16(bits_to_float(bits));
}

// static_cast, except that a double becomes a bf16 in one rounding.
template <class O, class I>
__host__ __device__ O convert(I x) {
    if constexpr (std::is_same_v<O, bfloat16> && std::is_same_v<I, double>) return bf16_from_double(x);
    else return static_cast<O>(x);
}

template <class O, class I>
struct Convert {
    __device__ O operator()(int64_t, I x) const { return convert<O>(x); }
};

// The value of each entry's element i from its inputs' elements i.

template <class T>
struct Fill {
    T value;
    __device__ T operator()(int64_t) const { return value; }
};

template <class T>
struct Arange {
    double start, step;
    __device__ T operator()(int64_t i) const { return convert<T>(start + i * step); }
};

template <class T>
struct Unary {
    UnaryOp op;
    double exponent;  // pow's; unused by the others
    __device__ T operator()(int64_t, T x) const { return unary_value(op, x, exponent); }
};

template <class T>
struct Binary {
    BinaryOp op;
    __device__ T operator()(int64_t, T x, T y) const { return binary_value(op, x, y); }
};

template <class T>
struct Where {
    __device__ T operator()(int64_t, T cond, T a, T b) const { return cond != T(0) ? a : b; }
};

}  // namespace

void fill(const View& out, double value) {
    dispatch_any(out.dtype, [&]<class T>() { for_each_element<T>("fill", Fill<T>{convert<T>(value)}, out); });
}

void arange(const View& out, double start, double step) {
    dispatch_any(out.dtype, [&]<class T>() { for_each_element<T>("arange", Arange<T>{start, step}, out); });
}

void copy(const View& out, const View& in) {
    dispatch_any(out.dtype, [&]<class O>() {
        dispatch_any(in.dtype, [&]<class I>() { for_each_element<O, I>("copy", Convert<O, I>{}, out, in); });
    });
}

void unary(UnaryOp op, const View& out, const View& in, double exponent) {
    dispatch_any(out.dtype, [&]<class T>() { for_each_element<T, T>("unary", Unary<T>{op, exponent}, out, in); });
}

void binary(BinaryOp op, const View& out, const View& a, const View& b) {
    dispatch_any(out.dtype, [&]<class T>() { for_each_element<T, T, T>("binary", Binary<T>{op}, out, a, b); });
}

void where(const View& out, const View& cond, const View& a, const View& b) {
    dispatch_any(out.dtype, [&]<class T>() { for_each_element<T, T, T, T>("where", Where<T>{}, out, cond, a, b); });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

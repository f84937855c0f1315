// elementwise.cu — fill, arange, copy, unary, binary and where (tensor/backend.h): one
// output element at a time, over strided N-d views of any dtype (f32, f64, i64).
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
// formula is the CPU's (tensor/cpu_backend.cpp) in the same types, so on the emulator, whose
// maths library is the CPU's, results are bit for bit the CPU's, and on a GPU they differ
// by the device maths library's few ulps. For example f32 sigmoid is 1 / (1 + expf(−x)) in
// float, while gelu, as on the CPU, is 0.5 x (1 + erf(x / √2)) in double for every dtype.
//
// Threads and blocks: 256 threads a block and a grid-stride loop. Thread t of the G threads
// of the grid handles elements t, t + G, t + 2G, ..., so a grid of at most kMaxBlocks blocks
// covers any n (past 2³¹ too), and the 32 lanes of a warp touch 32 neighbouring elements.
// Where element i lives in operand k:
//   dense path    every operand contiguous: at offset i;
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

#include "cuda/kernels.h"

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

// Element offsets of one element in each operand.
template <int N>
struct Offsets {
    int64_t at[N];
};

// n elements, each at offset i in every operand.
template <int N, class Op>
__global__ void elementwise_dense(int64_t n, Op op) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        Offsets<N> off;
        for (int k = 0; k < N; ++k) off.at[k] = i;
        op(i, off);
    }
}

// n elements of g.shape, each at its own offset in every operand.
template <int N, class Op>
__global__ void elementwise_strided(Geometry<N> g, int64_t n, Op op) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        Offsets<N> off{};
        int64_t rest = i;
        for (int d = g.ndim - 1; d >= 0; --d) {
            const int64_t index = rest % g.shape[d];
            rest /= g.shape[d];
            for (int k = 0; k < N; ++k) off.at[k] += index * g.strides[k][d];
        }
        op(i, off);
    }
}

// Runs op on every element of views[0]'s shape; launches nothing for an empty tensor.
template <int N, class Op>
void for_each_element(const char* name, const std::array<const View*, N>& views, const Op& op) {
    const int64_t n = views[0]->numel();
    if (n == 0) return;
    const Geometry<N> g = collapse<N>(views);
    const dim3 grid(unsigned(std::min((n + kThreads - 1) / kThreads, kMaxBlocks))), block(kThreads);
    if (g.dense())
        launch(name, elementwise_dense<N, Op>, grid, block, 0, n, op);
    else
        launch(name, elementwise_strided<N, Op>, grid, block, 0, g, n, op);
}

template <class T>
T* ptr(const View& v) {
    return static_cast<T*>(v.data);
}

// The type the CPU's std:: maths call computes in for an element of type T: float for
// float; double for double, and for int64 (std::exp of an integer is exp of a double).
template <class T>
using MathType = std::conditional_t<std::is_same_v<T, float>, float, double>;

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
        case UnaryOp::pow: return T(std::pow(double(x), exponent));  // in double: the exponent is one
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

// The per-element work of each entry: op(i, offsets) writes element i.

template <class T>
struct FillOp {
    T* out;  // (n)
    T value;
    __device__ void operator()(int64_t, const Offsets<1>& off) const { out[off.at[0]] = value; }
};

template <class T>
struct ArangeOp {
    T* out;  // (n)
    double start, step;
    __device__ void operator()(int64_t i, const Offsets<1>& off) const { out[off.at[0]] = T(start + i * step); }
};

template <class O, class I>
struct CopyOp {
    O* out;       // out's shape, out's strides
    const I* in;  // out's shape, in's strides
    __device__ void operator()(int64_t, const Offsets<2>& off) const { out[off.at[0]] = static_cast<O>(in[off.at[1]]); }
};

template <class T>
struct UnaryElementOp {
    UnaryOp op;
    double exponent;  // pow's; unused by the others
    T* out;
    const T* in;
    __device__ void operator()(int64_t, const Offsets<2>& off) const {
        out[off.at[0]] = unary_value(op, in[off.at[1]], exponent);
    }
};

template <class T>
struct BinaryElementOp {
    BinaryOp op;
    T* out;
    const T *a, *b;
    __device__ void operator()(int64_t, const Offsets<3>& off) const {
        out[off.at[0]] = binary_value(op, a[off.at[1]], b[off.at[2]]);
    }
};

template <class T>
struct WhereOp {
    T* out;
    const T *cond, *a, *b;
    __device__ void operator()(int64_t, const Offsets<4>& off) const {
        out[off.at[0]] = cond[off.at[1]] != T(0) ? a[off.at[2]] : b[off.at[3]];
    }
};

}  // namespace

void fill(const View& out, double value) {
    dispatch(out.dtype, [&]<class T>() { for_each_element<1>("fill", {&out}, FillOp<T>{ptr<T>(out), T(value)}); });
}

void arange(const View& out, double start, double step) {
    dispatch(out.dtype, [&]<class T>() {
        for_each_element<1>("arange", {&out}, ArangeOp<T>{ptr<T>(out), start, step});
    });
}

void copy(const View& out, const View& in) {
    dispatch(out.dtype, [&]<class O>() {
        dispatch(in.dtype, [&]<class I>() {
            for_each_element<2>("copy", {&out, &in}, CopyOp<O, I>{ptr<O>(out), ptr<I>(in)});
        });
    });
}

void unary(UnaryOp op, const View& out, const View& in, double exponent) {
    dispatch(out.dtype, [&]<class T>() {
        for_each_element<2>("unary", {&out, &in}, UnaryElementOp<T>{op, exponent, ptr<T>(out), ptr<T>(in)});
    });
}

void binary(BinaryOp op, const View& out, const View& a, const View& b) {
    dispatch(out.dtype, [&]<class T>() {
        for_each_element<3>("binary", {&out, &a, &b}, BinaryElementOp<T>{op, ptr<T>(out), ptr<T>(a), ptr<T>(b)});
    });
}

void where(const View& out, const View& cond, const View& a, const View& b) {
    dispatch(out.dtype, [&]<class T>() {
        for_each_element<4>("where", {&out, &cond, &a, &b},
                            WhereOp<T>{ptr<T>(out), ptr<T>(cond), ptr<T>(a), ptr<T>(b)});
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

// swiglu.cu — SwiGLU's gating product over a, b (rows, C) (tensor/backend.h):
//
//   forward:   y = silu(a) · b = a σ(a) b
//   backward:  da = dy · b · σ(a) (1 + a (1 − σ(a))),   db = dy · a σ(a)
//
// and its sibling, the G1 gate of gated attention over s, a (rows, C):
//
//   forward:   y = σ(s) · a
//   backward:  ds = dy · a · σ(s) (1 − σ(s)),   da = dy · σ(s)
//
// Every operand is (rows, C) with contiguous channels, and its rows may lie apart: the halves
// of one (rows, 2C) product (nn/layers.h's SwiGLU), or its slices, are read and written in place.
// One element per thread in a grid-stride loop of 256-thread blocks, in the CPU's formulas
// and types (cpu/fused.cpp): σ(a) = 1 / (1 + exp(−a)) in T, so the emulator matches
// the CPU bit for bit and a GPU within its maths library's few ulps. bf16 is loaded as float,
// computed as f32 is, and rounded once when stored.
#include <algorithm>
#include <cmath>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;

// An operand (rows, C) whose rows lie ld apart: element i of the row-major order is at(i). T is
// const for an input.
template <class T>
struct Rows {
    T* data;
    int64_t C, ld;
    __device__ T& at(int64_t i) const { return data[i / C * ld + i % C]; }
};
template <class T>
Rows<T> rows(const View& v) {
    const int64_t C = v.ndim ? v.shape[v.ndim - 1] : 1;
    return {static_cast<T*>(v.data), C, v.ndim > 1 ? v.strides[v.ndim - 2] : C};
}

// a, b, y: (n) = (rows, C), each at its row stride.
template <class T>
__global__ void swiglu_forward_elements(Rows<T> y, Rows<const T> a, Rows<const T> b, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const compute_t<T> ai = a.at(i), bi = b.at(i);
        y.at(i) = T(ai / (1 + std::exp(-ai)) * bi);
    }
}

// dy, a, b, da, db: (n) = (rows, C), each at its row stride.
template <class T>
__global__ void swiglu_backward_elements(Rows<T> da, Rows<T> db, Rows<const T> dy, Rows<const T> a,
                                         Rows<const T> b, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        using C = compute_t<T>;
        const C ai = a.at(i), bi = b.at(i), dyi = dy.at(i);
        const C sig = 1 / (1 + std::exp(-ai));
        da.at(i) = T(dyi * bi * sig * (1 + ai * (1 - sig)));
        db.at(i) = T(dyi * ai * sig);
    }
}

// s, a, y: (n) = (rows, C), each at its row stride.
template <class T>
__global__ void sigmoid_gate_forward_elements(Rows<T> y, Rows<const T> s, Rows<const T> a, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const compute_t<T> si = s.at(i), ai = a.at(i);
        y.at(i) = T(1 / (1 + std::exp(-si)) * ai);
    }
}

// dy, s, a, ds, da: (n) = (rows, C), each at its row stride.
template <class T>
__global__ void sigmoid_gate_backward_elements(Rows<T> ds, Rows<T> da, Rows<const T> dy, Rows<const T> s,
                                               Rows<const T> a, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        using C = compute_t<T>;
        const C si = s.at(i), ai = a.at(i), dyi = dy.at(i);
        const C sig = 1 / (1 + std::exp(-si));
        ds.at(i) = T(dyi * ai * sig * (1 - sig));
        da.at(i) = T(dyi * sig);
    }
}

}  // namespace

void swiglu_forward(const View& y, const View& a, const View& b) {
    const int64_t n = a.numel();
    if (n == 0) return;
    dispatch_floating_bf16(a.dtype, [&]<class T>() {
        launch("swiglu_forward_elements", swiglu_forward_elements<T>, grid_covering(n, kThreads), dim3(kThreads), 0,
               rows<T>(y), rows<const T>(a), rows<const T>(b), n);
    });
}

void swiglu_backward(const View& da, const View& db, const View& dy, const View& a, const View& b) {
    const int64_t n = a.numel();
    if (n == 0) return;
    dispatch_floating_bf16(a.dtype, [&]<class T>() {
        launch("swiglu_backward_elements", swiglu_backward_elements<T>, grid_covering(n, kThreads), dim3(kThreads), 0,
               rows<T>(da), rows<T>(db), rows<const T>(dy), rows<const T>(a), rows<const T>(b), n);
    });
}

void sigmoid_gate_forward(const View& y, const View& s, const View& a) {
    const int64_t n = s.numel();
    if (n == 0) return;
    dispatch_floating_bf16(s.dtype, [&]<class T>() {
        launch("sigmoid_gate_forward_elements", sigmoid_gate_forward_elements<T>, grid_covering(n, kThreads),
               dim3(kThreads), 0, rows<T>(y), rows<const T>(s), rows<const T>(a), n);
    });
}

void sigmoid_gate_backward(const View& ds, const View& da, const View& dy, const View& s, const View& a) {
    const int64_t n = s.numel();
    if (n == 0) return;
    dispatch_floating_bf16(s.dtype, [&]<class T>() {
        launch("sigmoid_gate_backward_elements", sigmoid_gate_backward_elements<T>, grid_covering(n, kThreads),
               dim3(kThreads), 0, rows<T>(ds), rows<T>(da), rows<const T>(dy), rows<const T>(s), rows<const T>(a), n);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

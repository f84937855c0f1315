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
// The inputs' rows may lie apart (a row stride above C): the slices of one wider product, as
// nn/layers.h's fused_linear makes them, are read in place. The outputs are contiguous.
// One element per thread in a grid-stride loop of 256-thread blocks, in the CPU's formulas
// and types (tensor/cpu_fused.cpp): σ(a) = 1 / (1 + exp(−a)) in T, so the emulator matches
// the CPU bit for bit and a GPU within its maths library's few ulps. bf16 is loaded as float,
// computed as f32 is, and rounded once when stored.
#include <algorithm>
#include <cmath>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;

// An input (rows, C) whose rows lie ld apart: element i of the row-major order is at(i).
template <class T>
struct Rows {
    const T* data;
    int64_t C, ld;
    __device__ T at(int64_t i) const { return data[i / C * ld + i % C]; }
};
template <class T>
Rows<T> rows(const View& v) {
    const int64_t C = v.ndim ? v.shape[v.ndim - 1] : 1;
    return {static_cast<const T*>(v.data), C, v.ndim > 1 ? v.strides[v.ndim - 2] : C};
}

// a, b, y: (n) = (rows, C), a and b at their row strides.
template <class T>
__global__ void swiglu_forward_elements(T* y, Rows<T> a, Rows<T> b, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const compute_t<T> ai = a.at(i), bi = b.at(i);
        y[i] = T(ai / (1 + std::exp(-ai)) * bi);
    }
}

// dy, a, b, da, db: (n) = (rows, C), a and b at their row strides.
template <class T>
__global__ void swiglu_backward_elements(T* da, T* db, const T* dy, Rows<T> a, Rows<T> b, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        using C = compute_t<T>;
        const C ai = a.at(i), bi = b.at(i), dyi = dy[i];
        const C sig = 1 / (1 + std::exp(-ai));
        da[i] = T(dyi * bi * sig * (1 + ai * (1 - sig)));
        db[i] = T(dyi * ai * sig);
    }
}

// s, a, y: (n) = (rows, C), s and a at their row strides.
template <class T>
__global__ void sigmoid_gate_forward_elements(T* y, Rows<T> s, Rows<T> a, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const compute_t<T> si = s.at(i), ai = a.at(i);
        y[i] = T(1 / (1 + std::exp(-si)) * ai);
    }
}

// dy, s, a, ds, da: (n) = (rows, C), s and a at their row strides.
template <class T>
__global__ void sigmoid_gate_backward_elements(T* ds, T* da, const T* dy, Rows<T> s, Rows<T> a, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        using C = compute_t<T>;
        const C si = s.at(i), ai = a.at(i), dyi = dy[i];
        const C sig = 1 / (1 + std::exp(-si));
        ds[i] = T(dyi * ai * sig * (1 - sig));
        da[i] = T(dyi * sig);
    }
}

}  // namespace

void swiglu_forward(const View& y, const View& a, const View& b) {
    const int64_t n = a.numel();
    if (n == 0) return;
    dispatch_floating_bf16(a.dtype, [&]<class T>() {
        launch("swiglu_forward_elements", swiglu_forward_elements<T>, grid_covering(n, kThreads), dim3(kThreads), 0,
               static_cast<T*>(y.data), rows<T>(a), rows<T>(b), n);
    });
}

void swiglu_backward(const View& da, const View& db, const View& dy, const View& a, const View& b) {
    const int64_t n = a.numel();
    if (n == 0) return;
    dispatch_floating_bf16(a.dtype, [&]<class T>() {
        launch("swiglu_backward_elements", swiglu_backward_elements<T>, grid_covering(n, kThreads), dim3(kThreads), 0,
               static_cast<T*>(da.data), static_cast<T*>(db.data), static_cast<const T*>(dy.data), rows<T>(a),
               rows<T>(b), n);
    });
}

void sigmoid_gate_forward(const View& y, const View& s, const View& a) {
    const int64_t n = s.numel();
    if (n == 0) return;
    dispatch_floating_bf16(s.dtype, [&]<class T>() {
        launch("sigmoid_gate_forward_elements", sigmoid_gate_forward_elements<T>, grid_covering(n, kThreads),
               dim3(kThreads), 0, static_cast<T*>(y.data), rows<T>(s), rows<T>(a), n);
    });
}

void sigmoid_gate_backward(const View& ds, const View& da, const View& dy, const View& s, const View& a) {
    const int64_t n = s.numel();
    if (n == 0) return;
    dispatch_floating_bf16(s.dtype, [&]<class T>() {
        launch("sigmoid_gate_backward_elements", sigmoid_gate_backward_elements<T>, grid_covering(n, kThreads),
               dim3(kThreads), 0, static_cast<T*>(ds.data), static_cast<T*>(da.data), static_cast<const T*>(dy.data),
               rows<T>(s), rows<T>(a), n);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

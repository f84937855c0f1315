// swiglu.cu — SwiGLU's gating product over contiguous a, b of n elements (tensor/backend.h):
//
//   forward:   y = silu(a) · b = a σ(a) b
//   backward:  da = dy · b · σ(a) (1 + a (1 − σ(a))),   db = dy · a σ(a)
//
// and its sibling, the G1 gate of gated attention over contiguous s, a:
//
//   forward:   y = σ(s) · a
//   backward:  ds = dy · a · σ(s) (1 − σ(s)),   da = dy · σ(s)
//
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


// a, b, y: (n).
template <class T>
__global__ void swiglu_forward_elements(T* y, const T* a, const T* b, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const compute_t<T> ai = a[i], bi = b[i];
        y[i] = T(ai / (1 + std::exp(-ai)) * bi);
    }
}

// dy, a, b, da, db: (n).
template <class T>
__global__ void swiglu_backward_elements(T* da, T* db, const T* dy, const T* a, const T* b, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        using C = compute_t<T>;
        const C ai = a[i], bi = b[i], dyi = dy[i];
        const C sig = 1 / (1 + std::exp(-ai));
        da[i] = T(dyi * bi * sig * (1 + ai * (1 - sig)));
        db[i] = T(dyi * ai * sig);
    }
}

// s, a, y: (n).
template <class T>
__global__ void sigmoid_gate_forward_elements(T* y, const T* s, const T* a, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const compute_t<T> si = s[i], ai = a[i];
        y[i] = T(1 / (1 + std::exp(-si)) * ai);
    }
}

// dy, s, a, ds, da: (n).
template <class T>
__global__ void sigmoid_gate_backward_elements(T* ds, T* da, const T* dy, const T* s, const T* a, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        using C = compute_t<T>;
        const C si = s[i], ai = a[i], dyi = dy[i];
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
               static_cast<T*>(y.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data), n);
    });
}

void swiglu_backward(const View& da, const View& db, const View& dy, const View& a, const View& b) {
    const int64_t n = a.numel();
    if (n == 0) return;
    dispatch_floating_bf16(a.dtype, [&]<class T>() {
        launch("swiglu_backward_elements", swiglu_backward_elements<T>, grid_covering(n, kThreads), dim3(kThreads), 0,
               static_cast<T*>(da.data), static_cast<T*>(db.data), static_cast<const T*>(dy.data),
               static_cast<const T*>(a.data), static_cast<const T*>(b.data), n);
    });
}

void sigmoid_gate_forward(const View& y, const View& s, const View& a) {
    const int64_t n = s.numel();
    if (n == 0) return;
    dispatch_floating_bf16(s.dtype, [&]<class T>() {
        launch("sigmoid_gate_forward_elements", sigmoid_gate_forward_elements<T>, grid_covering(n, kThreads),
               dim3(kThreads), 0, static_cast<T*>(y.data), static_cast<const T*>(s.data),
               static_cast<const T*>(a.data), n);
    });
}

void sigmoid_gate_backward(const View& ds, const View& da, const View& dy, const View& s, const View& a) {
    const int64_t n = s.numel();
    if (n == 0) return;
    dispatch_floating_bf16(s.dtype, [&]<class T>() {
        launch("sigmoid_gate_backward_elements", sigmoid_gate_backward_elements<T>, grid_covering(n, kThreads),
               dim3(kThreads), 0, static_cast<T*>(ds.data), static_cast<T*>(da.data), static_cast<const T*>(dy.data),
               static_cast<const T*>(s.data), static_cast<const T*>(a.data), n);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

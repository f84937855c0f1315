// optim.cu — the optimiser updates of one contiguous parameter, in place (tensor/backend.h,
// SPEC §2), element by element:
//
//   AdamW:  p *= 1 − lr·λ;  m = β1 m + (1 − β1) g;  v = β2 v + (1 − β2) g²;
//           p −= (lr / bc1) · m / (√v / √bc2 + ε)                      p, g, m, v: (n)
//   SGD:    d = g + λ p;  buf = μ buf + d (when there is a buffer, else d stays);  p −= lr · d
//
// The per-step scalars are rounded to T on the host exactly as tensor/cpu_fused.cpp does, and
// each element goes through the same operations in the same order, so the emulated build
// matches the CPU bitwise. (nvcc may fuse a multiply and an add into one FMA, rounding once
// where the CPU rounds twice: at most an ulp apart per step.)
//
// Mapping: grid-stride loops, 256 threads per block. AdamW, which moves four arrays per
// element, reads and writes float parameters four at a time (one 16-byte float4 access per
// array) when all four arrays are 16-byte aligned; a scalar launch finishes the last n mod 4.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

// Enough kThreads-thread blocks for n elements, within the grid's limit (kernels grid-stride).
dim3 grid_for(int64_t n) { return dim3(unsigned(std::min((n + kThreads - 1) / kThreads, kMaxBlocks))); }

__device__ inline float square_root(float x) { return sqrtf(x); }
__device__ inline double square_root(double x) { return sqrt(x); }

// AdamWStep's scalars rounded to T once; the bias corrections fold into step_size and
// bc2_sqrt: m̂ / (√v̂ + ε) = (m / bc1) / (√v / √bc2 + ε).
template <class T>
struct AdamWScalars {
    T decay, step_size, bc2_sqrt, b1, b2, one_minus_b1, one_minus_b2, eps;
};
template <class T>
AdamWScalars<T> adamw_scalars(const AdamWStep& s) {
    return {T(1 - s.lr * s.weight_decay), T(s.lr / s.bias_correction1), T(std::sqrt(s.bias_correction2)),
            T(s.beta1),                   T(s.beta2),                    T(1 - s.beta1),
            T(1 - s.beta2),               T(s.eps)};
}

template <class T>
__device__ void adamw_update(T& p, T& m, T& v, T g, const AdamWScalars<T>& s) {
    p *= s.decay;                                        // decoupled weight decay
    m = s.b1 * m + s.one_minus_b1 * g;                   // m = β1 m + (1 − β1) g
    v = s.b2 * v + s.one_minus_b2 * g * g;               // v = β2 v + (1 − β2) g²
    const T denom = square_root(v) / s.bc2_sqrt + s.eps;  // √v̂ + ε
    p -= s.step_size * m / denom;                        // p −= lr m̂ / (√v̂ + ε)
}

// p, m, v, g: (n).
template <class T>
__global__ void adamw_elements(AdamWScalars<T> s, T* p, T* m, T* v, const T* g, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        adamw_update(p[i], m[i], v[i], g[i], s);
}

// p, m, v, g: (n4) float4s, i.e. (4 · n4) floats.
__global__ void adamw_float4s(AdamWScalars<float> s, float4* p, float4* m, float4* v, const float4* g, int64_t n4) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
        float4 pi = p[i], mi = m[i], vi = v[i];
        const float4 gi = g[i];
        adamw_update(pi.x, mi.x, vi.x, gi.x, s);
        adamw_update(pi.y, mi.y, vi.y, gi.y, s);
        adamw_update(pi.z, mi.z, vi.z, gi.z, s);
        adamw_update(pi.w, mi.w, vi.w, gi.w, s);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
}

// p, g: (n); buf: (n), or null without momentum.
template <class T>
__global__ void sgd_elements(T lr, T momentum, T weight_decay, T* p, const T* g, T* buf, int64_t n) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        T d = g[i] + weight_decay * p[i];               // L2 decay, through the gradient
        if (buf) d = buf[i] = momentum * buf[i] + d;  // buf = μ buf + d
        p[i] -= lr * d;
    }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

void adamw_step(const AdamWStep& s, const View& param, const View& grad, const View& exp_avg,
                const View& exp_avg_sq) {
    const int64_t n = param.numel();
    if (n == 0) return;
    dispatch_floating(param.dtype, [&]<class T>() {
        T *p = static_cast<T*>(param.data), *m = static_cast<T*>(exp_avg.data), *v = static_cast<T*>(exp_avg_sq.data);
        const T* g = static_cast<const T*>(grad.data);
        int64_t done = 0;  // elements the float4 kernel updates
        if constexpr (std::is_same_v<T, float>) {
            if (aligned16(p) && aligned16(m) && aligned16(v) && aligned16(g) && n >= 4) {
                const int64_t n4 = n / 4;
                launch("adamw_float4s", adamw_float4s, grid_for(n4), dim3(kThreads), 0, adamw_scalars<float>(s),
                       reinterpret_cast<float4*>(p), reinterpret_cast<float4*>(m), reinterpret_cast<float4*>(v),
                       reinterpret_cast<const float4*>(g), n4);
                done = 4 * n4;
            }
        }
        if (done < n)
            launch("adamw_elements", adamw_elements<T>, grid_for(n - done), dim3(kThreads), 0, adamw_scalars<T>(s),
                   p + done, m + done, v + done, g + done, n - done);
    });
}

void sgd_step(const SGDStep& s, const View& param, const View& grad, const View& momentum_buffer) {
    const int64_t n = param.numel();
    if (n == 0) return;
    dispatch_floating(param.dtype, [&]<class T>() {
        launch("sgd_elements", sgd_elements<T>, grid_for(n), dim3(kThreads), 0, T(s.lr), T(s.momentum),
               T(s.weight_decay), static_cast<T*>(param.data), static_cast<const T*>(grad.data),
               static_cast<T*>(momentum_buffer.data), n);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

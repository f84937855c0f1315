// optim.cu — the optimiser updates of one contiguous parameter, in place (tensor/backend.h,
// nn/optim/optimizer.h), element by element:
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
// element, reads and writes them in 16-byte packs (cuda/packs.h: a float4 of f32, a double2
// of f64) when all four arrays are 16-byte aligned; the grid's first threads then take the
// last n mod W elements one each.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/packs.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;

// Enough kThreads-thread blocks for n elements, within the grid's limit (kernels grid-stride).

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

// p, m, v, g: (n), W elements to a load and a store.
template <int W, class T>
__global__ void adamw_packs(AdamWScalars<T> s, T* p, T* m, T* v, const T* g, int64_t n) {
    for_each_pack<W>(n, [&]<int V>(int64_t i) {
        Pack<T, V> pi = load_pack<V>(p + i), mi = load_pack<V>(m + i), vi = load_pack<V>(v + i);
        const Pack<T, V> gi = load_pack<V>(g + i);
        GG_UNROLL
        for (int j = 0; j < V; ++j) adamw_update(pi.at[j], mi.at[j], vi.at[j], gi.at[j], s);
        store_pack<V>(p + i, pi);
        store_pack<V>(m + i, mi);
        store_pack<V>(v + i, vi);
    });
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

// The optimisers update f32 (or f64) master weights; bf16 copies of them are the forward's
// business (autocast), so a bf16 parameter, gradient or moment is a caller's mistake.
void reject_bf16(const char* op, const View& param, const View& grad) {
    if (param.dtype == DType::bf16 || grad.dtype == DType::bf16)
        throw std::invalid_argument(std::string(op) + ": parameter " + dtype_name(param.dtype) + ", gradient " +
                                    dtype_name(grad.dtype) +
                                    ": the optimisers take f32 or f64 master weights, not bfloat16");
}

}  // namespace

void adamw_step(const AdamWStep& s, const View& param, const View& grad, const View& exp_avg,
                const View& exp_avg_sq) {
    reject_bf16("adamw_step", param, grad);
    const int64_t n = param.numel();
    if (n == 0) return;
    dispatch_floating(param.dtype, [&]<class T>() {
        T *p = static_cast<T*>(param.data), *m = static_cast<T*>(exp_avg.data), *v = static_cast<T*>(exp_avg_sq.data);
        const T* g = static_cast<const T*>(grad.data);
        by_pack_width<T>(aligned16(p, m, v, g), [&]<int W>() {
            launch("adamw_packs", adamw_packs<W, T>, grid_covering((n + W - 1) / W, kThreads), dim3(kThreads), 0,
                   adamw_scalars<T>(s), p, m, v, g, n);
        });
    });
}

void sgd_step(const SGDStep& s, const View& param, const View& grad, const View& momentum_buffer) {
    reject_bf16("sgd_step", param, grad);
    const int64_t n = param.numel();
    if (n == 0) return;
    dispatch_floating(param.dtype, [&]<class T>() {
        launch("sgd_elements", sgd_elements<T>, grid_covering(n, kThreads), dim3(kThreads), 0, T(s.lr), T(s.momentum),
               T(s.weight_decay), static_cast<T*>(param.data), static_cast<const T*>(grad.data),
               static_cast<T*>(momentum_buffer.data), n);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

// optim.cu — the optimiser updates, in place (tensor/backend.h, nn/optim/optimizer.h):
//
//   AdamW:  p *= 1 − lr·λ;  m = β1 m + (1 − β1) g;  v = β2 v + (1 − β2) g²;
//           p −= (lr / bc1) · m / (√v / √bc2 + ε)                      p, g, m, v: (n) per parameter
//   SGD:    d = g + λ p;  buf = μ buf + d (when there is a buffer, else d stays);  p −= lr · d
//   scale:  x *= factor                                                x: (n) per gradient (clip_grad_norm)
//
// The per-step scalars are rounded to T on the host exactly as cpu/fused.cpp does, and
// each element goes through the same operations in the same order, so the emulated build
// matches the CPU bitwise. (nvcc may fuse a multiply and an add into one FMA, rounding once
// where the CPU rounds twice: at most an ulp apart per step.)
//
// AdamW updates every parameter of a step in one launch (cuda/tensor_list.h): blocks of 256
// threads take 16384-element chunks of the list, and each thread moves its part of the four
// arrays in 16-byte packs (cuda/packs.h: a float4 of f32, a double2 of f64) when that
// parameter's four arrays are 16-byte aligned, one element at a time otherwise. Parameters of
// both float types go in one launch per type. SGD is one grid-stride launch per parameter.
// scale_list is AdamW's list launch over one array per tensor, every dtype in the same launch
// (each entry names its own, as sum_squares' do in reduce.cu); bf16 is scaled in float and
// rounded once, as on the CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/tensor_list.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;

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

// One parameter of the list: p, m, v, g (n), its scalars, its chunks from first_chunk on.
template <class T>
struct AdamWEntry {
    T *p, *m, *v;
    const T* g;
    int64_t n, first_chunk;
    bool packed;  // all four arrays 16-byte aligned
    AdamWScalars<T> s;
};

// list: (count) entries whose chunks number `chunks` in all; block b updates chunks b, b + G, ...
template <class T>
__global__ void adamw_list(const AdamWEntry<T>* list, int64_t count, int64_t chunks) {
    for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const ListChunk c = find_chunk(list, count, chunk);
        const AdamWEntry<T> e = list[c.tensor];  // a copy in registers: the stores below cannot alias it
        for_each_pack_of<kPackWidth<T>>(c, e.packed, [&]<int V>(int64_t i) {
            Pack<T, V> pi = load_pack<V>(e.p + i), mi = load_pack<V>(e.m + i), vi = load_pack<V>(e.v + i);
            const Pack<T, V> gi = load_pack<V>(e.g + i);
            GG_UNROLL
            for (int j = 0; j < V; ++j) adamw_update(pi.at[j], mi.at[j], vi.at[j], gi.at[j], e.s);
            store_pack<V>(e.p + i, pi);
            store_pack<V>(e.m + i, mi);
            store_pack<V>(e.v + i, vi);
        });
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

// The optimisers update f32 (or f64) master weights; bf16 copies of them are the forward's
// business (autocast), so a bf16 parameter, gradient or moment is a caller's mistake.
void reject_bf16(const char* op, const View& param, const View& grad) {
    if (param.dtype == DType::bf16 || grad.dtype == DType::bf16)
        throw std::invalid_argument(std::string(op) + ": parameter " + dtype_name(param.dtype) + ", gradient " +
                                    dtype_name(grad.dtype) +
                                    ": the optimisers take f32 or f64 master weights, not bfloat16");
}

// One tensor of a scale_list: x (n) of `dtype`, its chunks from first_chunk on.
struct ScaleEntry {
    void* x;
    int64_t n, first_chunk;
    DType dtype;
    bool packed;  // x 16-byte aligned
};

// x[i] *= factor over elements [c.begin, c.end) of x, this thread's share.
template <class T>
__device__ void scale_chunk(T* x, const ListChunk& c, bool packed, double factor) {
    const compute_t<T> f = compute_t<T>(factor);
    for_each_pack_of<kPackWidth<T>>(c, packed, [&]<int V>(int64_t i) {
        map_pack<V>(i, [&](int64_t, T xi) { return T(compute_t<T>(xi) * f); }, x, x);
    });
}

// list: (count) entries whose chunks number `chunks` in all; block b scales chunks b, b + G, ...
__global__ void scale_list_chunks(const ScaleEntry* list, int64_t count, int64_t chunks, double factor) {
    for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const ListChunk c = find_chunk(list, count, chunk);
        const ScaleEntry e = list[c.tensor];
        if (e.dtype == DType::f32) scale_chunk(static_cast<float*>(e.x), c, e.packed, factor);
        else if (e.dtype == DType::f64) scale_chunk(static_cast<double*>(e.x), c, e.packed, factor);
        else scale_chunk(static_cast<bfloat16*>(e.x), c, e.packed, factor);
    }
}

}  // namespace

void adamw_step(std::span<const AdamWTensors> params) {
    for (const AdamWTensors& a : params) reject_bf16("adamw_step", a.param, a.grad);
    for (const DType dtype : {DType::f32, DType::f64})
        dispatch_floating(dtype, [&]<class T>() {
            std::vector<AdamWEntry<T>> list;
            for (const AdamWTensors& a : params) {
                if (a.param.dtype != dtype || a.param.numel() == 0) continue;
                T *p = static_cast<T*>(a.param.data), *m = static_cast<T*>(a.exp_avg.data);
                T* v = static_cast<T*>(a.exp_avg_sq.data);
                const T* g = static_cast<const T*>(a.grad.data);
                list.push_back({p, m, v, g, a.param.numel(), 0, aligned16(p, m, v, g), adamw_scalars<T>(a.step)});
            }
            if (list.empty()) return;
            const int64_t chunks = number_chunks(list);
            with_device_list(list, [&](const AdamWEntry<T>* entries) {
                launch("adamw_list", adamw_list<T>, list_grid(chunks), dim3(kListThreads), 0, entries,
                       int64_t(list.size()), chunks);
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

void scale_list(double factor, std::span<const View> xs) {
    check_contiguous_floats("scale_list", xs);
    std::vector<ScaleEntry> list;
    for (const View& x : xs)
        if (x.numel() > 0) list.push_back({x.data, x.numel(), 0, x.dtype, aligned16(x.data)});
    if (list.empty()) return;
    const int64_t chunks = number_chunks(list);
    with_device_list(list, [&](const ScaleEntry* entries) {
        launch("scale_list_chunks", scale_list_chunks, list_grid(chunks), dim3(kListThreads), 0, entries,
               int64_t(list.size()), chunks, factor);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

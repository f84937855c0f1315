// score_functions.h — how attention turns a row of scores into weights: the five score
// functions, their gradients, and the forms that keep them finite in floating point. The CPU's
// fused attention (cpu/attention.cpp) and the CUDA kernels (cuda/attention_*.cu) both
// compute them from these functions.
//
// Query i sees keys j (the mask: causal, window, exclude_self) with scores s_j = q_i·k_j·scale,
// and outputs O_i = Σ_j w_j v_j with
//   softmax   w_j = e^{s_j} / Σ_k e^{s_k}
//   softmax1  w_j = e^{s_j} / (1 + Σ_k e^{s_k})              "off-by-one": a slot of logit 0
//   sink      w_j = e^{s_j} / (e^{b_h} + Σ_k e^{s_k})        a learnable logit b_h per head (gpt-oss)
//   sigmoid   w_j = σ(s_j + b_i),  b_i = −log n_i            no normalisation (arXiv 2409.04431)
//   softpick  w_j = ReLU(e^{s_j} − 1) / (Σ_k |e^{s_k} − 1| + ε)                   (arXiv 2504.20966)
// softmax1 and sink are a softmax over the scores and one more slot of logit c (0, b_h) whose
// value is 0: the slot takes p_slot = e^{c − r} of the weight and the keys' weights sum to
// 1 − p_slot, so a head can attend to nothing without parking its weight on a real token (the
// attention sink, docs/paper.md). softmax is the same with c = −∞ (no slot).
//
// The row statistic r_i. Forward returns one number per query (Backend::attention_forward's
// lse) from which backward recomputes every weight, as FlashAttention recomputes P from the
// log-sum-exp:
//   softmax, softmax1, sink  r = log(e^c + Σ_j e^{s_j})         w_j = e^{s_j − r},  p_slot = e^{c − r}
//   softpick                 r = log(Σ_j |e^{s_j} − 1| + ε)     w_j = ReLU(e^{s_j − r} − e^{−r})
//   sigmoid                  r = b_i                            w_j = σ(s_j + r)
//
// Stable forms. A row's scores reach the kernels a tile of keys at a time, with a running shift
// m (the largest score so far) that keeps every exponential at most 1:
//   softmax family: m starts at c and the running sum z at e^{c − c} = 1 (softmax: m = −∞, z = 0);
//     per tile m' = max(m, max_j s_j), z ← z e^{m − m'} + Σ_j e^{s_j − m'}; at the end r = m + log z.
//   softpick: numerator and denominator times e^{−m}, with m = max(0, s_1, …) (m starts at 0):
//       w_j = ReLU(e^{s_j − m} − e^{−m}) / (Σ_k |e^{s_k − m} − e^{−m}| + ε e^{−m}),
//     every exponential at most 1 (m ≥ s_j and m ≥ 0); z = Σ_k |e^{s_k − m} − e^{−m}| is rescaled
//     as softmax's is, and r = m + log(z + ε e^{−m}). ε = 10⁻⁶ (kSoftpickEpsilon), the value of
//     the authors' fused kernel, which adds it after the shift (ε e^{m} before it); we add it to
//     the unshifted sum, as the formula writes it, so that w does not depend on m. It only counts
//     when every score is near 0.
//   sigmoid: σ(y) = 1 / (1 + e^{−y}); for y ≪ 0, e^{−y} overflows to +∞ and σ is 0, never NaN.
//     There is no row sum, so nothing to shift.
// The bias of sigmoid. Ramapuram et al. (arXiv 2409.04431, its Section 3 and code) write
// b = −log n with n the sequence length: one scalar, so that at the start, with s ≈ 0, the n
// weights σ(−log n) ≈ 1/n sum to about 1, as a softmax's do. We take n_i, the number of keys
// query i sees (causal: i + 1, or the window; exclude_self one fewer), which keeps that property
// on every row of a causal mask and equals the paper's n without one; and a query decoded alone
// against a KV cache sees the same keys, so gets the same bias, as in the full pass.
//
// Gradients, with dP_j = dO_i·v_j and δ_i = dO_i·O_i = Σ_j w_j dP_j (the slot's value is 0):
//   softmax family  ds_j = w_j (dP_j − δ_i);   the slot's logit: dc = −p_slot δ_i, which summed over
//                   the queries and the batch is sink's ∂L/∂b_h (softmax1's c is a constant)
//   sigmoid         ds_j = w_j (1 − w_j) dP_j
//   softpick        ∂w_k/∂s_j = (e^{s_j} / Z)(1[k = j] 1[s_j > 0] − w_k sign(s_j)), Z the denominator:
//                   ds_j = e^{s_j − r} (1[s_j > 0] dP_j − sign(s_j) δ_i),
//                   which needs the score's sign: the weight, 0 for every s_j ≤ 0, does not keep it.
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/bf16.h"  // GG_HOST_DEVICE

namespace gg {

enum class ScoreFunction { softmax, softmax1, sink, sigmoid, softpick };

constexpr double kSoftpickEpsilon = 1e-6;

// A softmax over the scores and a slot (softmax, softmax1, sink): weights e^{s − r}, the
// gradient w (dP − δ), the online max and sum.
GG_HOST_DEVICE constexpr bool is_softmax(ScoreFunction f) {
    return f == ScoreFunction::softmax || f == ScoreFunction::softmax1 || f == ScoreFunction::sink;
}
// The softmaxes with a slot, whose keys' weights sum to 1 − p_slot.
GG_HOST_DEVICE constexpr bool has_slot(ScoreFunction f) {
    return f == ScoreFunction::softmax1 || f == ScoreFunction::sink;
}

// Where a row's online shift m and sum z start: the slot (logit c) is the first term of the sum.
// sink_logit is b_h (read only for sink).
template <class T>
struct RowStart {
    T m, z;
};
template <class T>
GG_HOST_DEVICE RowStart<T> row_start(ScoreFunction f, T sink_logit) {
    switch (f) {
        case ScoreFunction::softmax1: return {T(0), T(1)};
        case ScoreFunction::sink: return {sink_logit, T(1)};
        case ScoreFunction::softpick: return {T(0), T(0)};
        default: return {-T(INFINITY), T(0)};  // softmax; sigmoid keeps no sum
    }
}

// What the accumulated Σ_j (shifted weight) v_j is divided by at the end of a row, from its
// final shift m and sum z: z, softpick's z + ε e^{−m}, 1 for sigmoid.
template <class T>
GG_HOST_DEVICE T row_divisor(ScoreFunction f, T m, T z) {
    if (f == ScoreFunction::sigmoid) return T(1);
    if (f == ScoreFunction::softpick) return z + T(kSoftpickEpsilon) * std::exp(-m);
    return z;
}

// Sigmoid's bias for a query that sees n keys: −log n.
template <class T>
GG_HOST_DEVICE T sigmoid_bias(int64_t n) {
    return -std::log(T(n));
}

// The row statistic r (above) from the final shift m and divisor, or for sigmoid the bias of a
// query that sees n keys.
template <class T>
GG_HOST_DEVICE T row_statistic(ScoreFunction f, T m, T divisor, int64_t n) {
    if (f == ScoreFunction::sigmoid) return sigmoid_bias<T>(n);
    return m + std::log(divisor);
}

template <class T>
GG_HOST_DEVICE T sigmoid_of(T y) {
    return T(1) / (T(1) + std::exp(-y));
}

// The weight of a visible score x = q·k·scale, given its row's statistic r.
template <class T>
GG_HOST_DEVICE T score_weight(ScoreFunction f, T x, T r) {
    if (f == ScoreFunction::sigmoid) return sigmoid_of(x + r);
    if (f == ScoreFunction::softpick) {
        const T w = std::exp(x - r) - std::exp(-r);
        return w > 0 ? w : T(0);
    }
    return std::exp(x - r);
}

// ∂L/∂x of a visible score x (before the scale) from its weight w, its row's statistic r,
// dP = dO·v and δ = dO·O.
template <class T>
GG_HOST_DEVICE T score_gradient(ScoreFunction f, T x, T w, T r, T dp, T delta) {
    if (f == ScoreFunction::sigmoid) return w * (T(1) - w) * dp;
    if (f == ScoreFunction::softpick) {
        const T e = std::exp(x - r);
        return x > 0 ? e * (dp - delta) : x < 0 ? e * delta : T(0);
    }
    return w * (dp - delta);
}

}  // namespace gg

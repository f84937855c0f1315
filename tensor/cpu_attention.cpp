// cpu_attention.cpp — fused scaled-dot-product attention on the CPU.
//
// One query row at a time (the far end of the FlashAttention idea: never hold a T×T
// matrix): scores s_j = q·k_j · scale over the visible keys, p = softmax(s), o = Σ p_j v_j.
// The row's log-sum-exp is kept so backward can recompute p_j = exp(s_j − lse) instead of
// storing it:
//   dV_j += p_j dO,   dp_j = dO·v_j,   ds_j = p_j (dp_j − dO·o),
//   dQ = scale Σ_j ds_j k_j,   dK_j += scale ds_j q.
// Work is split over (batch, kv head) so that the query heads sharing a kv head (GQA)
// run on one thread and their dK/dV sums never race.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/backend.h"
#include "tensor/parallel.h"

namespace gg {

namespace {

// Visible keys of query i: [first, last]. With exclude_self the query's own key is hidden
// too, except at position 0, which has nothing else to see.
struct KeyRange {
    int64_t first, last;
};
KeyRange visible_keys(const AttentionShape& s, int64_t i) {
    const int64_t pos = s.Tk - s.Tq + i;
    int64_t last = s.causal ? std::min(pos, s.Tk - 1) : s.Tk - 1;
    if (s.exclude_self && pos > 0) last = pos - 1;
    int64_t first = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
    return {first, last};
}

template <class T>
T dot(const T* a, const T* b, int64_t n) {
    T acc = 0;
    for (int64_t d = 0; d < n; ++d) acc += a[d] * b[d];
    return acc;
}

// Calls f(q_head, kv_head_base_offset...) for every (b, query head) of one (b, kv head).
template <class F>
void for_each_kv_head(const AttentionShape& s, F&& f) {
    const int64_t group = s.H / s.Hkv;
    parallel_range(s.B * s.Hkv, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
            const int64_t b = item / s.Hkv, hk = item % s.Hkv;
            for (int64_t h = hk * group; h < (hk + 1) * group; ++h) f(b * s.H + h, b * s.Hkv + hk);
        }
    }, s.Tq * s.Tk * s.D * group);
}

template <class T>
void forward(const AttentionShape& s, const View& O, const View& lse, const View& probs, const View& Q,
             const View& K, const View& V) {
    const int64_t D = s.D;
    for_each_kv_head(s, [&](int64_t bh, int64_t bhk) {
        const T* q = static_cast<const T*>(Q.data) + bh * s.Tq * D;
        const T* k = static_cast<const T*>(K.data) + bhk * s.Tk * D;
        const T* v = static_cast<const T*>(V.data) + bhk * s.Tk * D;
        T* o = static_cast<T*>(O.data) + bh * s.Tq * D;
        T* l = static_cast<T*>(lse.data) + bh * s.Tq;
        T* p_out = probs.data ? static_cast<T*>(probs.data) + bh * s.Tq * s.Tk : nullptr;
        std::vector<T> scores(s.Tk);
        for (int64_t i = 0; i < s.Tq; ++i) {
            const auto [first, last] = visible_keys(s, i);
            T m = -std::numeric_limits<T>::infinity();
            for (int64_t j = first; j <= last; ++j) {
                scores[j] = dot(q + i * D, k + j * D, D) * T(s.scale);
                m = std::max(m, scores[j]);
            }
            T z = 0;
            for (int64_t j = first; j <= last; ++j) z += (scores[j] = std::exp(scores[j] - m));
            T* oi = o + i * D;
            std::fill(oi, oi + D, T(0));
            for (int64_t j = first; j <= last; ++j) {
                const T p = scores[j] / z;
                for (int64_t d = 0; d < D; ++d) oi[d] += p * v[j * D + d];
            }
            l[i] = m + std::log(z);
            if (p_out) {
                T* row = p_out + i * s.Tk;
                std::fill(row, row + s.Tk, T(0));
                for (int64_t j = first; j <= last; ++j) row[j] = scores[j] / z;
            }
        }
    });
}

template <class T>
void backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
              const View& Q, const View& K, const View& V, const View& O, const View& lse) {
    const int64_t D = s.D;
    const T scale = T(s.scale);
    // dK, dV are accumulated by every query head of a group: clear them first.
    std::fill_n(static_cast<T*>(dK.data), s.B * s.Hkv * s.Tk * D, T(0));
    std::fill_n(static_cast<T*>(dV.data), s.B * s.Hkv * s.Tk * D, T(0));
    for_each_kv_head(s, [&](int64_t bh, int64_t bhk) {
        const T* q = static_cast<const T*>(Q.data) + bh * s.Tq * D;
        const T* k = static_cast<const T*>(K.data) + bhk * s.Tk * D;
        const T* v = static_cast<const T*>(V.data) + bhk * s.Tk * D;
        const T* o = static_cast<const T*>(O.data) + bh * s.Tq * D;
        const T* go = static_cast<const T*>(dO.data) + bh * s.Tq * D;
        const T* l = static_cast<const T*>(lse.data) + bh * s.Tq;
        T* gq = static_cast<T*>(dQ.data) + bh * s.Tq * D;
        T* gk = static_cast<T*>(dK.data) + bhk * s.Tk * D;
        T* gv = static_cast<T*>(dV.data) + bhk * s.Tk * D;
        for (int64_t i = 0; i < s.Tq; ++i) {
            const auto [first, last] = visible_keys(s, i);
            const T* qi = q + i * D;
            const T* goi = go + i * D;
            const T delta = dot(goi, o + i * D, D);  // Σ_j p_j dp_j, as dO·o
            T* gqi = gq + i * D;
            std::fill(gqi, gqi + D, T(0));
            for (int64_t j = first; j <= last; ++j) {
                const T p = std::exp(dot(qi, k + j * D, D) * scale - l[i]);
                const T ds = p * (dot(goi, v + j * D, D) - delta) * scale;
                for (int64_t d = 0; d < D; ++d) {
                    gv[j * D + d] += p * goi[d];
                    gqi[d] += ds * k[j * D + d];
                    gk[j * D + d] += ds * qi[d];
                }
            }
        }
    });
}

}  // namespace

void cpu_attention_forward(const AttentionShape& s, const View& O, const View& lse, const View& probs,
                           const View& Q, const View& K, const View& V) {
    if (Q.dtype == DType::f32) forward<float>(s, O, lse, probs, Q, K, V);
    else forward<double>(s, O, lse, probs, Q, K, V);
}

void cpu_attention_backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV,
                            const View& dO, const View& Q, const View& K, const View& V, const View& O,
                            const View& lse) {
    if (Q.dtype == DType::f32) backward<float>(s, dQ, dK, dV, dO, Q, K, V, O, lse);
    else backward<double>(s, dQ, dK, dV, dO, Q, K, V, O, lse);
}

}  // namespace gg

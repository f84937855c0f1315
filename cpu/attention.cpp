// cpu/attention.cpp — fused scaled-dot-product attention on the CPU, in tiles.
//
// FlashAttention's schedule (Dao et al., 2022): a block of query rows meets the keys one
// tile at a time, so no T×T matrix is ever held, only one (query block × key tile) of
// scores per thread, and each tile's products are OpenBLAS GEMMs. With S = scale · Q Kᵀ
// over a tile, forward keeps each row's running max m and sum z (the online softmax):
//   m' = max(m, max_j S_j),   z ← z e^{m − m'} + Σ_j e^{S_j − m'},   O ← O e^{m − m'} + e^{S − m'} V
// and ends with O /= z and the row's log-sum-exp lse = m + log z, which backward uses to
// recompute the probabilities P = e^{S − lse} of each tile instead of storing them:
//   dV += Pᵀ dO,   dP = dO Vᵀ,   dS = P ⊙ (dP − δ) · scale with δ_i = dO_i · O_i (= Σ_j P_ij dP_ij),
//   dQ += dS K,    dK += dSᵀ Q.
// The other score functions (tensor/score_functions.h has their formulas, stable forms and
// gradients) run in the same loop; only what a tile's scores become differs:
//   softmax1, sink  the slot enters as the row's first term: m starts at its logit c (0, b_h) and
//                   z at 1; then exactly the loop above, lse = m + log z counting the slot.
//   softpick        m starts at 0 and z at 0; a tile's shifted terms are e^{S − m'} − e^{−m'}, z adds
//                   their absolute values and O their ReLU; O /= z + ε e^{−m}, lse = m + log(z + ε e^{−m}).
//   sigmoid         no max and no sum: a tile's weights are σ(S + b_i) and O += σ(S + b) V; lse holds b_i.
// Backward recomputes each tile's weights from lse the same way and takes each function's dS:
// P (1 − P) dP for sigmoid, and for softpick e^{S − lse} (1[S > 0] dP − sign(S) δ), from the
// scores' signs, which it keeps beside the weights.
// Short sequences can afford to store P (B, H, Tq, Tk): when the caller passes a buffer,
// forward keeps each tile's e^{S − m} as it goes and rescales it by e^{m − lse} at the end of
// the query block, and backward reads P there, skipping one of its five GEMMs and the
// exponentials (Backend::attention_keep_bytes says how much the CPU keeps). Softpick's
// backward needs the scores' signs, which its weights do not hold: it always recomputes.
// Work is split over (batch, kv head) so that the query heads sharing a kv head (GQA) run
// on one thread and their dK/dV sums never race; OpenBLAS stays on the calling thread
// (cpu/backend.cpp), so the tiles' GEMMs do too.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/backend.h"
#include "cpu/float32.h"
#include "cpu/parallel.h"
#include "tensor/score_functions.h"
#include "cpu/vector_math.h"

namespace gg {

namespace {

// Rows of queries and columns of keys in one tile: 64 × 256 scores fit in L2 with the Q, K
// and V rows they are made from.
constexpr int64_t kQueryBlock = 64, kKeyTile = 256;

// Visible keys of query i: [first, last]. With exclude_self the query's own key is hidden
// too, except at position 0, which has nothing else to see. Both ends only grow with i, so
// a block of queries sees keys [first of its first row, last of its last row].
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

// Columns [begin, end) of the key tile [k0, k0 + n) that query i sees (empty when
// begin ≥ end); the rest of its row in the tile is hidden.
struct TileSpan {
    int64_t begin, end;
};
TileSpan visible_in_tile(const AttentionShape& s, int64_t i, int64_t k0, int64_t n) {
    const auto [first, last] = visible_keys(s, i);
    return {std::clamp<int64_t>(first - k0, 0, n), std::clamp<int64_t>(last + 1 - k0, 0, n)};
}

template <class T>
T dot(const T* a, const T* b, int64_t n) {
    T acc = 0;
    for (int64_t d = 0; d < n; ++d) acc += a[d] * b[d];
    return acc;
}

// C (M, N) = alpha · op(A) op(B) + beta · C, row-major.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc) {
    const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The (T, D) rows of head bh = b·heads + h of a (B, heads, T, D) view whose last dim is
// contiguous: row t starts at at + t·ld. The heads split from a (B, T, heads·D) projection are
// such views (ld = heads·D), read and written in place (nn/attention.cpp).
template <class T>
struct Rows {
    T* at;
    int64_t ld;
};
template <class T>
Rows<T> rows_of(const View& v, int64_t bh, int64_t heads) {
    return {static_cast<T*>(v.data) + bh / heads * v.strides[0] + bh % heads * v.strides[1], v.strides[2]};
}

// One (batch, head)'s operands.
template <class T>
struct Head {
    Rows<const T> q, k, v;
};

// S (rows, n) = scale · Q[i0 : i0+rows] K[k0 : k0+n]ᵀ, with −∞ where key k0 + j is hidden
// from query i0 + r (its softmax weight is then exactly 0).
template <class T>
void tile_scores(const AttentionShape& s, const Head<T>& h, int64_t i0, int64_t rows, int64_t k0, int64_t n, T* S) {
    gemm<T>(false, true, rows, n, s.D, T(s.scale), h.q.at + i0 * h.q.ld, h.q.ld, h.k.at + k0 * h.k.ld, h.k.ld, T(0), S,
            n);
    const T hidden = -std::numeric_limits<T>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
        const auto [begin, end] = visible_in_tile(s, i0 + r, k0, n);
        std::fill(S + r * n, S + r * n + begin, hidden);
        std::fill(S + r * n + end, S + (r + 1) * n, hidden);
    }
}

// The slot's logit b_h of head bh for sink (sink (H) in Q's compute type); unused otherwise.
template <class T>
T sink_logit(const AttentionShape& s, const View& sink, int64_t bh) {
    return s.score_fn == ScoreFunction::sink ? static_cast<const T*>(sink.data)[bh % s.H * sink.strides[0]] : T(0);
}

// How many keys query i sees: sigmoid's n_i (tensor/score_functions.h).
int64_t keys_seen(const AttentionShape& s, int64_t i) {
    const auto [first, last] = visible_keys(s, i);
    return std::max<int64_t>(last - first + 1, 0);
}

// row[begin, end) ← σ(row + b): sigmoid's weights, b the row's bias.
template <class T>
void sigmoid_weights(T* row, int64_t begin, int64_t end, T bias) {
    for (int64_t j = begin; j < end; ++j) row[j] += bias;
    vec::sigmoid(row + begin, row + begin, std::max<int64_t>(end - begin, 0));
}

// Softpick's terms from row[begin, end) = e^{S − m}: ReLU(e^{S − m} − e^{−m}) in place, with
// floor = e^{−m}; returns their sum before the ReLU in absolute value, Σ |e^{S − m} − e^{−m}|.
template <class T>
T softpick_terms(T* row, int64_t begin, int64_t end, T floor) {
    T sum = 0;
    for (int64_t j = begin; j < end; ++j) {
        const T shifted = row[j] - floor;  // (e^{S_j} − 1) e^{−m}
        sum += std::abs(shifted);
        row[j] = std::max(shifted, T(0));
    }
    return sum;
}

// P (rows, n): the tile's weights, given each row's statistic r (lse, tensor/score_functions.h),
// 0 at hidden keys; for softpick also G (rows, n) = sign(S) e^{S − r}, what its gradient reads.
// The exponentials are taken over the visible columns only: on a causal tile that straddles
// the diagonal, half of them.
template <class T>
void tile_weights(const AttentionShape& s, const Head<T>& h, int64_t i0, int64_t rows, int64_t k0, int64_t n,
                  const T* r, T* P, T* G) {
    tile_scores(s, h, i0, rows, k0, n, P);
    for (int64_t row_index = 0; row_index < rows; ++row_index) {
        const auto [begin, end] = visible_in_tile(s, i0 + row_index, k0, n);
        const int64_t len = std::max<int64_t>(end - begin, 0);
        const T stat = r[i0 + row_index];
        T* row = P + row_index * n;
        if (s.score_fn == ScoreFunction::sigmoid) {
            sigmoid_weights(row, begin, end, stat);
        } else if (s.score_fn == ScoreFunction::softpick) {
            T* g = G + row_index * n;
            std::copy(row, row + n, g);  // the scores, for their signs
            vec::exp_shifted(row + begin, row + begin, stat, len);
            // sign(S) as a difference, not a branch: the signs come in no order a predictor could learn.
            for (int64_t j = begin; j < end; ++j) g[j] = (T(g[j] > 0) - T(g[j] < 0)) * row[j];
            softpick_terms(row, begin, end, std::exp(-stat));
            std::fill(g, g + begin, T(0));
            std::fill(g + std::max(begin, end), g + n, T(0));
        } else {
            vec::exp_shifted(row + begin, row + begin, stat, len);
        }
        std::fill(row, row + begin, T(0));
        std::fill(row + std::max(begin, end), row + n, T(0));
    }
}

// One (query block × key tile) buffer of this thread, kept from call to call; slot: which of the
// buffers a kernel holds at once. Allocated for each head instead, buffers of 64 KiB and more
// went back to the system when freed, to be faulted in and zeroed again: a tenth of a backward's
// time, and a quarter of a tiny one's.
template <class T>
T* tile_buffer(int slot) {
    thread_local std::vector<T> buffers[3];
    buffers[slot].resize(kQueryBlock * kKeyTile);
    return buffers[slot].data();
}

// Calls f(i0, rows) for each block of query rows [i0, i0 + rows).
template <class F>
void for_each_query_block(const AttentionShape& s, F&& f) {
    for (int64_t i0 = 0; i0 < s.Tq; i0 += kQueryBlock) f(i0, std::min(kQueryBlock, s.Tq - i0));
}

// Calls f(k0, n) for each tile [k0, k0 + n) of the keys that query rows [i0, i0 + rows) see.
template <class F>
void for_each_key_tile(const AttentionShape& s, int64_t i0, int64_t rows, F&& f) {
    const int64_t first = visible_keys(s, i0).first, last = visible_keys(s, i0 + rows - 1).last;
    for (int64_t k0 = first; k0 <= last; k0 += kKeyTile) f(k0, std::min(kKeyTile, last + 1 - k0));
}

// Calls f(b·H + h, b·Hkv + hk) for every query head h of one (b, kv head hk).
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
Head<T> head(const AttentionShape& s, const View& Q, const View& K, const View& V, int64_t bh, int64_t bhk) {
    return {rows_of<const T>(Q, bh, s.H), rows_of<const T>(K, bhk, s.Hkv), rows_of<const T>(V, bhk, s.Hkv)};
}

// One head's probabilities (Tq, Tk) as forward fills them in: each tile's e^{S − m} as the
// online softmax meets it, m being each row's running max at the time, then once lse is
// known P = e^{S − m} · e^{m − lse} (softpick's shifted terms take the same rescale; sigmoid's
// weights are final as they come). O is computed as it is without them. A query block's rows
// wait in T until then, and only finished rows reach P, in P's own dtype: a bfloat16 P is
// rounded once, here, with no float32 copy of every layer's probabilities on the way.
template <class T>
struct KeptProbabilities {
    void* p;               // (Tq, Tk) of T or bfloat16; no data when P is not asked for
    DType dtype;
    std::vector<T> block;  // (kQueryBlock, Tk): this query block's rows
    std::vector<T> shift;  // (tiles met in this query block, kQueryBlock): m of each stored row

    // The tile [k0, k0 + n) of query rows [i0, i0 + rows): E (rows, n) = e^{S − m}, hidden keys 0.
    void store(const AttentionShape& s, int64_t rows, int64_t k0, int64_t n, const T* E, const T* m) {
        for (int64_t r = 0; r < rows; ++r) std::copy_n(E + r * n, n, block.data() + r * s.Tk + k0);
        shift.insert(shift.end(), m, m + kQueryBlock);
    }

    // The query block's rows, given their lse: rescaled, 0 at the keys no row of it sees, and
    // written to P.
    void finish(const AttentionShape& s, int64_t i0, int64_t rows, const T* lse) {
        const int64_t first = visible_keys(s, i0).first, last = visible_keys(s, i0 + rows - 1).last;
        for (int64_t r = 0; r < rows; ++r) {
            T* row = block.data() + r * s.Tk;
            std::fill(row, row + first, T(0));
            std::fill(row + last + 1, row + s.Tk, T(0));
        }
        int64_t tile = 0;
        if (s.score_fn != ScoreFunction::sigmoid)
            for_each_key_tile(s, i0, rows, [&](int64_t k0, int64_t n) {
                for (int64_t r = 0; r < rows; ++r) {
                    const auto [begin, end] = visible_in_tile(s, i0 + r, k0, n);
                    const T rescale = std::exp(shift[tile * kQueryBlock + r] - lse[i0 + r]);
                    T* row = block.data() + r * s.Tk + k0;
                    for (int64_t j = begin; j < end; ++j) row[j] *= rescale;
                }
                ++tile;
            });
        shift.clear();
        const int64_t n = rows * s.Tk;
        if (dtype == DType::bf16)
            std::copy_n(block.data(), n, static_cast<bfloat16*>(p) + i0 * s.Tk);  // rounds each once
        else
            std::copy_n(block.data(), n, static_cast<T*>(p) + i0 * s.Tk);
    }
};

// One row of a tile's scores, visible in [begin, end) of its n columns, becomes its weights in
// place (0 at hidden keys) for the score function's online form (top of file), moving the row's
// shift m and sum z on; bias is sigmoid's b_i. Returns the factor by which the row's output so
// far must be rescaled.
template <class T>
T weigh_row(ScoreFunction f, T* row, int64_t begin, int64_t end, int64_t n, T& m, T& z, T bias) {
    const int64_t len = std::max<int64_t>(end - begin, 0);
    T rescale = 1;
    if (f == ScoreFunction::sigmoid) {
        sigmoid_weights(row, begin, end, bias);
    } else {
        const T m_new = len > 0 ? std::max(m, vec::max_value(row + begin, len)) : m;
        // softmax only: no key of this row in this tile, nor before it.
        if (m_new == -std::numeric_limits<T>::infinity()) {
            std::fill(row, row + n, T(0));
            return 1;
        }
        rescale = std::exp(m - m_new);
        const T sum = vec::exp_shifted(row + begin, row + begin, m_new, len);
        z = z * rescale + (f == ScoreFunction::softpick ? softpick_terms(row, begin, end, std::exp(-m_new)) : sum);
        m = m_new;
    }
    std::fill(row, row + begin, T(0));  // hidden keys weigh nothing
    std::fill(row + std::max(begin, end), row + n, T(0));
    return rescale;
}

template <class T>
void forward(const AttentionShape& s, const View& O, const View& lse, const View& probs, const View& Q,
             const View& K, const View& V, const View& sink) {
    const int64_t D = s.D;
    for_each_kv_head(s, [&](int64_t bh, int64_t bhk) {
        const Head<T> h = head<T>(s, Q, K, V, bh, bhk);
        const auto o = rows_of<T>(O, bh, s.H);  // (Tq, D)
        T* l = static_cast<T*>(lse.data) + bh * s.Tq;   // (Tq)
        const RowStart<T> start = row_start(s.score_fn, sink_logit<T>(s, sink, bh));
        T* S = tile_buffer<T>(0);  // (kQueryBlock, kKeyTile)
        std::vector<T> m(kQueryBlock), z(kQueryBlock), bias(kQueryBlock);
        KeptProbabilities<T> kept{probs.data ? static_cast<char*>(probs.data) + bh * s.Tq * s.Tk * dtype_size(probs.dtype)
                                             : nullptr,
                                  probs.dtype, std::vector<T>(probs.data ? kQueryBlock * s.Tk : 0), {}};
        for_each_query_block(s, [&](int64_t i0, int64_t rows) {
            for (int64_t r = 0; r < rows; ++r) {
                std::fill_n(o.at + (i0 + r) * o.ld, D, T(0));
                bias[r] = sigmoid_bias<T>(keys_seen(s, i0 + r));
            }
            std::fill(m.begin(), m.end(), start.m);
            std::fill(z.begin(), z.end(), start.z);
            for_each_key_tile(s, i0, rows, [&](int64_t k0, int64_t n) {
                tile_scores(s, h, i0, rows, k0, n, S);
                for (int64_t r = 0; r < rows; ++r) {
                    const auto [begin, end] = visible_in_tile(s, i0 + r, k0, n);
                    const T rescale = weigh_row(s.score_fn, S + r * n, begin, end, n, m[r], z[r], bias[r]);
                    if (rescale != T(1))
                        for (int64_t d = 0; d < D; ++d) o.at[(i0 + r) * o.ld + d] *= rescale;
                }
                gemm<T>(false, false, rows, D, n, T(1), S, n, h.v.at + k0 * h.v.ld, h.v.ld, T(1), o.at + i0 * o.ld, o.ld);
                if (kept.p) kept.store(s, rows, k0, n, S, m.data());
            });
            for (int64_t r = 0; r < rows; ++r) {
                const T divisor = row_divisor(s.score_fn, m[r], z[r]);
                if (divisor != T(1))
                    for (int64_t d = 0; d < D; ++d) o.at[(i0 + r) * o.ld + d] /= divisor;
                l[i0 + r] = row_statistic(s.score_fn, m[r], divisor, keys_seen(s, i0 + r));
            }
            if (kept.p) kept.finish(s, i0, rows, l);
        });
    });
}

// dS (rows, n) = ∂L/∂S · scale of a tile from its weights P (row r at P + r · ldp), dS holding dP on
// entry; G is softpick's sign(S) e^{S − lse} (tile_weights), δ each row's dO · O. Softpick's
// e^{S − lse} (1[S > 0] dP − sign(S) δ) is max(G, 0) dP − G δ: no branch on the signs, which
// come in no order a branch predictor could learn.
template <class T>
void score_gradients(const AttentionShape& s, int64_t rows, int64_t n, const T* P, int64_t ldp, const T* G,
                     const T* delta, T* dS) {
    const T scale = T(s.scale);
    for (int64_t r = 0; r < rows; ++r) {
        const T* p = P + r * ldp;
        T* ds = dS + r * n;
        if (s.score_fn == ScoreFunction::sigmoid) {
            for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (1 - p[j]) * ds[j] * scale;
        } else if (s.score_fn == ScoreFunction::softpick) {
            const T* g = G + r * n;
            for (int64_t j = 0; j < n; ++j) ds[j] = (std::max(g[j], T(0)) * ds[j] - g[j] * delta[r]) * scale;
        } else {
            for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - delta[r]) * scale;
        }
    }
}

template <class T>
void backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
              const View& Q, const View& K, const View& V, const View& O, const View& lse, const View& probs) {
    const int64_t D = s.D;
    const bool softpick = s.score_fn == ScoreFunction::softpick;
    for_each_kv_head(s, [&](int64_t bh, int64_t bhk) {
        const Head<T> h = head<T>(s, Q, K, V, bh, bhk);
        const auto o = rows_of<const T>(O, bh, s.H);     // (Tq, D)
        const auto go = rows_of<const T>(dO, bh, s.H);  // (Tq, D)
        const T* l = static_cast<const T*>(lse.data) + bh * s.Tq;  // (Tq)
        const auto gq = rows_of<T>(dQ, bh, s.H);        // (Tq, D)
        const auto gk = rows_of<T>(dK, bhk, s.Hkv);     // (Tk, D)
        const auto gv = rows_of<T>(dV, bhk, s.Hkv);     // (Tk, D)
        const T* kept =
            probs.data && !softpick ? static_cast<const T*>(probs.data) + bh * s.Tq * s.Tk : nullptr;  // (Tq, Tk)
        // dK, dV are accumulated by every query head of the group: the first one clears them.
        if (bh % s.H % (s.H / s.Hkv) == 0)
            for (int64_t j = 0; j < s.Tk; ++j) std::fill_n(gk.at + j * gk.ld, D, T(0)), std::fill_n(gv.at + j * gv.ld, D, T(0));
        // (kQueryBlock, kKeyTile) each: the recomputed weights, softpick's signed e^{S − lse}, dP then dS.
        T *recomputed = tile_buffer<T>(0), *signs = tile_buffer<T>(1), *dS = tile_buffer<T>(2);
        std::vector<T> delta(kQueryBlock);
        for_each_query_block(s, [&](int64_t i0, int64_t rows) {
            for (int64_t r = 0; r < rows; ++r) {
                delta[r] = dot(go.at + (i0 + r) * go.ld, o.at + (i0 + r) * o.ld, D);
                std::fill_n(gq.at + (i0 + r) * gq.ld, D, T(0));
            }
            for_each_key_tile(s, i0, rows, [&](int64_t k0, int64_t n) {
                // The tile's weights P (rows, n), row r at P + r · ldp.
                const T* P = kept ? kept + i0 * s.Tk + k0 : recomputed;
                const int64_t ldp = kept ? s.Tk : n;
                if (!kept) tile_weights(s, h, i0, rows, k0, n, l, recomputed, signs);
                gemm<T>(true, false, n, D, rows, T(1), P, ldp, go.at + i0 * go.ld, go.ld, T(1), gv.at + k0 * gv.ld, gv.ld);
                gemm<T>(false, true, rows, n, D, T(1), go.at + i0 * go.ld, go.ld, h.v.at + k0 * h.v.ld, h.v.ld, T(0), dS,
                        n);  // dP
                score_gradients(s, rows, n, P, ldp, signs, delta.data(), dS);
                gemm<T>(false, false, rows, D, n, T(1), dS, n, h.k.at + k0 * h.k.ld, h.k.ld, T(1), gq.at + i0 * gq.ld,
                        gq.ld);
                gemm<T>(true, false, n, D, rows, T(1), dS, n, h.q.at + i0 * h.q.ld, h.q.ld, T(1), gk.at + k0 * gk.ld,
                        gk.ld);
            });
        });
    });
}

}  // namespace

void cpu_attention_forward(const AttentionShape& s, const View& O, const View& lse, const View& probs,
                           const View& Q, const View& K, const View& V, const View& sink) {
    if (any_bf16({O, lse, Q, K, V}))
        // The forward writes every element of O and lse: no zeros first. P passes through as it
        // is: the kernel rounds its rows into it (KeptProbabilities).
        return via_float32<3, 2>(
            {Q, K, V}, {O, lse},
            [&](auto& i, auto& o) { cpu_attention_forward(s, o[0], o[1], probs, i[0], i[1], i[2], sink); },
            Outputs::overwritten);
    if (Q.dtype == DType::f32) forward<float>(s, O, lse, probs, Q, K, V, sink);
    else forward<double>(s, O, lse, probs, Q, K, V, sink);
}

void cpu_attention_backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV,
                            const View& dO, const View& Q, const View& K, const View& V, const View& O,
                            const View& lse, const View& probs) {
    // bfloat16 probabilities are too coarse to read back (8 significant bits): recomputed from
    // lse, which stays float32.
    if (any_bf16({dQ, dK, dV, dO, Q, K, V, O, lse, probs}))
        return via_float32<6, 3>({dO, Q, K, V, O, lse}, {dQ, dK, dV}, [&](auto& i, auto& o) {
            cpu_attention_backward(s, o[0], o[1], o[2], i[0], i[1], i[2], i[3], i[4], i[5], View{});
        });
    if (Q.dtype == DType::f32) backward<float>(s, dQ, dK, dV, dO, Q, K, V, O, lse, probs);
    else backward<double>(s, dQ, dK, dV, dO, Q, K, V, O, lse, probs);
}

}  // namespace gg

// cpu_attention.cpp — fused scaled-dot-product attention on the CPU, in tiles.
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
// Short sequences can afford to store P (B, H, Tq, Tk): when the caller passes a buffer,
// forward keeps each tile's e^{S − m} as it goes and rescales it by e^{m − lse} at the end of
// the query block, and backward reads P there, skipping one of its five GEMMs and the
// exponentials (Backend::attention_keep_bytes says how much the CPU keeps).
// Work is split over (batch, kv head) so that the query heads sharing a kv head (GQA) run
// on one thread and their dK/dV sums never race; OpenBLAS stays on the calling thread
// (tensor/cpu_backend.cpp), so the tiles' GEMMs do too.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/backend.h"
#include "tensor/cpu_float32.h"
#include "tensor/parallel.h"
#include "tensor/vector_math.h"

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

// P (rows, n) = e^{S − lse}: the tile's softmax probabilities, given each row's lse. The
// exponentials are taken over the visible columns only: on a causal tile that straddles
// the diagonal, half of them.
template <class T>
void tile_probabilities(const AttentionShape& s, const Head<T>& h, int64_t i0, int64_t rows, int64_t k0, int64_t n,
                        const T* lse, T* P) {
    tile_scores(s, h, i0, rows, k0, n, P);
    for (int64_t r = 0; r < rows; ++r) {
        const auto [begin, end] = visible_in_tile(s, i0 + r, k0, n);
        T* row = P + r * n;
        vec::exp_shifted(row + begin, row + begin, lse[i0 + r], end - begin);
        std::fill(row, row + begin, T(0));
        std::fill(row + end, row + n, T(0));
    }
}

// One (query block × key tile) buffer of this thread, kept from call to call; slot: which of the
// buffers a kernel holds at once. Allocated for each head instead, buffers of 64 KiB and more
// went back to the system when freed, to be faulted in and zeroed again: a tenth of a backward's
// time, and a quarter of a tiny one's.
template <class T>
T* tile_buffer(int slot) {
    thread_local std::vector<T> buffers[2];
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
// known P = e^{S − m} · e^{m − lse}. O is computed as it is without them.
template <class T>
struct KeptProbabilities {
    T* p;                  // (Tq, Tk)
    std::vector<T> shift;  // (tiles met in this query block, kQueryBlock): m of each stored row

    // The tile [k0, k0 + n) of query rows [i0, i0 + rows): E (rows, n) = e^{S − m}, hidden keys 0.
    void store(const AttentionShape& s, int64_t i0, int64_t rows, int64_t k0, int64_t n, const T* E, const T* m) {
        for (int64_t r = 0; r < rows; ++r) std::copy_n(E + r * n, n, p + (i0 + r) * s.Tk + k0);
        shift.insert(shift.end(), m, m + kQueryBlock);
    }

    // The query block's rows, given their lse: rescaled, and 0 at the keys no row of it sees.
    void finish(const AttentionShape& s, int64_t i0, int64_t rows, const T* lse) {
        const int64_t first = visible_keys(s, i0).first, last = visible_keys(s, i0 + rows - 1).last;
        for (int64_t r = 0; r < rows; ++r) {
            T* row = p + (i0 + r) * s.Tk;
            std::fill(row, row + first, T(0));
            std::fill(row + last + 1, row + s.Tk, T(0));
        }
        int64_t tile = 0;
        for_each_key_tile(s, i0, rows, [&](int64_t k0, int64_t n) {
            for (int64_t r = 0; r < rows; ++r) {
                const auto [begin, end] = visible_in_tile(s, i0 + r, k0, n);
                const T rescale = std::exp(shift[tile * kQueryBlock + r] - lse[i0 + r]);
                T* row = p + (i0 + r) * s.Tk + k0;
                for (int64_t j = begin; j < end; ++j) row[j] *= rescale;
            }
            ++tile;
        });
        shift.clear();
    }
};

template <class T>
void forward(const AttentionShape& s, const View& O, const View& lse, const View& probs, const View& Q,
             const View& K, const View& V) {
    const int64_t D = s.D;
    for_each_kv_head(s, [&](int64_t bh, int64_t bhk) {
        const Head<T> h = head<T>(s, Q, K, V, bh, bhk);
        const auto o = rows_of<T>(O, bh, s.H);  // (Tq, D)
        T* l = static_cast<T*>(lse.data) + bh * s.Tq;   // (Tq)
        T* S = tile_buffer<T>(0);  // (kQueryBlock, kKeyTile)
        std::vector<T> m(kQueryBlock), z(kQueryBlock);
        KeptProbabilities<T> kept{probs.data ? static_cast<T*>(probs.data) + bh * s.Tq * s.Tk : nullptr, {}};
        for_each_query_block(s, [&](int64_t i0, int64_t rows) {
            for (int64_t r = 0; r < rows; ++r) std::fill_n(o.at + (i0 + r) * o.ld, D, T(0));
            std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
            std::fill(z.begin(), z.end(), T(0));
            for_each_key_tile(s, i0, rows, [&](int64_t k0, int64_t n) {
                tile_scores(s, h, i0, rows, k0, n, S);
                for (int64_t r = 0; r < rows; ++r) {
                    T* row = S + r * n;
                    const auto [begin, end] = visible_in_tile(s, i0 + r, k0, n);
                    const T m_new = begin < end ? std::max(m[r], vec::max_value(row + begin, end - begin)) : m[r];
                    // No key of this row in this tile, nor before it.
                    if (m_new == -std::numeric_limits<T>::infinity()) {
                        std::fill(row, row + n, T(0));
                        continue;
                    }
                    const T rescale = std::exp(m[r] - m_new);
                    const T sum = vec::exp_shifted(row + begin, row + begin, m_new, end - begin);
                    std::fill(row, row + begin, T(0));  // hidden keys weigh nothing
                    std::fill(row + end, row + n, T(0));
                    z[r] = z[r] * rescale + sum;
                    m[r] = m_new;
                    for (int64_t d = 0; d < D; ++d) o.at[(i0 + r) * o.ld + d] *= rescale;
                }
                gemm<T>(false, false, rows, D, n, T(1), S, n, h.v.at + k0 * h.v.ld, h.v.ld, T(1), o.at + i0 * o.ld, o.ld);
                if (kept.p) kept.store(s, i0, rows, k0, n, S, m.data());
            });
            for (int64_t r = 0; r < rows; ++r) {
                for (int64_t d = 0; d < D; ++d) o.at[(i0 + r) * o.ld + d] /= z[r];
                l[i0 + r] = m[r] + std::log(z[r]);
            }
            if (kept.p) kept.finish(s, i0, rows, l);
        });
    });
}

template <class T>
void backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
              const View& Q, const View& K, const View& V, const View& O, const View& lse, const View& probs) {
    const int64_t D = s.D;
    for_each_kv_head(s, [&](int64_t bh, int64_t bhk) {
        const Head<T> h = head<T>(s, Q, K, V, bh, bhk);
        const auto o = rows_of<const T>(O, bh, s.H);     // (Tq, D)
        const auto go = rows_of<const T>(dO, bh, s.H);  // (Tq, D)
        const T* l = static_cast<const T*>(lse.data) + bh * s.Tq;  // (Tq)
        const auto gq = rows_of<T>(dQ, bh, s.H);        // (Tq, D)
        const auto gk = rows_of<T>(dK, bhk, s.Hkv);     // (Tk, D)
        const auto gv = rows_of<T>(dV, bhk, s.Hkv);     // (Tk, D)
        const T* kept = probs.data ? static_cast<const T*>(probs.data) + bh * s.Tq * s.Tk : nullptr;  // (Tq, Tk)
        // dK, dV are accumulated by every query head of the group: the first one clears them.
        if (bh % s.H % (s.H / s.Hkv) == 0)
            for (int64_t j = 0; j < s.Tk; ++j) std::fill_n(gk.at + j * gk.ld, D, T(0)), std::fill_n(gv.at + j * gv.ld, D, T(0));
        // (kQueryBlock, kKeyTile) each: the recomputed probabilities, dP then dS.
        T *recomputed = tile_buffer<T>(0), *dS = tile_buffer<T>(1);
        std::vector<T> delta(kQueryBlock);
        for_each_query_block(s, [&](int64_t i0, int64_t rows) {
            for (int64_t r = 0; r < rows; ++r) {
                delta[r] = dot(go.at + (i0 + r) * go.ld, o.at + (i0 + r) * o.ld, D);
                std::fill_n(gq.at + (i0 + r) * gq.ld, D, T(0));
            }
            for_each_key_tile(s, i0, rows, [&](int64_t k0, int64_t n) {
                // The tile's probabilities P (rows, n), row r at P + r · ldp.
                const T* P = kept ? kept + i0 * s.Tk + k0 : recomputed;
                const int64_t ldp = kept ? s.Tk : n;
                if (!kept) tile_probabilities(s, h, i0, rows, k0, n, l, recomputed);
                gemm<T>(true, false, n, D, rows, T(1), P, ldp, go.at + i0 * go.ld, go.ld, T(1), gv.at + k0 * gv.ld, gv.ld);
                gemm<T>(false, true, rows, n, D, T(1), go.at + i0 * go.ld, go.ld, h.v.at + k0 * h.v.ld, h.v.ld, T(0), dS,
                        n);  // dP
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t j = 0; j < n; ++j)
                        dS[r * n + j] = P[r * ldp + j] * (dS[r * n + j] - delta[r]) * T(s.scale);
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
                           const View& Q, const View& K, const View& V) {
    if (any_bf16({O, lse, probs, Q, K, V}))
        return via_float32<3, 3>({Q, K, V}, {O, lse, probs}, [&](auto& i, auto& o) {
            cpu_attention_forward(s, o[0], o[1], o[2], i[0], i[1], i[2]);
        });
    if (Q.dtype == DType::f32) forward<float>(s, O, lse, probs, Q, K, V);
    else forward<double>(s, O, lse, probs, Q, K, V);
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

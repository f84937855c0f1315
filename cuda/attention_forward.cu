// attention_forward.cu — fused scaled-dot-product attention, FlashAttention style: the
// scores of a query never leave the chip as a T×T matrix.
//
// For query i of head (b, h) and the keys j it sees (causal, window, exclude_self: see
// visible_keys in cuda/attention_tiles.cuh; query head h reads kv head h / (H / Hkv)):
//   s_ij = q_i · k_j · scale,   O_i = Σ_j exp(s_ij − lse_i) v_j,   lse_i = log Σ_j exp(s_ij).
// The sum runs over key tiles with the online softmax: a row keeps its running maximum m,
// its running sum l = Σ exp(s_ij − m) and its unnormalised output acc = Σ exp(s_ij − m) v_j;
// a tile whose scores raise the maximum to m' first rescales l and acc by exp(m − m'). After
// the last tile O_i = acc / l and lse_i = m + log l, which backward uses to recompute the
// probabilities instead of storing them.
//
// Mapping (see attention_tiles.cuh): one block of 4 warps per (b, h, tile of 64 queries),
// grid (B·H, ⌈Tq / 64⌉), last tile first. The block keeps its queries in shared memory and
// walks the key tiles of the causal/window band; one tile buffer takes the keys, then the
// values, which halves the shared memory and so doubles the blocks an SM holds. Per key tile:
//   1. S = Q Kᵀ: each lane its 4 × 8 micro-tile of the warp's 16 queries × 64 keys;
//   2. the online softmax on it: the row's maximum over its 8 lanes (3 shuffles), the
//      rescale of l and acc, P = exp(S − m') into the warp's weight buffer;
//   3. acc += P V: each lane its 4 queries × kD / 8 columns of D.
// Tiles outside the band are never loaded; tiles inside it skip the mask; only the tiles on
// its edge look up which pairs are visible. l stays split over the 8 lanes of a row until the
// end, where one butterfly adds it up.
//
// bf16 tensors with D = 16, 32, 64 or 128 whose rows all start on 16 bytes go to the tensor-core
// kernel of attention_forward_mma.cu instead; the choice is made here, on the host
// (attention_mma.cuh).
//
// The other score functions (tensor/score_functions.h) change step 2 only. softmax1 and sink
// start each row's maximum at the slot's logit c and its sum at 1 (in lane cg = 0: the sum is
// split over the row's 8 lanes), so the slot is the first term of the online softmax. Softpick
// starts the maximum at 0, adds |e^{s − m'} − e^{−m'}| to l and takes the ReLU of the same as P;
// the row ends divided by l + ε e^{−m}. Sigmoid has no maximum and no sum: P = σ(s + b_i) with
// b_i = −log(keys query i sees), stored as its lse; O is not divided.
//
// When probs is asked for (analysis only), a second, plain kernel writes the weights from lse
// (score_weight: exp(s_ij − lse_i) for softmax), 0 where key j is hidden: one thread per element
// of (B, H, Tq, Tk).
#include <algorithm>

#include "cuda/attention_mma.cuh"
#include "cuda/attention_tiles.cuh"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

using namespace attention;

// One key tile of the online softmax for the lane's 4 rows. p holds the scores q · k on entry
// and the weights on return (0 where hidden): exp(s − m') for the softmax family, softpick's
// ReLU(exp(s − m') − exp(−m')), sigmoid's σ(s + b) with b the rows' biases; m' is the rows' new
// running maximum; l (this lane's part of the sum) and acc are rescaled from m to m'. A softmax
// row that has seen no key yet keeps m = −∞ and takes 0 as its reference, so that no −∞ − (−∞)
// appears.
template <class T, int kD>
__device__ void online_softmax(ScoreFunction f, LaneScores<T>& p, T (&m)[kLaneRows], T (&l)[kLaneRows],
                               Accumulator<T, kD>& acc, const T (&bias)[kLaneRows], uint32_t visible, T scale) {
    GG_UNROLL
    for (int r = 0; r < kLaneRows; ++r) {
        if (f == ScoreFunction::sigmoid) {
            GG_UNROLL
            for (int k = 0; k < kLaneCols; ++k)
                p[r][k] = pair_visible(visible, r, k) ? sigmoid_of(p[r][k] * scale + bias[r]) : T(0);
            continue;
        }
        T tile_max = -T(INFINITY);
        GG_UNROLL
        for (int k = 0; k < kLaneCols; ++k) {
            p[r][k] = pair_visible(visible, r, k) ? p[r][k] * scale : -T(INFINITY);
            tile_max = max(tile_max, p[r][k]);
        }
        const T m_new = max(m[r], row_max(tile_max));
        const T reference = m_new == -T(INFINITY) ? T(0) : m_new;
        const T rescale = std::exp(m[r] - reference);  // 0 on the row's first keys, where m = −∞
        m[r] = m_new;
        l[r] *= rescale;
        GG_UNROLL
        for (int c = 0; c < Layout<T, kD>::lane_cols; ++c) acc[r][c] *= rescale;
        if (f == ScoreFunction::softpick) {
            const T floor = std::exp(-reference);
            GG_UNROLL
            for (int k = 0; k < kLaneCols; ++k) {
                const T shifted = pair_visible(visible, r, k) ? std::exp(p[r][k] - reference) - floor : T(0);
                l[r] += std::abs(shifted);
                p[r][k] = max(shifted, T(0));
            }
            continue;
        }
        GG_UNROLL
        for (int k = 0; k < kLaneCols; ++k) l[r] += p[r][k] = std::exp(p[r][k] - reference);
    }
}

// O (B, H, Tq, D), lse (B, H, Tq) ← Q (B, H, Tq, D), K, V (B, Hkv, Tk, D), sink (H) (read for
// ScoreFunction::sink only); lse and sink contiguous, the others any Operand.
// grid (B·H, ⌈Tq / 64⌉), block kThreads, Layout<T, kD>::shared_bytes(2, 0).
template <class S, int kD>
__global__ void __launch_bounds__(kThreads, Layout<compute_t<S>, kD>::min_blocks(2, 0))
    attention_forward_kernel(AttentionShape s, bool vector, Operand<S> O, compute_t<S>* lse, Operand<const S> Q,
                             Operand<const S> K, Operand<const S> V, const compute_t<S>* sink) {
    using T = compute_t<S>;
    using L = Layout<T, kD>;
    const int D = int(s.D);
    const int64_t bh = blockIdx.x, bhk = kv_head(s, bh);
    const int64_t i0 = heavy_first_tile() * kTile, i_end = min(i0 + kTile, s.Tq);
    const Lane lane = this_lane();

    GG_DYNAMIC_SHARED(T, smem);
    T* Qs = smem;                                      // (64, ld) this block's queries
    T* KVs = Qs + L::tile;                             // (64, ld) the current keys, then their values
    T* P = KVs + L::tile + lane.warp * L::weights;     // (64, ldw) this warp's probabilities, P[j][row]
    load_tile<T, kD>(Qs, Q, bh, s.H, i0, s.Tq, D, vector);

    T m[kLaneRows], l[kLaneRows];  // running max (the same in a row's 8 lanes), this lane's part of the sum
    T bias[kLaneRows];             // sigmoid's b_i = −log(keys query i sees)
    Accumulator<T, kD> acc;        // this lane's part of Σ_j exp(s_ij − m_i) v_j
    clear<T, kD>(acc);
    const RowStart<T> start = row_start(s.score_fn, s.score_fn == ScoreFunction::sink ? sink[bh % s.H] : T(0));
    GG_UNROLL
    for (int r = 0; r < kLaneRows; ++r) {
        m[r] = start.m, l[r] = lane.cg == 0 ? start.z : T(0);  // the slot counted once in its row
        bias[r] = sigmoid_bias<T>(keys_seen(s, i0 + lane.row(r)));
    }

    for (int64_t j0 = 0; j0 < s.Tk; j0 += kTile) {
        const int64_t j_end = min(j0 + kTile, s.Tk);
        const TileMask mask = classify(s, i0, i_end, j0, j_end);
        if (mask == TileMask::empty) continue;
        __syncthreads();  // every warp is done with the previous tile's values
        load_tile<T, kD>(KVs, K, bhk, s.Hkv, j0, s.Tk, D, vector);
        __syncthreads();
        LaneScores<T> p;
        tile_scores<T, kD>(p, Qs, KVs, lane);
        const uint32_t visible = mask == TileMask::full ? kAllPairs : visible_pairs(s, lane, i0, j0, true);
        online_softmax<T, kD>(s.score_fn, p, m, l, acc, bias, visible, T(s.scale));
        store_weights<T, kD>(P, p, lane);
        __syncthreads();  // every warp is done with the keys
        load_tile<T, kD>(KVs, V, bhk, s.Hkv, j0, s.Tk, D, vector);
        __syncthreads();  // the values, and every lane's P, are in place
        tile_accumulate<T, kD>(acc, P, KVs, lane);
    }

    GG_UNROLL
    for (int r = 0; r < kLaneRows; ++r) {
        const T divisor = row_divisor(s.score_fn, m[r], row_sum(l[r]));
        const int64_t i = i0 + lane.row(r);
        if (i >= i_end) continue;
        // A softmax row that sees no key at all has O = 0 and lse = −∞.
        store_lane_row<T, kD>(O.rows(bh, s.H) + i * O.row, acc[r], divisor > 0 ? T(1) / divisor : T(0), D, vector,
                              lane);
        if (lane.cg == 0) lse[bh * s.Tq + i] = row_statistic(s.score_fn, m[r], divisor, keys_seen(s, i));
    }
}

// probs (B, H, Tq, Tk) ← the weights of Q Kᵀ · scale from lse (score_weight), 0 where hidden; one
// thread per element, grid-stride.
template <class S, class T = compute_t<S>>
__global__ void attention_probs_kernel(AttentionShape s, S* probs, Operand<const S> Q, Operand<const S> K,
                                       const T* lse) {
    const int64_t n = s.B * s.H * s.Tq * s.Tk;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
        const int64_t j = e % s.Tk, row = e / s.Tk, i = row % s.Tq, bh = row / s.Tq;
        const KeyRange keys = visible_keys(s, i);
        T p = 0;
        if (j >= keys.first && j <= keys.last) {
            const S* q = Q.rows(bh, s.H) + i * Q.row;                // (D)
            const S* k = K.rows(kv_head(s, bh), s.Hkv) + j * K.row;  // (D)
            T dot = 0;
            for (int64_t d = 0; d < s.D; ++d) dot += T(q[d]) * T(k[d]);
            p = score_weight(s.score_fn, dot * T(s.scale), lse[row]);
        }
        probs[e] = S(p);
    }
}

template <class S, int kD>
void forward(const AttentionShape& s, const View& O, const View& lse, const View& Q, const View& K, const View& V,
             const View& sink) {
    using T = compute_t<S>;
    if (s.B * s.H * s.Tq == 0) return;
    const bool vector = vectors_fit<T>(s.D, {O, Q, K, V});
    launch("attention_forward", attention_forward_kernel<S, kD>, tile_grid("attention_forward", s.B * s.H, s.Tq),
           dim3(kThreads), Layout<T, kD>::shared_bytes(2, 0), s, vector, operand<S>(O), static_cast<T*>(lse.data),
           operand<const S>(Q), operand<const S>(K), operand<const S>(V), static_cast<const T*>(sink.data));
}

// probs from the lse that either forward kernel wrote, when asked for.
template <class S>
void write_probs(const AttentionShape& s, const View& probs, const View& Q, const View& K, const View& lse) {
    using T = compute_t<S>;
    if (probs.data == nullptr || probs.numel() == 0) return;
    const int64_t blocks = std::min<int64_t>((probs.numel() + 255) / 256, 65536);
    launch("attention_probs", attention_probs_kernel<S>, dim3(unsigned(blocks)), dim3(256), 0, s,
           static_cast<S*>(probs.data), operand<const S>(Q), operand<const S>(K), static_cast<const T*>(lse.data));
}

}  // namespace

void attention_forward(const AttentionShape& s, const View& O, const View& lse, const View& probs, const View& Q,
                       const View& K, const View& V, const View& sink) {
    attention::check_lse_dtype("attention_forward", Q.dtype, lse);
    attention::check_sink("attention_forward", s, lse, sink);
    if (attention::mma::mma_fits(s, Q.dtype, {O, Q, K, V})) {
        attention_forward_mma(s, O, lse, Q, K, V, sink);
        return write_probs<bfloat16>(s, probs, Q, K, lse);
    }
    attention::dispatch("attention_forward", Q.dtype, s.D, [&]<class S, int kD>() {
        forward<S, kD>(s, O, lse, Q, K, V, sink);
        write_probs<S>(s, probs, Q, K, lse);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

// attention_backward.cu — gradients of fused attention (cuda/attention_forward.cu), FlashAttention-2
// style: the probabilities are recomputed tile by tile from the saved lse, never stored.
//
// With P_ij = exp(q_i · k_j · scale − lse_i) over the keys j that query i sees, and dO the
// gradient of O:
//   dV_j = Σ_i P_ij dO_i                       dP_ij = dO_i · v_j
//   dS_ij = P_ij (dP_ij − Δ_i),  Δ_i = dO_i · O_i  (= Σ_j P_ij dP_ij, the softmax's own term)
//   dQ_i = scale Σ_j dS_ij k_j                 dK_j = scale Σ_i dS_ij q_i
// summed over every query head of the kv head's group (GQA) for dK and dV.
//
// Two kernels, each output element written by one block in a fixed order (no atomics), so
// two runs give the same bits. Both recompute P and dS: that costs the dQ kernel two of the
// products the dK/dV kernel already did, and saves both a (Tq × Tk) buffer or float atomics.
// Each computes the Δ of the query tiles it reads, from dO and O, while it loads them (two
// threads per row): O(64·D) work against the tile's O(64·64·D), and no scratch memory.
//   dK/dV  one block of 4 warps per (b, kv head, tile of 64 keys), grid (B·Hkv, ⌈Tk / 64⌉).
//          K and V of the block stay in shared memory; it walks the query heads of the group
//          and, for each, the query tiles of the causal/window band (Q, dO, lse, Δ loaded).
//          The micro-tiles (attention_tiles.cuh) have keys as rows, queries as columns:
//            Sᵀ = K Qᵀ → Pᵀ into the warp's buffer → dV += Pᵀ dO;
//            dPᵀ = V dOᵀ → dSᵀ = Pᵀ ⊙ (dPᵀ − Δ) into the buffer → dK += dSᵀ Q.
//   dQ     one block of 4 warps per (b, h, tile of 64 queries), grid (B·H, ⌈Tq / 64⌉), last
//          tile first. Q, dO, lse and Δ of the block stay; the key tiles of the band stream
//          through one buffer, values first, then keys:
//            dP = dO Vᵀ (parked in the warp's buffer) → S = Q Kᵀ → dS → dQ += dS K.
// Parking P or dP in the weight buffer while the next product runs keeps one 4 × 8 micro-tile
// in registers instead of two: the f64 kernels need that room.
// Other score functions (tensor/score_functions.h): P is score_weight(s, lse) (σ(s + b) for
// sigmoid, whose lse holds b), dS is score_gradient: P (1 − P) dP for sigmoid, and for softpick
// e^{s − lse} (1[s > 0] dP − sign(s) Δ), which reads the score itself: the dK/dV kernel, which
// has let S go by then, computes Sᵀ = K Qᵀ once more for it (one product more per pair of
// tiles, softpick only). The function is a template parameter (kF: softmax, whose backward
// softmax1 and sink share, sigmoid or softpick), so that each kernel holds the registers of its
// own function only: one kernel for all three spilled, where the softmax one does not.
// bf16 tensors with D = 16, 32, 64 or 128 whose rows all start on 16 bytes go to the tensor-core
// kernels of attention_backward_mma.cu instead, the same two kernels in five mma products per
// pair of tiles; the choice is made here, on the host (attention_mma.cuh).
#include <algorithm>

#include "cuda/attention_mma.cuh"
#include "cuda/attention_tiles.cuh"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

using namespace attention;

// dK, dV (B, Hkv, Tk, D) ← dO, Q, O (B, H, Tq, D), K, V (B, Hkv, Tk, D), lse (B, H, Tq).
// grid (B·Hkv, ⌈Tk / 64⌉), block kThreads, Layout<T, kD>::shared_bytes(4, 3 · 64).
template <class S, int kD, ScoreFunction kF>
__global__ void __launch_bounds__(kThreads, Layout<compute_t<S>, kD>::min_blocks(4, 3 * kTile))
    attention_dkdv_kernel(AttentionShape s, bool vector, Operand<S> dK, Operand<S> dV, Operand<const S> dO,
                          Operand<const S> Q, Operand<const S> K, Operand<const S> V, Operand<const S> O,
                          const compute_t<S>* lse) {
    using T = compute_t<S>;
    using L = Layout<T, kD>;
    const int D = int(s.D);
    const int64_t bhk = blockIdx.x, b = bhk / s.Hkv, hk = bhk % s.Hkv, group = s.H / s.Hkv;
    const int64_t j0 = int64_t(blockIdx.y) * kTile, j_end = min(j0 + kTile, s.Tk);
    const Lane lane = this_lane();

    GG_DYNAMIC_SHARED(T, smem);
    T* Ks = smem;                                   // (64, ld) this block's keys
    T* Vs = Ks + L::tile;                           // (64, ld) and values
    T* Qs = Vs + L::tile;                           // (64, ld) the current query tile
    T* dOs = Qs + L::tile;                          // (64, ld)
    T* W = dOs + L::tile + lane.warp * L::weights;  // (64, ldw) this warp's Pᵀ, then dSᵀ: W[i][key]
    T* lse_s = dOs + L::tile + kWarps * L::weights;  // (64) of the query tile
    T(*delta)[2] = reinterpret_cast<T(*)[2]>(lse_s + kTile);  // (64, 2) halves of Δ
    load_tile<T, kD>(Ks, K, bhk, s.Hkv, j0, s.Tk, D, vector);
    load_tile<T, kD>(Vs, V, bhk, s.Hkv, j0, s.Tk, D, vector);

    Accumulator<T, kD> dk, dv;  // this lane's part of its 4 keys' sums
    clear<T, kD>(dk);
    clear<T, kD>(dv);

    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        const int64_t bh = b * s.H + h;
        for (int64_t i0 = 0; i0 < s.Tq; i0 += kTile) {
            const int64_t i_end = min(i0 + kTile, s.Tq);
            const TileMask mask = classify(s, i0, i_end, j0, j_end);
            if (mask == TileMask::empty) continue;
            __syncthreads();  // every warp is done with the previous query tile
            load_tile<T, kD>(Qs, Q, bh, s.H, i0, s.Tq, D, vector);
            load_tile<T, kD>(dOs, dO, bh, s.H, i0, s.Tq, D, vector);
            load_row_stats<T, kD>(lse_s, delta, lse + bh * s.Tq, dO, O, bh, s.H, i0, s.Tq, D, vector);
            __syncthreads();

            LaneScores<T> p;  // Pᵀ: the lane's 4 keys × 8 queries
            tile_scores<T, kD>(p, Ks, Qs, lane);
            const auto weights = [&](uint32_t visible) {
                GG_UNROLL
                for (int k = 0; k < kLaneCols; ++k) {
                    const T lse_i = lse_s[lane.col(k)];
                    GG_UNROLL
                    for (int r = 0; r < kLaneRows; ++r)
                        p[r][k] = pair_visible(visible, r, k) ? score_weight(kF, p[r][k] * T(s.scale), lse_i) : T(0);
                }
            };
            if (mask == TileMask::full) weights(kAllPairs);
            else weights(visible_pairs(s, lane, j0, i0, false));
            store_weights<T, kD>(W, p, lane);
            __syncwarp();
            tile_accumulate<T, kD>(dv, W, dOs, lane);

            LaneScores<T> ds;  // dPᵀ, then dSᵀ (0 where P is)
            tile_scores<T, kD>(ds, Vs, dOs, lane);
            // p: Pᵀ again, or softpick's scores Sᵀ: score_gradient reads the weight, or the score.
            if constexpr (kF == ScoreFunction::softpick) tile_scores<T, kD>(p, Ks, Qs, lane);
            else load_weights<T, kD>(p, W, lane);
            const auto gradients = [&](uint32_t visible) {
                GG_UNROLL
                for (int k = 0; k < kLaneCols; ++k) {
                    const T delta_i = delta[lane.col(k)][0] + delta[lane.col(k)][1], lse_i = lse_s[lane.col(k)];
                    GG_UNROLL
                    for (int r = 0; r < kLaneRows; ++r)
                        ds[r][k] = pair_visible(visible, r, k)
                                       ? score_gradient(kF, p[r][k] * T(s.scale), p[r][k], lse_i, ds[r][k], delta_i)
                                       : T(0);
                }
            };
            // A hidden pair's weight is 0, and so is its gradient, except from softpick's scores.
            if (kF != ScoreFunction::softpick || mask == TileMask::full) gradients(kAllPairs);
            else gradients(visible_pairs(s, lane, j0, i0, false));
            __syncwarp();  // every lane has read Pᵀ before dSᵀ replaces it
            store_weights<T, kD>(W, ds, lane);
            __syncwarp();
            tile_accumulate<T, kD>(dk, W, Qs, lane);
        }
    }

    GG_UNROLL
    for (int r = 0; r < kLaneRows; ++r) {
        const int64_t j = j0 + lane.row(r);
        if (j >= j_end) continue;
        store_lane_row<T, kD>(dK.rows(bhk, s.Hkv) + j * dK.row, dk[r], T(s.scale), D, vector, lane);
        store_lane_row<T, kD>(dV.rows(bhk, s.Hkv) + j * dV.row, dv[r], T(1), D, vector, lane);
    }
}

// dQ (B, H, Tq, D) ← dO, Q, O (B, H, Tq, D), K, V (B, Hkv, Tk, D), lse (B, H, Tq).
// grid (B·H, ⌈Tq / 64⌉), block kThreads, Layout<T, kD>::shared_bytes(3, 3 · 64).
template <class S, int kD, ScoreFunction kF>
__global__ void __launch_bounds__(kThreads, Layout<compute_t<S>, kD>::min_blocks(3, 3 * kTile))
    attention_dq_kernel(AttentionShape s, bool vector, Operand<S> dQ, Operand<const S> dO, Operand<const S> Q,
                        Operand<const S> K, Operand<const S> V, Operand<const S> O, const compute_t<S>* lse) {
    using T = compute_t<S>;
    using L = Layout<T, kD>;
    const int D = int(s.D);
    const int64_t bh = blockIdx.x, bhk = kv_head(s, bh);
    const int64_t i0 = heavy_first_tile() * kTile, i_end = min(i0 + kTile, s.Tq);
    const Lane lane = this_lane();

    GG_DYNAMIC_SHARED(T, smem);
    T* Qs = smem;                                    // (64, ld) this block's queries
    T* dOs = Qs + L::tile;                           // (64, ld)
    T* KVs = dOs + L::tile;                          // (64, ld) the current values, then keys
    T* W = KVs + L::tile + lane.warp * L::weights;   // (64, ldw) this warp's dP, then dS: W[j][row]
    T* lse_s = KVs + L::tile + kWarps * L::weights;  // (64)
    T(*delta)[2] = reinterpret_cast<T(*)[2]>(lse_s + kTile);  // (64, 2) halves of Δ
    load_tile<T, kD>(Qs, Q, bh, s.H, i0, s.Tq, D, vector);
    load_tile<T, kD>(dOs, dO, bh, s.H, i0, s.Tq, D, vector);
    load_row_stats<T, kD>(lse_s, delta, lse + bh * s.Tq, dO, O, bh, s.H, i0, s.Tq, D, vector);
    __syncthreads();
    T lse_r[kLaneRows], delta_r[kLaneRows];  // of the lane's 4 queries
    GG_UNROLL
    for (int r = 0; r < kLaneRows; ++r) {
        lse_r[r] = lse_s[lane.row(r)];
        delta_r[r] = delta[lane.row(r)][0] + delta[lane.row(r)][1];
    }

    Accumulator<T, kD> dq;  // this lane's part of its 4 queries' Σ_j dS_ij k_j
    clear<T, kD>(dq);
    for (int64_t j0 = 0; j0 < s.Tk; j0 += kTile) {
        const int64_t j_end = min(j0 + kTile, s.Tk);
        const TileMask mask = classify(s, i0, i_end, j0, j_end);
        if (mask == TileMask::empty) continue;
        __syncthreads();  // every warp is done with the previous keys
        load_tile<T, kD>(KVs, V, bhk, s.Hkv, j0, s.Tk, D, vector);
        __syncthreads();
        LaneScores<T> ds;  // dP, then dS
        tile_scores<T, kD>(ds, dOs, KVs, lane);
        store_weights<T, kD>(W, ds, lane);  // parked: only this lane reads its slots back
        __syncthreads();  // every warp is done with the values
        load_tile<T, kD>(KVs, K, bhk, s.Hkv, j0, s.Tk, D, vector);
        __syncthreads();
        LaneScores<T> p;
        tile_scores<T, kD>(p, Qs, KVs, lane);
        load_weights<T, kD>(ds, W, lane);
        const auto gradients = [&](uint32_t visible) {
            GG_UNROLL
            for (int r = 0; r < kLaneRows; ++r) {
                GG_UNROLL
                for (int c = 0; c < kLaneCols; ++c) {
                    const T x = p[r][c] * T(s.scale);
                    ds[r][c] = pair_visible(visible, r, c)
                                   ? score_gradient(kF, x, score_weight(kF, x, lse_r[r]), lse_r[r], ds[r][c], delta_r[r])
                                   : T(0);
                }
            }
        };
        if (mask == TileMask::full) gradients(kAllPairs);
        else gradients(visible_pairs(s, lane, i0, j0, true));
        store_weights<T, kD>(W, ds, lane);
        __syncwarp();
        tile_accumulate<T, kD>(dq, W, KVs, lane);
    }

    GG_UNROLL
    for (int r = 0; r < kLaneRows; ++r) {
        const int64_t i = i0 + lane.row(r);
        if (i < i_end) store_lane_row<T, kD>(dQ.rows(bh, s.H) + i * dQ.row, dq[r], T(s.scale), D, vector, lane);
    }
}

template <class S, int kD, ScoreFunction kF>
void backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
              const View& Q, const View& K, const View& V, const View& O, const View& lse) {
    if (s.D == 0) return;  // every gradient is empty
    using T = compute_t<S>;
    using L = Layout<T, kD>;
    const bool vector = vectors_fit<T>(s.D, {dQ, dK, dV, dO, Q, K, V, O});
    if (s.B * s.Hkv * s.Tk > 0)
        launch("attention_backward_dkdv", attention_dkdv_kernel<S, kD, kF>,
               tile_grid("attention_backward", s.B * s.Hkv, s.Tk), dim3(kThreads), L::shared_bytes(4, 3 * kTile), s,
               vector, operand<S>(dK), operand<S>(dV), operand<const S>(dO), operand<const S>(Q), operand<const S>(K),
               operand<const S>(V), operand<const S>(O), static_cast<const T*>(lse.data));
    if (s.B * s.H * s.Tq > 0)
        launch("attention_backward_dq", attention_dq_kernel<S, kD, kF>,
               tile_grid("attention_backward", s.B * s.H, s.Tq), dim3(kThreads), L::shared_bytes(3, 3 * kTile), s,
               vector, operand<S>(dQ), operand<const S>(dO), operand<const S>(Q), operand<const S>(K),
               operand<const S>(V), operand<const S>(O), static_cast<const T*>(lse.data));
}

}  // namespace

void attention_backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
                        const View& Q, const View& K, const View& V, const View& O, const View& lse, const View&) {
    attention::check_lse_dtype("attention_backward", Q.dtype, lse);
    if (attention::mma::mma_fits(s, Q.dtype, {dQ, dK, dV, dO, Q, K, V, O}))
        return attention_backward_mma(s, dQ, dK, dV, dO, Q, K, V, O, lse);
    attention::dispatch("attention_backward", Q.dtype, s.D, [&]<class S, int kD>() {
        // softmax1 and sink differ from softmax in their lse only.
        if (s.score_fn == ScoreFunction::sigmoid)
            backward<S, kD, ScoreFunction::sigmoid>(s, dQ, dK, dV, dO, Q, K, V, O, lse);
        else if (s.score_fn == ScoreFunction::softpick)
            backward<S, kD, ScoreFunction::softpick>(s, dQ, dK, dV, dO, Q, K, V, O, lse);
        else backward<S, kD, ScoreFunction::softmax>(s, dQ, dK, dV, dO, Q, K, V, O, lse);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

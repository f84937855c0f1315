// attention_backward_mma.cu — gradients of fused attention for bf16 tensors on the tensor cores
// (mma.sync m16n8k16): the same gradients as cuda/attention_backward.cu (its opening comment
// has the formulas), in the five products per pair of tiles of FlashAttention-2 (arXiv
// 2307.08691, Algorithm 2), with the probabilities recomputed from the saved lse:
//   S = Q Kᵀ,  P = exp(S·scale − lse),  dV += Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − Δ),
//   dK += scale · dSᵀ Q,  dQ += scale · dS K,     Δ_i = dO_i · O_i.
// The entry (attention_backward.cu) sends here the calls attention_mma.cuh's mma_fits accepts:
// dO, Q, K, V, O read and dQ, dK, dV written through their strides, every row on 16 bytes.
//
// How the work is cut: as in the SIMT kernels, two kernels, each output row written by one
// warp of one block in a fixed order: no atomics, and two runs give the same bits
// (FlashAttention-2 adds dQ up with atomics across key tiles instead; recomputing S and dP in
// a second kernel costs two more products per pair of tiles and keeps the order fixed).
//   dK/dV  one block of 4 warps per (b, kv head, tile of 64 keys), grid (B·Hkv, ⌈Tk / 64⌉);
//          warp w owns keys 16w .. 16w + 15 and computes, with keys as rows:
//            Sᵀ = K Qᵀ → Pᵀ → dV += Pᵀ dO;  dPᵀ = V dOᵀ → dSᵀ = Pᵀ ⊙ (dPᵀ − Δ) → dK += dSᵀ Q,
//          over the query tiles of the band of every query head of its group (GQA).
//   dQ     one block of 4 warps per (b, h, tile of 64 queries), grid (B·H, ⌈Tq / 64⌉), last
//          tile first; warp w owns queries 16w .. 16w + 15:
//            S = Q Kᵀ → P;  dP = dO Vᵀ → dS → dQ += dS K,
//          over the key tiles of the band.
// The block's own tiles (K and V, or Q and dO) stay in shared memory; the streamed ones (Q, dO
// with their lse and Δ, or K and V) go through two stages, the cp.async copies of the next tile
// of the band in flight while the warps work on this one: one wait and one barrier per tile. Every product is one of the two of
// attention_mma.cuh (scores from two tiles, or weights in registers times a tile), so P and dS
// never leave the registers. Δ of a query tile is summed in f32 from dO and O as the tile is
// loaded (load_row_stats, two threads a row): O(64·D) work against the products' O(64·64·D).
//
// Numerics: S and dP are exact products of bf16 summed in f32. P is computed in f32 and rounded
// to bf16 once, as the A fragments of dV's product; dS is computed from that bf16 P rather than
// the f32 one, so that P holds half the registers while dP is computed (the dK/dV kernel at
// D = 128 is at the limit of 255) and both kernels get the same dS; dS is rounded to bf16 in
// turn. So each
// term of dV carries one bf16 rounding (at most 2⁻⁸ of it, bf16 having 8 significant bits),
// each term of dK and dQ two, and each gradient one more when it is stored.
// Why it should be fast: the products run on the tensor cores, and nothing but the tiles goes
// through shared memory. Speed not measured on a GPU.
#include <cmath>

#include "cuda/attention_mma.cuh"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD::attention::mma {

namespace {

// A query tile's lse and the halves of Δ (load_row_stats), in f32, in shared memory.
struct RowStats {
    float lse[kTile];
    float delta[kTile][2];
    __device__ float delta_of(int row) const { return delta[row][0] + delta[row][1]; }
};

// The streamed stage of the dK/dV kernel: a query tile, its statistics, and the keys of the
// block's tile that each of its queries sees.
template <int kD>
struct QueryStage {
    bfloat16 Q[kTile * Tiles<kD>::ld];   // (64, ld)
    bfloat16 dO[kTile * Tiles<kD>::ld];  // (64, ld)
    RowStats stats;
    TileColumns keys[kTile];
};

// The query tiles that a block of keys [j0, j_end) streams (start_stream, attention_mma.cuh):
// tile t is query tile t mod tiles_per_head of query head hk·group + t / tiles_per_head of
// batch b, every head of the kv head's group in turn.
template <int kD>
struct QueryStream {
    const AttentionShape& s;
    int64_t b, hk, j0, j_end;
    Operand<const bfloat16> Q, dO, O;  // (B, H, Tq, kD)
    const float* lse;                  // (B, H, Tq)
    QueryStage<kD>* stages;            // two

    __device__ int64_t tiles_per_head() const { return (s.Tq + kTile - 1) / kTile; }
    __device__ int64_t end() const { return s.H / s.Hkv * tiles_per_head(); }
    __device__ int64_t i0(int64_t t) const { return t % tiles_per_head() * kTile; }
    __device__ TileMask mask(int64_t t) const { return classify(s, i0(t), ::min(i0(t) + kTile, s.Tq), j0, j_end); }
    __device__ bool empty(int64_t t) const { return mask(t) == TileMask::empty; }
    __device__ void load(int64_t t, int stage) const {
        const int64_t bh = b * s.H + hk * (s.H / s.Hkv) + t / tiles_per_head(), i = i0(t);
        QueryStage<kD>& to = stages[stage];
        load_tile<kD>(to.Q, Q, bh, s.H, i, s.Tq);
        load_tile<kD>(to.dO, dO, bh, s.H, i, s.Tq);
        load_row_stats<float, kD>(to.stats.lse, to.stats.delta, lse + bh * s.Tq, dO, O, bh, s.H, i, s.Tq, kD, true);
        if (threadIdx.x < kTile) to.keys[threadIdx.x] = visible_columns(s, i + threadIdx.x, j0);
    }
};

// p ← exp(p·scale − lse) where the mask keeps the score, else 0: the probabilities from the
// scores, in base 2 (c = scale·log2(e)). Tiles inside the band take no mask; on its edge
// visible(e, col) says whether element e of column col is kept. lse_of(e, col) is the lse of
// that score's query.
template <int N, class Visible, class Lse>
__device__ void probabilities(Scores<N>& p, const AttentionShape& s, TileMask mask, const MmaLane& lane,
                              const Visible& visible, const Lse& lse_of) {
    const float c = float(s.scale) * kLog2e;
    GG_UNROLL
    for (int n = 0; n < N; ++n) {
        GG_UNROLL
        for (int e = 0; e < 4; ++e) {
            const int col = lane.col(n, e);
            const bool kept = mask == TileMask::full || visible(e, col);
            p[n][e] = kept ? exp2f(p[n][e] * c - lse_of(e, col) * kLog2e) : 0.0f;
        }
    }
}

// dS = P ⊙ (dP − Δ) in place of dP, with P in bf16 as dV's product took it; delta_of(e, col)
// the Δ of the score's query.
template <int N, class Delta>
__device__ void score_gradients(Scores<N>& dp, const Weights<N>& p, const MmaLane& lane, const Delta& delta_of) {
    GG_UNROLL
    for (int n = 0; n < N; ++n) {
        GG_UNROLL
        for (int e = 0; e < 4; ++e) dp[n][e] = weight(p, n, e) * (dp[n][e] - delta_of(e, lane.col(n, e)));
    }
}

// dK, dV (B, Hkv, Tk, kD) ← dO, Q, O (B, H, Tq, kD), K, V (B, Hkv, Tk, kD), all bf16; lse (B, H, Tq) f32.
// lse contiguous, the others any Operand whose rows start on 16 bytes.
// grid (B·Hkv, ⌈Tk / 64⌉), block kThreads, shared 2 tiles + 2 QueryStage<kD>.
template <int kD>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_dkdv_mma_kernel(AttentionShape s, Operand<bfloat16> dK, Operand<bfloat16> dV,
                              Operand<const bfloat16> dO, Operand<const bfloat16> Q, Operand<const bfloat16> K,
                              Operand<const bfloat16> V, Operand<const bfloat16> O, const float* lse) {
    using L = Tiles<kD>;
    // A warp holds dK and dV (2 × kD / 2 f32 a lane) for the whole loop; at D = 128 that leaves
    // too few registers for the scores and dP of 64 queries at once, so it takes 32 at a time.
    constexpr int kCols = kD == 128 ? 32 : kTile, kN = kCols / kMmaCols;
    const int64_t bhk = blockIdx.x;
    const int64_t j0 = int64_t(blockIdx.y) * kTile, j_end = ::min(j0 + kTile, s.Tk);
    const MmaLane lane = this_mma_lane();

    GG_DYNAMIC_SHARED(bfloat16, smem);
    bfloat16* Ks = smem;          // (64, ld) this block's keys
    bfloat16* Vs = Ks + L::tile;  // (64, ld) and values
    const QueryStream<kD> queries{s, bhk / s.Hkv, bhk % s.Hkv, j0, j_end, Q, dO, O, lse,
                                  reinterpret_cast<QueryStage<kD>*>(Vs + L::tile)};
    const int64_t first = start_stream(queries);
    load_tile<kD>(Ks, K, bhk, s.Hkv, j0, s.Tk);
    load_tile<kD>(Vs, V, bhk, s.Hkv, j0, s.Tk);
    tiles_landed();

    const bfloat16* own_k = Ks + lane.warp * kMmaRows * L::ld;  // (16, ld) the warp's keys
    const bfloat16* own_v = Vs + lane.warp * kMmaRows * L::ld;  // (16, ld) and values
    Accumulator<kD> dk, dv;                                      // the warp's 16 keys × kD
    clear(dk);
    clear(dv);
    run_stream(queries, first, [&](int64_t t, int stage) {
        const QueryStage<kD>& in = queries.stages[stage];
        const TileMask mask = queries.mask(t);
        // The warp's 16 keys against kCols queries at a time: see kCols above.
        GG_UNROLL
        for (int c0 = 0; c0 < kTile; c0 += kCols) {
            const bfloat16* q = in.Q + c0 * L::ld;    // (kCols, ld)
            const bfloat16* d_o = in.dO + c0 * L::ld;  // (kCols, ld)
            Weights<kN> p;  // Pᵀ in bf16: 16 keys × kCols queries
            {
                Scores<kN> s_t;  // Sᵀ, then Pᵀ in f32
                tile_scores<kD>(s_t, own_k, q, lane);
                probabilities(
                    s_t, s, mask, lane,
                    [&](int e, int col) { return in.keys[c0 + col].contains(lane.warp * kMmaRows + lane.row(e)); },
                    [&](int, int col) { return in.stats.lse[c0 + col]; });
                round_weights(p, s_t);
            }
            tile_accumulate<kD>(dv, p, d_o, lane);
            Scores<kN> ds;  // dPᵀ, then dSᵀ
            tile_scores<kD>(ds, own_v, d_o, lane);
            score_gradients(ds, p, lane, [&](int, int col) { return in.stats.delta_of(c0 + col); });
            Weights<kN> ds_w;
            round_weights(ds_w, ds);
            tile_accumulate<kD>(dk, ds_w, q, lane);
        }
    });

    const float dk_factor[2] = {float(s.scale), float(s.scale)}, dv_factor[2] = {1, 1};
    store_rows<kD>(dK, bhk, s.Hkv, j0 + lane.warp * kMmaRows, j_end, dk, dk_factor, lane);
    store_rows<kD>(dV, bhk, s.Hkv, j0 + lane.warp * kMmaRows, j_end, dv, dv_factor, lane);
}

// dQ (B, H, Tq, kD) ← dO, Q, O (B, H, Tq, kD), K, V (B, Hkv, Tk, kD), all bf16; lse (B, H, Tq) f32.
// lse contiguous, the others any Operand whose rows start on 16 bytes.
// grid (B·H, ⌈Tq / 64⌉), block kThreads, shared 2 tiles + RowStats + 4 tiles.
template <int kD>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_dq_mma_kernel(AttentionShape s, Operand<bfloat16> dQ, Operand<const bfloat16> dO,
                            Operand<const bfloat16> Q, Operand<const bfloat16> K, Operand<const bfloat16> V,
                            Operand<const bfloat16> O, const float* lse) {
    using L = Tiles<kD>;
    const int64_t bh = blockIdx.x, bhk = kv_head(s, bh);
    const int64_t i0 = heavy_first_tile() * kTile, i_end = ::min(i0 + kTile, s.Tq);
    const MmaLane lane = this_mma_lane();

    GG_DYNAMIC_SHARED(bfloat16, smem);
    bfloat16* Qs = smem;           // (64, ld) this block's queries
    bfloat16* dOs = Qs + L::tile;  // (64, ld)
    RowStats& stats = *reinterpret_cast<RowStats*>(dOs + L::tile);
    const KeyValueStream<kD> kv{s, i0, i_end, bhk, K, V, reinterpret_cast<bfloat16*>(&stats + 1)};
    const int64_t first = start_stream(kv);
    load_tile<kD>(Qs, Q, bh, s.H, i0, s.Tq);
    load_tile<kD>(dOs, dO, bh, s.H, i0, s.Tq);
    load_row_stats<float, kD>(stats.lse, stats.delta, lse + bh * s.Tq, dO, O, bh, s.H, i0, s.Tq, kD, true);
    tiles_landed();

    const int own = lane.warp * kMmaRows;  // the warp's first row of the tile
    const float lse_r[2] = {stats.lse[own + lane.row(0)], stats.lse[own + lane.row(2)]};  // rows g, g + 8
    const float delta_r[2] = {stats.delta_of(own + lane.row(0)), stats.delta_of(own + lane.row(2))};
    Accumulator<kD> dq;  // the warp's 16 queries × kD
    clear(dq);
    run_stream(kv, first, [&](int64_t tile, int stage) {
        const int64_t j0 = tile * kTile;
        Weights<kScoreTiles> p;  // P in bf16: the warp's 16 queries × 64 keys
        {
            Scores<kScoreTiles> s_t;  // S, then P in f32
            tile_scores<kD>(s_t, Qs + own * L::ld, kv.keys(stage), lane);
            const int64_t i = i0 + own + lane.g;
            const TileColumns keys[2] = {visible_columns(s, i, j0), visible_columns(s, i + 8, j0)};  // rows g, g + 8
            probabilities(
                s_t, s, kv.mask(tile), lane, [&](int e, int col) { return keys[e / 2].contains(col); },
                [&](int e, int) { return lse_r[e / 2]; });
            round_weights(p, s_t);
        }
        Scores<kScoreTiles> ds;  // dP, then dS
        tile_scores<kD>(ds, dOs + own * L::ld, kv.values(stage), lane);
        score_gradients(ds, p, lane, [&](int e, int) { return delta_r[e / 2]; });
        Weights<kScoreTiles> ds_w;
        round_weights(ds_w, ds);
        tile_accumulate<kD>(dq, ds_w, kv.keys(stage), lane);
    });

    const float factor[2] = {float(s.scale), float(s.scale)};
    store_rows<kD>(dQ, bh, s.H, i0 + own, i_end, dq, factor, lane);
}

}  // namespace

}  // namespace gg::cuda::GG_CUDA_BUILD::attention::mma

namespace gg::cuda::GG_CUDA_BUILD {

void attention_backward_mma(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
                            const View& Q, const View& K, const View& V, const View& O, const View& lse) {
    using namespace attention::mma;
    using attention::kThreads, attention::tile_grid, attention::operand;
    dispatch_head_size(s.D, [&]<int kD>() {
        const auto in = [](const View& x) { return operand<const bfloat16>(x); };
        const float* lse_data = static_cast<const float*>(lse.data);
        if (s.B * s.Hkv * s.Tk > 0)
            launch("attention_backward_dkdv_mma", attention_dkdv_mma_kernel<kD>,
                   tile_grid("attention_backward", s.B * s.Hkv, s.Tk), dim3(kThreads),
                   2 * Tiles<kD>::tile * sizeof(bfloat16) + 2 * sizeof(QueryStage<kD>), s, operand<bfloat16>(dK),
                   operand<bfloat16>(dV), in(dO), in(Q), in(K), in(V), in(O), lse_data);
        if (s.B * s.H * s.Tq > 0)
            launch("attention_backward_dq_mma", attention_dq_mma_kernel<kD>,
                   tile_grid("attention_backward", s.B * s.H, s.Tq), dim3(kThreads),
                   6 * Tiles<kD>::tile * sizeof(bfloat16) + sizeof(RowStats), s, operand<bfloat16>(dQ), in(dO), in(Q),
                   in(K), in(V), in(O), lse_data);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

// attention_backward_mma.cu — gradients of fused attention for bf16 tensors on the tensor cores
// (mma.sync m16n8k16): the same gradients as cuda/attention_backward.cu (its opening comment
// has the formulas), in the five products per pair of tiles of FlashAttention-2 (arXiv
// 2307.08691, Algorithm 2), with the probabilities recomputed from the saved lse:
//   S = Q Kᵀ,  P = exp(S·scale − lse),  dV += Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − Δ),
//   dK += scale · dSᵀ Q,  dQ += scale · dS K,     Δ_i = dO_i · O_i.
// The entry (attention_backward.cu) sends here the calls attention_mma.cuh's mma_fits accepts.
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
// with their lse and Δ, or K and V) go through two stages, the next tile of the band loading
// while the warps work on this one: one barrier per tile. Every product is one of the two of
// attention_mma.cuh (scores from two tiles, or weights in registers times a tile), so P and dS
// never leave the registers. Δ of a query tile is summed in f32 from dO and O as the tile is
// loaded (load_row_stats, two threads a row): O(64·D) work against the products' O(64·64·D).
//
// Numerics: S and dP are exact products of bf16 summed in f32, P is f32; P and dS are rounded
// to bf16 as A fragments (relative 2⁻⁹ per term of dV, dK, dQ), and each gradient once more
// when it is stored. Why it should be fast: the products run on the tensor cores, nothing
// round-trips through shared memory but the tiles. Speed not measured on a GPU.
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

// The streamed stage of the dK/dV kernel: a query tile and its statistics.
template <int kD>
struct QueryStage {
    bfloat16 Q[kTile * Tiles<kD>::ld];   // (64, ld)
    bfloat16 dO[kTile * Tiles<kD>::ld];  // (64, ld)
    RowStats stats;
};

// p ← exp(p·scale − lse) where visible(row, col), else 0: the probabilities from the scores,
// lse_of(row, col) the lse of the pair's query, all in base 2 (c = scale·log2(e)).
template <class Visible, class Lse>
__device__ void probabilities(Scores& p, float c, const MmaLane& lane, const Visible& visible, const Lse& lse_of) {
    GG_UNROLL
    for (int n = 0; n < kScoreTiles; ++n) {
        GG_UNROLL
        for (int e = 0; e < 4; ++e) {
            const int row = lane.row(e), col = lane.col(n, e);
            p[n][e] = visible(row, col) ? exp2f(p[n][e] * c - lse_of(row, col) * kLog2e) : 0.0f;
        }
    }
}

// dS = P ⊙ (dP − Δ) in place of dP, delta_of(row, col) the Δ of the pair's query.
template <class Delta>
__device__ void score_gradients(Scores& dp, const Scores& p, const MmaLane& lane, const Delta& delta_of) {
    GG_UNROLL
    for (int n = 0; n < kScoreTiles; ++n) {
        GG_UNROLL
        for (int e = 0; e < 4; ++e) dp[n][e] = p[n][e] * (dp[n][e] - delta_of(lane.row(e), lane.col(n, e)));
    }
}

// Runs probabilities(p, ...) with the mask the tile needs: none inside the band, sees() on its
// edge. own_queries: the rows are queries (dQ), else keys (dK/dV); own0, col0 where they start.
template <class Lse>
__device__ void band_probabilities(Scores& p, const AttentionShape& s, TileMask mask, bool own_queries, int64_t own0,
                                   int64_t col0, const MmaLane& lane, const Lse& lse_of) {
    const float c = float(s.scale) * kLog2e;
    if (mask == TileMask::full) return probabilities(p, c, lane, [](int, int) { return true; }, lse_of);
    probabilities(
        p, c, lane,
        [&](int row, int col) {
            const int64_t own = own0 + row, other = col0 + col;
            return own_queries ? sees(s, own, other) : sees(s, other, own);
        },
        lse_of);
}

// dK, dV (B, Hkv, Tk, kD) ← dO, Q, O (B, H, Tq, kD), K, V (B, Hkv, Tk, kD), all bf16; lse (B, H, Tq) f32.
// grid (B·Hkv, ⌈Tk / 64⌉), block kThreads, shared 2 tiles + 2 QueryStage<kD>.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_mma_kernel(AttentionShape s, bfloat16* dK, bfloat16* dV, const bfloat16* dO, const bfloat16* Q,
                              const bfloat16* K, const bfloat16* V, const bfloat16* O, const float* lse) {
    using L = Tiles<kD>;
    const int64_t bhk = blockIdx.x, b = bhk / s.Hkv, hk = bhk % s.Hkv, group = s.H / s.Hkv;
    const int64_t j0 = int64_t(blockIdx.y) * kTile, j_end = ::min(j0 + kTile, s.Tk);
    const MmaLane lane = this_mma_lane();

    GG_DYNAMIC_SHARED(bfloat16, smem);
    bfloat16* Ks = smem;             // (64, ld) this block's keys
    bfloat16* Vs = Ks + L::tile;     // (64, ld) and values
    QueryStage<kD>* stages = reinterpret_cast<QueryStage<kD>*>(Vs + L::tile);  // two
    const int64_t query_tiles = (s.Tq + kTile - 1) / kTile, tiles = group * query_tiles;
    // Tile t is query tile t mod query_tiles of query head hk·group + t / query_tiles.
    const auto empty = [&](int64_t t) {
        const int64_t i0 = t % query_tiles * kTile;
        return classify(s, i0, ::min(i0 + kTile, s.Tq), j0, j_end) == TileMask::empty;
    };
    const auto load_stage = [&](int64_t t, QueryStage<kD>& stage) {
        const int64_t bh = b * s.H + hk * group + t / query_tiles, i0 = t % query_tiles * kTile;
        load_tile<kD>(stage.Q, Q + bh * s.Tq * kD, i0, s.Tq);
        load_tile<kD>(stage.dO, dO + bh * s.Tq * kD, i0, s.Tq);
        load_row_stats<float, kD>(stage.stats.lse, stage.stats.delta, lse + bh * s.Tq, dO + bh * s.Tq * kD,
                                  O + bh * s.Tq * kD, i0, s.Tq, kD, true);
    };
    load_tile<kD>(Ks, K + bhk * s.Tk * kD, j0, s.Tk);
    load_tile<kD>(Vs, V + bhk * s.Tk * kD, j0, s.Tk);
    int64_t t = next_tile(0, tiles, empty);
    if (t < tiles) load_stage(t, stages[0]);
    __syncthreads();

    const bfloat16* own_k = Ks + lane.warp * kMmaRows * L::ld;  // (16, ld) the warp's keys
    const bfloat16* own_v = Vs + lane.warp * kMmaRows * L::ld;  // (16, ld) and values
    Accumulator<kD> dk, dv;                                      // the warp's 16 keys × kD
    clear(dk);
    clear(dv);
    for (int stage = 0; t < tiles; stage ^= 1) {
        const int64_t next = next_tile(t + 1, tiles, empty);
        if (next < tiles) load_stage(next, stages[stage ^ 1]);  // its last readers passed the previous barrier
        const QueryStage<kD>& in = stages[stage];
        const int64_t i0 = t % query_tiles * kTile;
        const TileMask mask = classify(s, i0, ::min(i0 + kTile, s.Tq), j0, j_end);

        Scores p;  // Sᵀ, then Pᵀ: the warp's 16 keys × 64 queries
        tile_scores<kD>(p, own_k, in.Q, lane);
        band_probabilities(p, s, mask, false, j0 + lane.warp * kMmaRows, i0, lane,
                           [&](int, int col) { return in.stats.lse[col]; });
        tile_accumulate<kD>(dv, p, in.dO, lane);
        Scores ds;  // dPᵀ, then dSᵀ
        tile_scores<kD>(ds, own_v, in.dO, lane);
        score_gradients(ds, p, lane, [&](int, int col) { return in.stats.delta_of(col); });
        tile_accumulate<kD>(dk, ds, in.Q, lane);
        __syncthreads();  // every warp is done with this stage; the next one is complete
        t = next;
    }

    const float dk_factor[2] = {float(s.scale), float(s.scale)}, dv_factor[2] = {1, 1};
    store_rows<kD>(dK + bhk * s.Tk * kD, j0 + lane.warp * kMmaRows, j_end, dk, dk_factor, lane);
    store_rows<kD>(dV + bhk * s.Tk * kD, j0 + lane.warp * kMmaRows, j_end, dv, dv_factor, lane);
}

// dQ (B, H, Tq, kD) ← dO, Q, O (B, H, Tq, kD), K, V (B, Hkv, Tk, kD), all bf16; lse (B, H, Tq) f32.
// grid (B·H, ⌈Tq / 64⌉), block kThreads, shared 6 tiles + RowStats.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    attention_dq_mma_kernel(AttentionShape s, bfloat16* dQ, const bfloat16* dO, const bfloat16* Q, const bfloat16* K,
                            const bfloat16* V, const bfloat16* O, const float* lse) {
    using L = Tiles<kD>;
    const int64_t bh = blockIdx.x, bhk = kv_head(s, bh);
    const int64_t i0 = heavy_first_tile() * kTile, i_end = ::min(i0 + kTile, s.Tq);
    const MmaLane lane = this_mma_lane();
    const bfloat16* k = K + bhk * s.Tk * kD;  // (Tk, kD)
    const bfloat16* v = V + bhk * s.Tk * kD;  // (Tk, kD)

    GG_DYNAMIC_SHARED(bfloat16, smem);
    bfloat16* Qs = smem;              // (64, ld) this block's queries
    bfloat16* dOs = Qs + L::tile;     // (64, ld)
    bfloat16* stages = dOs + L::tile;  // two stages of (K (64, ld), V (64, ld))
    RowStats& stats = *reinterpret_cast<RowStats*>(stages + 4 * L::tile);
    const auto empty = [&](int64_t tile) {
        const int64_t j0 = tile * kTile;
        return classify(s, i0, i_end, j0, ::min(j0 + kTile, s.Tk)) == TileMask::empty;
    };
    const auto load_stage = [&](int64_t tile, int stage) {
        load_tile<kD>(stages + 2 * stage * L::tile, k, tile * kTile, s.Tk);
        load_tile<kD>(stages + (2 * stage + 1) * L::tile, v, tile * kTile, s.Tk);
    };
    const int64_t tiles = (s.Tk + kTile - 1) / kTile;
    int64_t tile = next_tile(0, tiles, empty);
    load_tile<kD>(Qs, Q + bh * s.Tq * kD, i0, s.Tq);
    load_tile<kD>(dOs, dO + bh * s.Tq * kD, i0, s.Tq);
    load_row_stats<float, kD>(stats.lse, stats.delta, lse + bh * s.Tq, dO + bh * s.Tq * kD, O + bh * s.Tq * kD, i0,
                              s.Tq, kD, true);
    if (tile < tiles) load_stage(tile, 0);
    __syncthreads();

    const int own = lane.warp * kMmaRows;  // the warp's first row of the tile
    const float lse_r[2] = {stats.lse[own + lane.row(0)], stats.lse[own + lane.row(2)]};  // rows g, g + 8
    const float delta_r[2] = {stats.delta_of(own + lane.row(0)), stats.delta_of(own + lane.row(2))};
    Accumulator<kD> dq;  // the warp's 16 queries × kD
    clear(dq);
    for (int stage = 0; tile < tiles; stage ^= 1) {
        const int64_t next = next_tile(tile + 1, tiles, empty);
        if (next < tiles) load_stage(next, stage ^ 1);  // its last readers passed the previous barrier
        const bfloat16* Ks = stages + 2 * stage * L::tile;  // (64, ld)
        const bfloat16* Vs = Ks + L::tile;                  // (64, ld)
        const int64_t j0 = tile * kTile;
        const TileMask mask = classify(s, i0, i_end, j0, ::min(j0 + kTile, s.Tk));

        Scores p;  // S, then P: the warp's 16 queries × 64 keys
        tile_scores<kD>(p, Qs + own * L::ld, Ks, lane);
        band_probabilities(p, s, mask, true, i0 + own, j0, lane, [&](int row, int) { return lse_r[row / 8]; });
        Scores ds;  // dP, then dS
        tile_scores<kD>(ds, dOs + own * L::ld, Vs, lane);
        score_gradients(ds, p, lane, [&](int row, int) { return delta_r[row / 8]; });
        tile_accumulate<kD>(dq, ds, Ks, lane);
        __syncthreads();  // every warp is done with this stage; the next one is complete
        tile = next;
    }

    const float factor[2] = {float(s.scale), float(s.scale)};
    store_rows<kD>(dQ + bh * s.Tq * kD, i0 + own, i_end, dq, factor, lane);
}

}  // namespace

}  // namespace gg::cuda::GG_CUDA_BUILD::attention::mma

namespace gg::cuda::GG_CUDA_BUILD {

void attention_backward_mma(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
                            const View& Q, const View& K, const View& V, const View& O, const View& lse) {
    using namespace attention::mma;
    using attention::kThreads, attention::tile_grid;
    dispatch_head_size(s.D, [&]<int kD>() {
        const auto bf16 = [](const View& x) { return static_cast<bfloat16*>(x.data); };
        const float* lse_data = static_cast<const float*>(lse.data);
        if (s.B * s.Hkv * s.Tk > 0)
            launch("attention_backward_dkdv_mma", attention_dkdv_mma_kernel<kD>,
                   tile_grid("attention_backward", s.B * s.Hkv, s.Tk), dim3(kThreads),
                   2 * Tiles<kD>::tile * sizeof(bfloat16) + 2 * sizeof(QueryStage<kD>), s, bf16(dK), bf16(dV),
                   bf16(dO), bf16(Q), bf16(K), bf16(V), bf16(O), lse_data);
        if (s.B * s.H * s.Tq > 0)
            launch("attention_backward_dq_mma", attention_dq_mma_kernel<kD>,
                   tile_grid("attention_backward", s.B * s.H, s.Tq), dim3(kThreads),
                   6 * Tiles<kD>::tile * sizeof(bfloat16) + sizeof(RowStats), s, bf16(dQ), bf16(dO), bf16(Q), bf16(K),
                   bf16(V), bf16(O), lse_data);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

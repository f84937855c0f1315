// attention_forward_mma.cu — fused attention for bf16 Q, K, V on the tensor cores
// (mma.sync m16n8k16): the same result as cuda/attention_forward.cu,
//   s_ij = q_i · k_j · scale,   O_i = Σ_j exp(s_ij − lse_i) v_j,   lse_i = log Σ_j exp(s_ij),
// over the keys j that query i sees, with the same online softmax over key tiles (see that
// file's opening comment), but both products on the tensor cores in bf16 with f32 sums.
// The entry (attention_forward.cu) sends here the calls attention_mma.cuh's mma_fits accepts:
// Q, K, V and O read and written through their strides, every row on 16 bytes.
//
// How the work is cut. One block of 4 warps per (b, h, tile of 64 queries), grid
// (B·H, ⌈Tq / 64⌉), last tile first; warp w owns queries 16w .. 16w + 15 of the tile. The block
// stages its queries through shared memory once, and each warp keeps its 16 × D of them as
// D / 16 A fragments in registers for the whole loop. The key and value tiles of the
// causal/window band stream through two stages of shared memory by cp.async: while the warps
// work on the tile of one stage, the copies of the next tile of the band into the other are in
// flight, with no register holding them, so there is one wait and one barrier per key tile.
// Per key tile, each warp:
//   1. S = Q Kᵀ (16 × 64, f32): D / 16 × 8 mma, K's rows read by ldmatrix as B fragments;
//   2. the online softmax on the accumulator fragments: scale, mask (only on the band's edge),
//      the row's maximum over the 4 lanes that hold it (two shuffles), the rescale of l and O,
//      P = exp(S − m');
//   3. O += P V (16 × D, f32): P rounded to bf16 is already the A fragment layout (see
//      attention_mma.cuh), V read by ldmatrix.trans; 4 × D / 8 mma.
// After the last tile, O = O / l is rounded to bf16 and lse = m + log l stays f32.
// The exponentials are exp2 of scores pre-multiplied by scale · log2(e): one multiply-add and
// the hardware's ex2 per score, where exp would first multiply by log2(e) itself.
//
// Why it should be fast. The SIMT f32 kernel does every multiply-add on the FP32 cores and
// moves P through shared memory; here the two products, nearly all of the work, run on the
// tensor cores, and P stays in registers. Speed not measured on a GPU.
// softmax1 and sink: each row's maximum starts at the slot's logit c (0, or b_h) and its sum at 1,
// in the row's lane q = 0 (the sum is split over the row's 4 lanes), so the slot is the first
// term of the online softmax and lse counts it; the other score functions take the SIMT kernels
// (mma_fits).
// Numerics: the scores are exact products of bf16 inputs summed in f32, as in the f32 kernel
// on the same values; P is rounded to bf16 for P V (at most 2⁻⁸ of each term; the sum l keeps
// the f32 P), and O once more when it is stored.
// Not done: cp.async for the next tile's loads (plain loads here wait at the next barrier),
// a swizzled layout instead of padding.
#include <cmath>

#include "cuda/attention_mma.cuh"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD::attention::mma {

namespace {

// One key tile of the online softmax for a lane's two rows (h = 0: row g, 1: row g + 8). s holds
// the scores q · k on entry and P = 2^(s·c − m') on return (0 where hidden), c = scale·log2(e);
// m' is the rows' new running maximum in that base-2 scale; l (this lane's part of the sum) and
// o are rescaled from m to m'. A row that has seen no key yet keeps m = −∞ and takes 0 as its
// reference, so that no −∞ − (−∞) appears. visible(e, col) says whether the mask keeps element e
// of column col.
template <int kD, class Visible>
__device__ void online_softmax(Scores<kScoreTiles>& s, float (&m)[2], float (&l)[2], Accumulator<kD>& o, float c,
                               const MmaLane& lane, const Visible& visible) {
    GG_UNROLL
    for (int h = 0; h < 2; ++h) {
        float tile_max = -INFINITY;
        GG_UNROLL
        for (int n = 0; n < kScoreTiles; ++n) {
            GG_UNROLL
            for (int e = 2 * h; e < 2 * h + 2; ++e) {
                s[n][e] = visible(e, lane.col(n, e)) ? s[n][e] * c : -INFINITY;
                tile_max = ::max(tile_max, s[n][e]);
            }
        }
        tile_max = ::max(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
        tile_max = ::max(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));
        const float m_new = ::max(m[h], tile_max);
        const float reference = m_new == -INFINITY ? 0.0f : m_new;
        const float rescale = exp2f(m[h] - reference);  // 0 on the row's first keys, where m = −∞
        m[h] = m_new;
        l[h] *= rescale;
        GG_UNROLL
        for (int n = 0; n < kD / kMmaCols; ++n) o[n][2 * h] *= rescale, o[n][2 * h + 1] *= rescale;
        GG_UNROLL
        for (int n = 0; n < kScoreTiles; ++n) {
            GG_UNROLL
            for (int e = 2 * h; e < 2 * h + 2; ++e) l[h] += s[n][e] = exp2f(s[n][e] - reference);
        }
    }
}

// O (B, H, Tq, kD) bf16, lse (B, H, Tq) f32 ← Q (B, H, Tq, kD), K, V (B, Hkv, Tk, kD) bf16; lse
// contiguous, the others any Operand whose rows start on 16 bytes.
// grid (B·H, ⌈Tq / 64⌉), block kThreads, 5 tiles of shared memory (Tiles<kD>::tile bf16 each).
template <int kD>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_forward_mma_kernel(AttentionShape s, Operand<bfloat16> O, float* lse, Operand<const bfloat16> Q,
                                 Operand<const bfloat16> K, Operand<const bfloat16> V, const float* sink) {
    using L = Tiles<kD>;
    const int64_t bh = blockIdx.x, bhk = kv_head(s, bh);
    const int64_t i0 = heavy_first_tile() * kTile, i_end = ::min(i0 + kTile, s.Tq);
    const MmaLane lane = this_mma_lane();

    GG_DYNAMIC_SHARED(bfloat16, smem);
    bfloat16* Qs = smem;  // (64, ld) this block's queries, until they are in registers
    const KeyValueStream<kD> kv{s, i0, i_end, bhk, K, V, Qs + L::tile};
    const int64_t first = start_stream(kv);
    load_tile<kD>(Qs, Q, bh, s.H, i0, s.Tq);
    tiles_landed();
    Fragment q[L::steps];  // the warp's 16 queries, 16 columns of D each
    GG_UNROLL
    for (int step = 0; step < L::steps; ++step)
        load_fragment<kD>(q[step], Qs + lane.warp * kMmaRows * L::ld, kMmaK * step, lane);

    const float c = float(s.scale) * kLog2e;
    // Rows g, g + 8: running max (base 2), this lane's part of the sum; the slot's term first.
    const RowStart<float> start = row_start(s.score_fn, s.score_fn == ScoreFunction::sink ? sink[bh % s.H] : 0.0f);
    const float m0 = start.m * kLog2e, l0 = lane.q == 0 ? start.z : 0.0f;
    float m[2] = {m0, m0}, l[2] = {l0, l0};
    Accumulator<kD> o;                                   // Σ_j 2^(s_ij·c − m_i) v_j of the same rows
    clear(o);
    run_stream(kv, first, [&](int64_t tile, int stage) {
        const int64_t j0 = tile * kTile;
        Scores<kScoreTiles> p;  // the warp's 16 queries × 64 keys
        clear(p);
        GG_UNROLL
        for (int step = 0; step < L::steps; ++step) scores_step<kD>(p, q[step], kv.keys(stage), kMmaK * step, lane);
        if (kv.mask(tile) == TileMask::full) {
            online_softmax<kD>(p, m, l, o, c, lane, [](int, int) { return true; });
        } else {
            const int64_t i = i0 + lane.warp * kMmaRows + lane.g;
            const TileColumns keys[2] = {visible_columns(s, i, j0), visible_columns(s, i + 8, j0)};  // rows g, g + 8
            online_softmax<kD>(p, m, l, o, c, lane, [&](int e, int col) { return keys[e / 2].contains(col); });
        }
        Weights<kScoreTiles> w;
        round_weights(w, p);
        tile_accumulate<kD>(o, w, kv.values(stage), lane);
    });

    float factor[2];
    GG_UNROLL
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(kFullMask, l[h], 1);
        l[h] += __shfl_xor_sync(kFullMask, l[h], 2);
        factor[h] = l[h] > 0 ? 1 / l[h] : 0.0f;  // a row that sees no key has O = 0, lse = −∞
        const int64_t i = i0 + lane.warp * kMmaRows + lane.row(2 * h);
        if (lane.q == 0 && i < i_end) lse[bh * s.Tq + i] = (m[h] + std::log2(l[h])) / kLog2e;
    }
    store_rows<kD>(O, bh, s.H, i0 + lane.warp * kMmaRows, i_end, o, factor, lane);
}

}  // namespace

}  // namespace gg::cuda::GG_CUDA_BUILD::attention::mma

namespace gg::cuda::GG_CUDA_BUILD {

void attention_forward_mma(const AttentionShape& s, const View& O, const View& lse, const View& Q, const View& K,
                           const View& V, const View& sink) {
    using namespace attention::mma;
    using attention::operand;
    if (s.B * s.H * s.Tq == 0) return;
    dispatch_head_size(s.D, [&]<int kD>() {
        launch("attention_forward_mma", attention_forward_mma_kernel<kD>,
               attention::tile_grid("attention_forward", s.B * s.H, s.Tq), dim3(attention::kThreads),
               5 * Tiles<kD>::tile * sizeof(bfloat16), s, operand<bfloat16>(O), static_cast<float*>(lse.data),
               operand<const bfloat16>(Q), operand<const bfloat16>(K), operand<const bfloat16>(V),
               static_cast<const float*>(sink.data));
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

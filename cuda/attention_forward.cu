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
// Mapping (see attention_tiles.cuh): one block of 8 warps per (b, h, tile of 32 queries),
// grid (B·H, ⌈Tq / 32⌉). The block loads its query tile once, then every key tile of the
// causal/window band, K and V, into shared memory; key tiles outside the band are skipped
// whole. Warp w handles its 4 query rows in turn against each key tile: lane l scores key
// j0 + l, a butterfly gives the tile's maximum, and the lanes, now over D, add P·V to the
// row's accumulator. A key the row does not see gets −∞, so probability 0, and a row that
// sees none of the tile skips it. That mask is two integer comparisons next to the D
// multiply-adds of each score, so tiles inside the band are not special-cased.
//
// When probs is asked for (analysis only), a second, plain kernel writes
// P_ij = exp(s_ij − lse_i), 0 where key j is hidden: one thread per element of (B, H, Tq, Tk).
#include <algorithm>

#include "cuda/attention_tiles.cuh"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

using namespace attention;

// O (B, H, Tq, D), lse (B, H, Tq) ← Q (B, H, Tq, D), K, V (B, Hkv, Tk, D).
// grid (B·H, ⌈Tq / 32⌉), block kThreads, shared_bytes<T>(3, 1, D).
template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(AttentionShape s, T* O, T* lse, const T* Q, const T* K, const T* V) {
    const int D = int(s.D), ld = D | 1;
    const int64_t bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
    const int64_t bhk = b * s.Hkv + h / (s.H / s.Hkv);
    const int64_t i0 = int64_t(blockIdx.y) * kTile, i_end = min(i0 + kTile, s.Tq);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const T* q = Q + bh * s.Tq * D;   // (Tq, D)
    const T* k = K + bhk * s.Tk * D;  // (Tk, D)
    const T* v = V + bhk * s.Tk * D;  // (Tk, D)

    GG_DYNAMIC_SHARED(T, smem);
    T* Qs = smem;                             // (32, ld) this block's queries
    T* Ks = Qs + kTile * ld;                  // (32, ld) the current key tile
    T* Vs = Ks + kTile * ld;                  // (32, ld)
    T* P = Vs + kTile * ld + warp * kTile;    // (32) this warp's probabilities of one row
    load_tile(Qs, q, i0, s.Tq, D, ld);

    T m[kRowsPerWarp], l[kRowsPerWarp];  // running max; this lane's share of the running sum
    RowPart<T> acc[kRowsPerWarp];        // this lane's columns of Σ exp(s − m) v
    GG_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
        m[r] = -T(INFINITY);
        l[r] = 0;
        GG_UNROLL
        for (T& a : acc[r]) a = 0;
    }

    for (int64_t j0 = 0; j0 < s.Tk; j0 += kTile) {
        const int64_t j_end = min(j0 + kTile, s.Tk);
        if (!tiles_meet(s, i0, i_end - 1, j0, j_end - 1)) continue;
        __syncthreads();  // every warp is done with the previous K and V tiles
        load_tile(Ks, k, j0, s.Tk, D, ld);
        load_tile(Vs, v, j0, s.Tk, D, ld);
        __syncthreads();
        GG_UNROLL
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const int row = warp + kWarps * r;
            const int64_t i = i0 + row, j = j0 + lane;
            if (i >= i_end) break;
            const KeyRange keys = visible_keys(s, i);
            const bool visible = j >= keys.first && j <= keys.last;
            if (!__any_sync(kFullMask, visible)) continue;
            const T score = visible ? dot(Qs + row * ld, Ks + lane * ld, D) * T(s.scale) : -T(INFINITY);
            const T m_new = max(m[r], warp_max(score));
            const T rescale = std::exp(m[r] - m_new);  // 0 on the row's first tile, where m = −∞
            const T p = visible ? std::exp(score - m_new) : T(0);
            m[r] = m_new;
            l[r] = l[r] * rescale + p;
            GG_UNROLL
            for (T& a : acc[r]) a *= rescale;
            P[lane] = p;
            __syncwarp();
            add_weighted_rows(acc[r], P, Vs, int(j_end - j0), ld, D, lane);
            __syncwarp();  // P is read by every lane before the next row overwrites it
        }
    }

    GG_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t i = i0 + warp + kWarps * r;
        if (i >= i_end) break;
        const T sum = warp_sum(l[r]);
        store_row(O + (bh * s.Tq + i) * D, acc[r], T(1) / sum, D, lane);
        if (lane == 0) lse[bh * s.Tq + i] = m[r] + std::log(sum);
    }
}

// probs (B, H, Tq, Tk) ← exp(Q Kᵀ · scale − lse), 0 where hidden; one thread per element,
// grid-stride.
template <class T>
__global__ void attention_probs_kernel(AttentionShape s, T* probs, const T* Q, const T* K, const T* lse) {
    const int64_t n = s.B * s.H * s.Tq * s.Tk;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
        const int64_t j = e % s.Tk, row = e / s.Tk, i = row % s.Tq, bh = row / s.Tq;
        const int64_t bhk = bh / s.H * s.Hkv + bh % s.H / (s.H / s.Hkv);
        const KeyRange keys = visible_keys(s, i);
        T p = 0;
        if (j >= keys.first && j <= keys.last)
            p = std::exp(dot(Q + row * s.D, K + (bhk * s.Tk + j) * s.D, int(s.D)) * T(s.scale) - lse[row]);
        probs[e] = p;
    }
}

template <class T>
void forward(const AttentionShape& s, const View& O, const View& lse, const View& probs, const View& Q,
             const View& K, const View& V) {
    check_head_dim<T>("attention_forward", s);
    if (s.B * s.H * s.Tq == 0) return;
    launch("attention_forward", attention_forward_kernel<T>, tile_grid("attention_forward", s.B * s.H, s.Tq),
           dim3(kThreads), shared_bytes<T>(3, 1, s.D), s, static_cast<T*>(O.data), static_cast<T*>(lse.data),
           static_cast<const T*>(Q.data), static_cast<const T*>(K.data), static_cast<const T*>(V.data));
    if (probs.data == nullptr) return;
    const int64_t blocks = std::min<int64_t>((probs.numel() + 255) / 256, 65536);
    launch("attention_probs", attention_probs_kernel<T>, dim3(unsigned(blocks)), dim3(256), 0, s,
           static_cast<T*>(probs.data), static_cast<const T*>(Q.data), static_cast<const T*>(K.data),
           static_cast<const T*>(lse.data));
}

}  // namespace

void attention_forward(const AttentionShape& s, const View& O, const View& lse, const View& probs, const View& Q,
                       const View& K, const View& V) {
    dispatch_float("attention_forward", Q.dtype, [&]<class T>() { forward<T>(s, O, lse, probs, Q, K, V); });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

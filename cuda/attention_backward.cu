// attention_backward.cu — gradients of fused attention (cuda/attention_forward.cu), FlashAttention
// style: the probabilities are recomputed tile by tile from the saved lse, never stored.
//
// With P_ij = exp(q_i · k_j · scale − lse_i) over the keys j that query i sees, and dO the
// gradient of O:
//   dV_j = Σ_i P_ij dO_i                       dP_ij = dO_i · v_j
//   dS_ij = P_ij (dP_ij − Δ_i),  Δ_i = dO_i · O_i  (= Σ_j P_ij dP_ij, the softmax's own term)
//   dQ_i = scale Σ_j dS_ij k_j                 dK_j = scale Σ_i dS_ij q_i
// summed over every query head of the kv head's group (GQA) for dK and dV.
//
// Three kernels, each output element written by one block in a fixed order (no atomics), so
// two runs give the same bits:
//   delta  one warp per query row, lanes over D: Δ_i. It is parked in column 0 of dQ, whose
//          rows are not written before the dQ kernel has read their Δ: no scratch buffer.
//   dK/dV  one block of 8 warps per (b, kv head, tile of 32 keys), grid (B·Hkv, ⌈Tk / 32⌉).
//          The block holds its K and V tiles in shared memory and walks the query heads of
//          the group and, for each, the query tiles of the causal/window band (Q, dO loaded
//          into shared memory). Warp w handles its 4 keys: lane l recomputes P and dS for
//          query i0 + l, then the lanes, over D, add Pᵀ dO and dSᵀ Q to the key's rows.
//   dQ     one block of 8 warps per (b, h, tile of 32 queries), grid (B·H, ⌈Tq / 32⌉), the
//          mirror image: K and V tiles stream through shared memory, lane l recomputes dS
//          for key j0 + l, and the lanes, over D, add dS K to the query's row.
// The warp steps and the tile geometry are shared with the forward: cuda/attention_tiles.cuh.
#include <algorithm>

#include "cuda/attention_tiles.cuh"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

using namespace attention;

// delta (rows) at stride D ← Σ_d dO (rows, D) ⊙ O (rows, D); rows = B·H·Tq.
// One warp per row, grid-stride over the rows; block kThreads.
template <class T>
__global__ void attention_delta_kernel(int64_t rows, int D, T* delta, const T* dO, const T* O) {
    const int lane = int(threadIdx.x) % 32;
    const int64_t warps = int64_t(gridDim.x) * kWarps;
    for (int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; row < rows; row += warps) {
        T part = 0;
        for (int d = lane; d < D; d += 32) part += dO[row * D + d] * O[row * D + d];
        const T total = warp_sum(part);
        if (lane == 0) delta[row * D] = total;
    }
}

// dK, dV (B, Hkv, Tk, D) ← dO, Q (B, H, Tq, D), K, V (B, Hkv, Tk, D), lse (B, H, Tq), delta
// (B, H, Tq) at stride D. grid (B·Hkv, ⌈Tk / 32⌉), block kThreads, shared_bytes<T>(4, 2, D).
template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_kernel(AttentionShape s, T* dK, T* dV, const T* dO, const T* Q, const T* K, const T* V,
                          const T* lse, const T* delta) {
    const int D = int(s.D), ld = D | 1;
    const int64_t bhk = blockIdx.x, b = bhk / s.Hkv, hk = bhk % s.Hkv, group = s.H / s.Hkv;
    const int64_t j0 = int64_t(blockIdx.y) * kTile, j_end = min(j0 + kTile, s.Tk);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;

    GG_DYNAMIC_SHARED(T, smem);
    T* Ks = smem;                                 // (32, ld) this block's keys
    T* Vs = Ks + kTile * ld;                      // (32, ld)
    T* Qs = Vs + kTile * ld;                      // (32, ld) the current query tile
    T* dOs = Qs + kTile * ld;                     // (32, ld)
    T* P = dOs + kTile * ld + warp * kTile;       // (32) this warp's P of one key
    T* dS = P + kWarps * kTile;                   // (32) and its dS
    load_tile(Ks, K + bhk * s.Tk * D, j0, s.Tk, D, ld);
    load_tile(Vs, V + bhk * s.Tk * D, j0, s.Tk, D, ld);

    RowPart<T> dk[kRowsPerWarp], dv[kRowsPerWarp];  // this lane's columns of each key's sums
    GG_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
        GG_UNROLL
        for (int c = 0; c < HeadDim<T>::cols; ++c) dk[r][c] = dv[r][c] = 0;
    }

    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        const int64_t bh = b * s.H + h;
        for (int64_t i0 = 0; i0 < s.Tq; i0 += kTile) {
            const int64_t i_end = min(i0 + kTile, s.Tq);
            if (!tiles_meet(s, i0, i_end - 1, j0, j_end - 1)) continue;
            __syncthreads();  // every warp is done with the previous Q and dO tiles
            load_tile(Qs, Q + bh * s.Tq * D, i0, s.Tq, D, ld);
            load_tile(dOs, dO + bh * s.Tq * D, i0, s.Tq, D, ld);
            __syncthreads();
            // Lane l stands for query i = i0 + l of the tile throughout.
            const int64_t i = i0 + lane;
            const KeyRange keys = i < i_end ? visible_keys(s, i) : KeyRange{1, 0};
            const T lse_i = i < i_end ? lse[bh * s.Tq + i] : T(0);
            const T delta_i = i < i_end ? delta[(bh * s.Tq + i) * D] : T(0);
            GG_UNROLL
            for (int r = 0; r < kRowsPerWarp; ++r) {
                const int row = warp + kWarps * r;
                const int64_t j = j0 + row;
                if (j >= j_end) break;
                const bool visible = j >= keys.first && j <= keys.last;
                if (!__any_sync(kFullMask, visible)) continue;
                T p = 0, ds = 0;
                if (visible) {
                    p = std::exp(dot(Qs + lane * ld, Ks + row * ld, D) * T(s.scale) - lse_i);
                    ds = p * (dot(dOs + lane * ld, Vs + row * ld, D) - delta_i);
                }
                P[lane] = p;
                dS[lane] = ds;
                __syncwarp();
                add_weighted_rows(dv[r], P, dOs, int(i_end - i0), ld, D, lane);
                add_weighted_rows(dk[r], dS, Qs, int(i_end - i0), ld, D, lane);
                __syncwarp();  // P and dS are read by every lane before the next key overwrites them
            }
        }
    }

    GG_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t j = j0 + warp + kWarps * r;
        if (j >= j_end) break;
        store_row(dK + (bhk * s.Tk + j) * D, dk[r], T(s.scale), D, lane);
        store_row(dV + (bhk * s.Tk + j) * D, dv[r], T(1), D, lane);
    }
}

// dQ (B, H, Tq, D) ← dO, Q (B, H, Tq, D), K, V (B, Hkv, Tk, D), lse (B, H, Tq), delta
// (B, H, Tq) at stride D, which is dQ itself: each warp reads the Δ of its rows before it
// writes them. grid (B·H, ⌈Tq / 32⌉), block kThreads, shared_bytes<T>(4, 1, D).
template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(AttentionShape s, T* dQ, const T* dO, const T* Q, const T* K, const T* V, const T* lse,
                        const T* delta) {
    const int D = int(s.D), ld = D | 1;
    const int64_t bh = blockIdx.x, b = bh / s.H, h = bh % s.H;
    const int64_t bhk = b * s.Hkv + h / (s.H / s.Hkv);
    const int64_t i0 = int64_t(blockIdx.y) * kTile, i_end = min(i0 + kTile, s.Tq);
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;

    GG_DYNAMIC_SHARED(T, smem);
    T* Qs = smem;                              // (32, ld) this block's queries
    T* dOs = Qs + kTile * ld;                  // (32, ld)
    T* Ks = dOs + kTile * ld;                  // (32, ld) the current key tile
    T* Vs = Ks + kTile * ld;                   // (32, ld)
    T* dS = Vs + kTile * ld + warp * kTile;    // (32) this warp's dS of one query
    load_tile(Qs, Q + bh * s.Tq * D, i0, s.Tq, D, ld);
    load_tile(dOs, dO + bh * s.Tq * D, i0, s.Tq, D, ld);

    T lse_i[kRowsPerWarp], delta_i[kRowsPerWarp];
    RowPart<T> dq[kRowsPerWarp];  // this lane's columns of each query's sum
    GG_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t i = i0 + warp + kWarps * r;
        lse_i[r] = i < i_end ? lse[bh * s.Tq + i] : T(0);
        delta_i[r] = i < i_end ? delta[(bh * s.Tq + i) * D] : T(0);
        GG_UNROLL
        for (int c = 0; c < HeadDim<T>::cols; ++c) dq[r][c] = 0;
    }

    for (int64_t j0 = 0; j0 < s.Tk; j0 += kTile) {
        const int64_t j_end = min(j0 + kTile, s.Tk);
        if (!tiles_meet(s, i0, i_end - 1, j0, j_end - 1)) continue;
        __syncthreads();  // every warp is done with the previous K and V tiles
        load_tile(Ks, K + bhk * s.Tk * D, j0, s.Tk, D, ld);
        load_tile(Vs, V + bhk * s.Tk * D, j0, s.Tk, D, ld);
        __syncthreads();
        GG_UNROLL
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const int row = warp + kWarps * r;
            const int64_t i = i0 + row, j = j0 + lane;
            if (i >= i_end) break;
            const KeyRange keys = visible_keys(s, i);
            const bool visible = j >= keys.first && j <= keys.last;
            if (!__any_sync(kFullMask, visible)) continue;
            T ds = 0;
            if (visible) {
                const T p = std::exp(dot(Qs + row * ld, Ks + lane * ld, D) * T(s.scale) - lse_i[r]);
                ds = p * (dot(dOs + row * ld, Vs + lane * ld, D) - delta_i[r]);
            }
            dS[lane] = ds;
            __syncwarp();
            add_weighted_rows(dq[r], dS, Ks, int(j_end - j0), ld, D, lane);
            __syncwarp();  // dS is read by every lane before the next query overwrites it
        }
    }

    GG_UNROLL
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t i = i0 + warp + kWarps * r;
        if (i >= i_end) break;
        store_row(dQ + (bh * s.Tq + i) * D, dq[r], T(s.scale), D, lane);
    }
}

template <class T>
void backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
              const View& Q, const View& K, const View& V, const View& O, const View& lse) {
    check_head_dim<T>("attention_backward", s);
    if (s.D == 0) return;  // every gradient is empty
    const int64_t rows = s.B * s.H * s.Tq;
    T* delta = static_cast<T*>(dQ.data);  // (B, H, Tq) at stride D, until the dQ kernel
    if (rows > 0) {
        const int64_t blocks = std::min<int64_t>((rows + kWarps - 1) / kWarps, 65536);
        launch("attention_delta", attention_delta_kernel<T>, dim3(unsigned(blocks)), dim3(kThreads), 0, rows,
               int(s.D), delta, static_cast<const T*>(dO.data), static_cast<const T*>(O.data));
    }
    // dK and dV come first: their blocks read Δ from dQ, which the dQ kernel then overwrites.
    if (s.B * s.Hkv * s.Tk > 0)
        launch("attention_backward_dkdv", attention_dkdv_kernel<T>,
               tile_grid("attention_backward", s.B * s.Hkv, s.Tk), dim3(kThreads), shared_bytes<T>(4, 2, s.D), s,
               static_cast<T*>(dK.data), static_cast<T*>(dV.data), static_cast<const T*>(dO.data),
               static_cast<const T*>(Q.data), static_cast<const T*>(K.data), static_cast<const T*>(V.data),
               static_cast<const T*>(lse.data), static_cast<const T*>(delta));
    if (rows > 0)
        launch("attention_backward_dq", attention_dq_kernel<T>, tile_grid("attention_backward", s.B * s.H, s.Tq),
               dim3(kThreads), shared_bytes<T>(4, 1, s.D), s, static_cast<T*>(dQ.data),
               static_cast<const T*>(dO.data), static_cast<const T*>(Q.data), static_cast<const T*>(K.data),
               static_cast<const T*>(V.data), static_cast<const T*>(lse.data), static_cast<const T*>(delta));
}

}  // namespace

void attention_backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
                        const View& Q, const View& K, const View& V, const View& O, const View& lse) {
    dispatch_float("attention_backward", Q.dtype,
                   [&]<class T>() { backward<T>(s, dQ, dK, dV, dO, Q, K, V, O, lse); });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

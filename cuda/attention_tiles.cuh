// attention_tiles.cuh — what the fused attention kernels share (cuda/attention_forward.cu,
// cuda/attention_backward.cu): the tile geometry, which keys a query sees, and the two
// warp-level steps every one of those kernels is made of.
//
// Tiles. A query tile is kTile = 32 consecutive queries of one (b, h); a key tile is 32
// consecutive keys of one (b, kv head). 32 is the warp size: inside a warp, one lane stands
// for one row of the *other* operand's tile (a key in forward and dQ, a query in dK/dV).
// A block is kWarps = 8 warps and owns one tile; warp w owns its rows w, w + 8, w + 16, w + 24
// (kRowsPerWarp = 4) and keeps their accumulators in registers while the block walks over
// the tiles of the other operand, loaded one after another into shared memory.
//
// The two steps, for one row x of the warp's own tile against a tile Y of the other operand:
//   scores      lane l computes x · Y_l over D: x is read by all lanes at once (a broadcast),
//               Y_l is the lane's own row. Rows sit at an odd stride ld = D | 1 in shared
//               memory, so the 32 lanes reading column d of 32 rows hit 32 different banks.
//   accumulate  lanes split D instead: lane l owns columns l, l + 32, l + 64, l + 96 of the
//               row's accumulator and adds Σ_r w_r Z_rd, the per-lane weights w (probabilities
//               or dS) passed through a small shared buffer of the warp.
//
// Limits. Each lane holds HeadDim<T>::cols = max / 32 columns of every accumulator row, so the
// head size D is at most 128 in f32 and 64 in f64: the dK/dV kernel keeps 2 sums × 4 keys ×
// cols = 32 f32 or 16 f64 values a lane. Shared memory is at most four tiles of (32, D | 1)
// plus two weight buffers of the warps: 66.5 KiB for f32 at D = 128, 69 KiB for f64 at
// D = 64 (the forward needs three tiles: 49.4 and 50.8 KiB). Any D up to the limit works,
// a multiple of nothing; a larger one is an error. The tiles of a head run along grid.y, so
// Tq and Tk are at most 65535 · 32 = 2,097,120.
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/launch.h"
#include "tensor/backend.h"

namespace gg::cuda::GG_CUDA_BUILD::attention {

constexpr int kTile = 32;  // rows of a query tile, keys of a key tile, lanes of a warp
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = kTile / kWarps;
constexpr unsigned kFullMask = 0xffffffffu;

// The largest head size D the kernels take, and how many columns of a row each lane holds.
template <class T>
struct HeadDim {
    static constexpr int max = sizeof(T) == 4 ? 128 : 64;
    static constexpr int cols = max / 32;
};

// One lane's columns of one accumulator row: column lane + 32c for c < cols.
template <class T>
using RowPart = T[HeadDim<T>::cols];

// ---- which keys a query sees (the same rule as tensor/cpu_attention.cpp) -------------------

// Visible keys of query i: [first, last]. Query i sits at position Tk − Tq + i; with
// exclude_self its own key is hidden too, except at position 0, which has nothing else to see.
// ::min and ::max are CUDA's (or the emulator's): in a file that also includes
// autograd/ops.h, an unqualified max would find gg::max and stop there.
struct KeyRange {
    int64_t first, last;
};
__device__ inline KeyRange visible_keys(const AttentionShape& s, int64_t i) {
    const int64_t pos = s.Tk - s.Tq + i;
    int64_t last = s.causal ? ::min(pos, s.Tk - 1) : s.Tk - 1;
    if (s.exclude_self && pos > 0) last = pos - 1;
    const int64_t first = s.window > 0 ? ::max(int64_t(0), pos - s.window + 1) : int64_t(0);
    return {first, last};
}

// Whether the queries [i0, i1] and the keys [j0, j1] may meet. first and last only grow with
// i, so a visible pair (i, j) has first(i0) ≤ j ≤ j1 and last(i1) ≥ j ≥ j0: a tile that fails
// this test holds no visible pair and is skipped whole (the causal and window band). A tile
// that passes may still hide a row entirely; the warps skip such rows one by one.
__device__ inline bool tiles_meet(const AttentionShape& s, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    return visible_keys(s, i0).first <= j1 && visible_keys(s, i1).last >= j0;
}

// ---- shared memory ---------------------------------------------------------------------------

// tile (kTile, ld) ← rows [row0, row0 + kTile) of src (rows, D), by the whole block; rows past
// the end are zeros, so that every value a kernel reads is defined.
template <class T>
__device__ void load_tile(T* tile, const T* src, int64_t row0, int64_t rows, int D, int ld) {
    for (int e = threadIdx.x; e < kTile * D; e += kThreads) {
        const int r = e / D, d = e % D;
        tile[r * ld + d] = row0 + r < rows ? src[(row0 + r) * D + d] : T(0);
    }
}

// ---- the two warp steps ----------------------------------------------------------------------

template <class T>
__device__ T dot(const T* a, const T* b, int D) {
    T acc = 0;
    for (int d = 0; d < D; ++d) acc += a[d] * b[d];
    return acc;
}

// acc_c += Σ_{r < n} w_r · rows[r, lane + 32c], over this lane's columns of D.
template <class T>
__device__ void add_weighted_rows(RowPart<T>& acc, const T* w, const T* rows, int n, int ld, int D, int lane) {
    GG_UNROLL
    for (int c = 0; c < HeadDim<T>::cols; ++c) {
        const int d = lane + 32 * c;
        if (d >= D) break;
        T sum = acc[c];
        for (int r = 0; r < n; ++r) sum += w[r] * rows[r * ld + d];
        acc[c] = sum;
    }
}

// out[lane + 32c] = acc_c · factor, over this lane's columns of D.
template <class T>
__device__ void store_row(T* out, const RowPart<T>& acc, T factor, int D, int lane) {
    GG_UNROLL
    for (int c = 0; c < HeadDim<T>::cols; ++c)
        if (lane + 32 * c < D) out[lane + 32 * c] = acc[c] * factor;
}

// Butterfly reductions: every lane ends with the same value, the same bits.
template <class T>
__device__ T warp_max(T x) {
    for (int offset = 16; offset > 0; offset /= 2) x = ::max(x, __shfl_xor_sync(kFullMask, x, offset));
    return x;
}
template <class T>
__device__ T warp_sum(T x) {
    for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullMask, x, offset);
    return x;
}

// ---- host side -------------------------------------------------------------------------------

// Calls f.template operator()<T>() for the float type of `dtype`; the kernels take f32 and f64.
template <class F>
void dispatch_float(const char* op, DType dtype, F&& f) {
    if (dtype == DType::f32) f.template operator()<float>();
    else if (dtype == DType::f64) f.template operator()<double>();
    else throw std::invalid_argument(std::string(op) + ": dtype " + dtype_name(dtype) + " is not float32 or float64");
}

// Throws when D is more than a lane's registers hold (see Limits above).
template <class T>
void check_head_dim(const char* op, const AttentionShape& s) {
    if (s.D > HeadDim<T>::max)
        throw std::invalid_argument(std::string(op) + ": head size D = " + std::to_string(s.D) +
                                    " is more than the CUDA kernels support in " +
                                    dtype_name(sizeof(T) == 4 ? DType::f32 : DType::f64) + " (" +
                                    std::to_string(HeadDim<T>::max) + ")");
}

// One block per (head, tile of 32 rows): grid (heads, ⌈rows / 32⌉), heads on x, whose limit
// is 2³¹ − 1, the tiles on y (at most 65535).
inline dim3 tile_grid(const char* op, int64_t heads, int64_t rows) {
    const int64_t tiles = (rows + kTile - 1) / kTile;
    if (heads > 2147483647 || tiles > 65535)
        throw std::invalid_argument(std::string(op) + ": " + std::to_string(heads) + " heads of " +
                                    std::to_string(rows) + " rows are more than one launch takes (2³¹ − 1 heads, " +
                                    std::to_string(65535 * kTile) + " rows)");
    return dim3(unsigned(heads), unsigned(tiles));
}

// Bytes of `tiles` tiles (kTile, D | 1) and `buffers` per-warp weight buffers (kTile) of T.
template <class T>
size_t shared_bytes(int tiles, int buffers, int64_t D) {
    return sizeof(T) * (size_t(tiles) * kTile * size_t(D | 1) + size_t(buffers) * kWarps * kTile);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::attention

// attention_tiles.cuh — what the fused attention kernels share (cuda/attention_forward.cu,
// cuda/attention_backward.cu): the tile geometry, which keys a query sees, and the two small
// matrix products every one of those kernels is made of.
//
// Tiles. A block owns kTile = 64 rows of one head — queries in the forward and dQ kernels,
// keys in the dK/dV kernel — and streams tiles of 64 rows of the other operand through
// shared memory. Its kWarps = 4 warps own 16 of its rows each. A lane holds a register
// micro-tile of the 16 × 64 block of scores of its warp: 4 own rows × 8 streamed rows
// ("columns"), lane = 8·rg + cg owning rows 4rg .. 4rg + 3 and columns cg, cg + 8, .., cg + 56.
// Its accumulator (O, dQ, dK or dV) covers the same 4 rows × kD / 8 columns of D: the vectors
// that start at V·(cg + 8q), where V = 16 / sizeof(T) is how many values one 16-byte access
// moves (4 floats, 2 doubles).
//
// The two products, for a streamed tile Y (64, kD) of the other operand:
//   scores      S = X Yᵀ over D, X the block's own tile: per 16 bytes of D the lane reads 4
//               vectors of its rows and 8 of its columns and does 4·8·V multiply-adds.
//   accumulate  acc += W Y over the 64 columns, W the warp's scores turned into weights
//               (probabilities, dS): W goes through a small buffer of the warp, since the
//               lanes that hold a row's weights are not the lanes that need them all.
// Against the previous kernel, where one lane computed one score from two rows of shared
// memory (two loads per multiply-add) and one warp handled one row at a time, a lane now loads
// 12 values per 32 multiply-adds, 16 bytes at a time, and has 32 independent sums in flight.
//
// Shared memory banks. Rows of a tile sit at stride ld = kD + V, so consecutive rows start 4
// banks apart; the 8 lanes of a quarter warp (one rg, cg = 0..7) read the same 16 bytes of 8
// consecutive rows — 8 different groups of 4 banks, no conflict — while the 4 quarters read
// the same addresses or their own rows' (broadcasts). The weight buffer is stored column by
// column, W[c][row], at stride 16 + V: the 8 columns a quarter warp writes at once start 4
// banks apart too, and a read of W[c][4rg ..] is 4 broadcasts.
//
// Band. Tiles the causal/window mask hides entirely are skipped; tiles it shows entirely (and
// that hold no row past the end) take no mask at all; only the tiles the band's edge crosses
// work out, pair by pair, what each query sees (TileMask).
//
// Limits. kD, the head size rounded up to 32, 64 or 128, is a template parameter, so that
// every micro-tile array is indexed by constants and stays in registers; padded columns of D
// are zeros in shared memory and add nothing. D is at most 128 in f32 and 64 in f64, where
// the accumulators of the dK/dV kernel (2 × 4 × kD / 8 values a lane) and the tiles in shared
// memory (four of (64, kD + V) there) reach what one block can hold; a larger D is an error.
// Any D up to the limit works, a multiple of nothing: 16-byte global accesses are used when
// D is a multiple of V and every tensor is 16-byte aligned, else the same kernel moves one
// value at a time. The tiles of a head run along grid.y, so Tq and Tk are at most
// 65535 · 64 = 4,194,240.
//
// bf16. bf16 tensors with D = 16, 32, 64 or 128 whose rows all start on 16 bytes go to the
// tensor-core kernels (attention_mma.cuh); the entries choose on the host. Any other bf16 call
// comes here.
// Tensors stored in bf16 (S below) are computed in float (T = compute_t<S>): values are
// converted on their way into shared memory and rounded once on their way out (O, dQ, dK, dV,
// probs), so the kernels, the tiles and the limits are f32's; a vector access then moves 4
// bf16 (8 bytes). lse is kept in the compute type, f32 for bf16 inputs: in bf16 its error of
// 2⁻⁹·|lse| would go into every probability the backward recomputes from it.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "cuda/dispatch_floating.h"
#include "cuda/launch.h"
#include "cuda/packs.h"
#include "tensor/backend.h"

namespace gg::cuda::GG_CUDA_BUILD::attention {

constexpr int kTile = 64;  // own rows of a block; rows of each streamed tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpRows = kTile / kWarps;  // 16 own rows per warp
constexpr int kLaneRows = 4;               // a lane's micro-tile: 4 own rows ...
constexpr int kLaneCols = 8;               // ... × 8 columns
constexpr int kColGroups = kTile / kLaneCols;  // 8 lanes share a row: lane = 8·rg + cg
constexpr unsigned kFullMask = 0xffffffffu;
static_assert(kWarpRows / kLaneRows * kColGroups == 32, "a warp's 16 × 64 scores are its 32 lanes' micro-tiles");
static_assert(kLaneRows * kLaneCols == 32, "a lane's visible pairs fit one 32-bit mask");

// ---- 16-byte accesses ------------------------------------------------------------------------

template <class T>
struct Vector;  // 16 bytes of T, moved by one instruction
template <>
struct Vector<float> {
    using type = float4;
    static constexpr int n = 4;
};
template <>
struct Vector<double> {
    using type = double2;
    static constexpr int n = 2;
};

__device__ inline void unpack(float* out, const float4& v) { out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w; }
__device__ inline void unpack(double* out, const double2& v) { out[0] = v.x, out[1] = v.y; }
__device__ inline float4 pack(const float* in) { return make_float4(in[0], in[1], in[2], in[3]); }
__device__ inline double2 pack(const double* in) { return make_double2(in[0], in[1]); }

// out[0 .. n) ← p[0 .. n), p 16-byte aligned.
template <class T>
__device__ void load_vector(T* out, const T* p) {
    unpack(out, *reinterpret_cast<const typename Vector<T>::type*>(p));
}
// p[0 .. n) ← in[0 .. n), p 16-byte aligned.
template <class T>
__device__ void store_vector(T* p, const T* in) {
    *reinterpret_cast<typename Vector<T>::type*>(p) = pack(in);
}

// out[0 .. n) ← row[d .. d + n), zeros from D on. With `vector` (D a multiple of n, row
// 16-byte aligned) a vector lies wholly before D or wholly past it: one load or none. A row
// stored in bf16 (S) is converted to T on the way, n of them in one 8-byte pack.
template <class T, class S>
__device__ void load_global(T* out, const S* row, int d, int D, bool vector) {
    constexpr int n = Vector<T>::n;
    if constexpr (std::is_same_v<S, T>) {
        if (vector && d < D) return load_vector(out, row + d);
    } else if (vector && d < D) {
        const Pack<S, n> pack = load_pack<n>(row + d);
        GG_UNROLL
        for (int e = 0; e < n; ++e) out[e] = T(pack.at[e]);
        return;
    }
    GG_UNROLL
    for (int e = 0; e < n; ++e) out[e] = d + e < D ? T(row[d + e]) : T(0);
}
// row[d .. d + n) ← in[0 .. n), up to D, rounded to S once.
template <class T, class S>
__device__ void store_global(S* row, const T* in, int d, int D, bool vector) {
    constexpr int n = Vector<T>::n;
    if constexpr (std::is_same_v<S, T>) {
        if (vector && d < D) return store_vector(row + d, in);
    } else if (vector && d < D) {
        Pack<S, n> pack;
        GG_UNROLL
        for (int e = 0; e < n; ++e) pack.at[e] = S(in[e]);
        return store_pack<n>(row + d, pack);
    }
    GG_UNROLL
    for (int e = 0; e < n; ++e)
        if (d + e < D) row[d + e] = S(in[e]);
}

// Whether every tensor allows the 16-byte path: D and every stride a multiple of the vector
// and each pointer 16-byte aligned, so that every row starts aligned.
template <class T>
bool vectors_fit(int64_t D, std::initializer_list<View> views) {
    constexpr int n = Vector<T>::n;
    bool fit = D % n == 0;
    for (const View& v : views) {
        fit = fit && reinterpret_cast<uintptr_t>(v.data) % 16 == 0;
        for (int d = 0; d + 1 < v.ndim; ++d) fit = fit && v.strides[d] % n == 0;
    }
    return fit;
}

// ---- operands ----------------------------------------------------------------------------------

// One (B, heads, T, D) operand — Q, K, V, O, dO or a gradient — with any strides but a
// contiguous last dim: element (b, h, t, d) is data[b·batch + h·head + t·row + d]. The heads
// split from a (B, T, heads·D) projection are such views, and the kernels read and write them
// in place instead of through a contiguous copy (nn/attention.cpp).
template <class S>
struct Operand {
    S* data;
    int64_t batch, head, row;  // strides, in elements
    // The first of the T rows of head bh = b·heads + h; the next ones follow at stride row.
    __device__ S* rows(int64_t bh, int64_t heads) const { return data + bh / heads * batch + bh % heads * head; }
};
template <class S>
Operand<S> operand(const View& v) {
    return {static_cast<S*>(v.data), v.strides[0], v.strides[1], v.strides[2]};
}

// ---- layout ------------------------------------------------------------------------------------

// Strides and sizes, in elements of T, for head size bucket kD.
template <class T, int kD>
struct Layout {
    static constexpr int V = Vector<T>::n;
    static constexpr int ld = kD + V;                  // row stride of a tile: see "banks" above
    static constexpr int ldw = kWarpRows + V;          // column stride of a warp's weight buffer
    static constexpr int tile = kTile * ld;            // one tile (64, ld)
    static constexpr int weights = kTile * ldw;        // one warp's weights (64 columns, ldw)
    static constexpr int lane_cols = kD / kColGroups;  // columns of D in a lane's accumulator
    static_assert(kD % (V * kColGroups) == 0 && kTile * (kD / V) % kThreads == 0, "kD is 32, 64 or 128");

    // Bytes of `tiles` tiles, the warps' weight buffers and `scalars` more values of T.
    static constexpr size_t shared_bytes(int tiles, int scalars) {
        return sizeof(T) * (size_t(tiles) * tile + size_t(kWarps) * weights + size_t(scalars));
    }
    // The blocks per SM a kernel asks registers for (__launch_bounds__): as many as the shared
    // memory of an H100/H200 SM holds (228 KiB, 1 KiB of it reserved per block), at most 3 —
    // 168 registers a thread, which the micro-tiles, their operands in flight and the loop's
    // state fit without spilling; at 4 blocks (128 registers) ptxas spills.
    static constexpr int min_blocks(int tiles, int scalars) {
        const int fit = int(228 * 1024 / (shared_bytes(tiles, scalars) + 1024));
        return fit < 2 ? fit : 2;
    }
};

// ---- a lane's micro-tile -----------------------------------------------------------------------

// Where a lane's micro-tile sits in its block's 64 × 64 scores.
struct Lane {
    int warp, rg, cg;
    // The block's own row of this lane's row r (r < 4).
    __device__ int row(int r) const { return warp * kWarpRows + rg * kLaneRows + r; }
    // The streamed row of this lane's column k (k < 8).
    __device__ int col(int k) const { return cg + kColGroups * k; }
};
__device__ inline Lane this_lane() {
    const int t = int(threadIdx.x);
    return {t / 32, t % 32 / kColGroups, t % kColGroups};
}

// s[r][k]: own row 4rg + r against column cg + 8k.
template <class T>
using LaneScores = T[kLaneRows][kLaneCols];
// a[r][V·q + e]: own row 4rg + r, column V·(cg + 8q) + e of D.
template <class T, int kD>
using Accumulator = T[kLaneRows][Layout<T, kD>::lane_cols];

template <class T, int kD>
__device__ void clear(Accumulator<T, kD>& a) {
    GG_UNROLL
    for (int r = 0; r < kLaneRows; ++r) {
        GG_UNROLL
        for (int c = 0; c < Layout<T, kD>::lane_cols; ++c) a[r][c] = 0;
    }
}

// ---- which keys a query sees (the same rule as cpu/attention.cpp) -------------------

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

// How many keys query i sees: sigmoid's n_i (tensor/score_functions.h).
__device__ inline int64_t keys_seen(const AttentionShape& s, int64_t i) {
    const KeyRange keys = visible_keys(s, i);
    return ::max(keys.last - keys.first + 1, int64_t(0));
}

// What the band makes of the tile of queries [i0, i_end) and keys [j0, j_end).
enum class TileMask { empty, partial, full };

// first and last only grow with i, so the tile holds a visible pair only if first(i0) ≤ j_end − 1
// and last(i_end − 1) ≥ j0, and every pair is visible if first(i_end − 1) ≤ j0 and
// last(i0) ≥ j_end − 1. A tile cut short by the end of Tq or Tk is never full: its padding
// rows must be masked.
__device__ inline TileMask classify(const AttentionShape& s, int64_t i0, int64_t i_end, int64_t j0, int64_t j_end) {
    const KeyRange top = visible_keys(s, i0), bottom = visible_keys(s, i_end - 1);
    if (top.first > j_end - 1 || bottom.last < j0) return TileMask::empty;
    const bool whole = i_end - i0 == kTile && j_end - j0 == kTile;
    return whole && bottom.first <= j0 && top.last >= j_end - 1 ? TileMask::full : TileMask::partial;
}

constexpr uint32_t kAllPairs = 0xffffffffu;

// Bit 8r + k: whether the lane's pair (own row r, column k) is a query and a key it sees, with
// the block's own rows from own0 and the streamed ones from col0. Own rows are queries in the
// forward and dQ kernels (own_queries), keys in the dK/dV kernel. Padding rows see nothing.
// Only the partial tiles of the band's edge ask.
__device__ inline uint32_t visible_pairs(const AttentionShape& s, const Lane& lane, int64_t own0, int64_t col0,
                                         bool own_queries) {
    uint32_t bits = 0;
    for (int r = 0; r < kLaneRows; ++r)
        for (int k = 0; k < kLaneCols; ++k) {
            const int64_t own = own0 + lane.row(r), col = col0 + lane.col(k);
            const int64_t i = own_queries ? own : col, j = own_queries ? col : own;
            if (i >= s.Tq || j >= s.Tk) continue;
            const KeyRange keys = visible_keys(s, i);
            if (j >= keys.first && j <= keys.last) bits |= 1u << (kLaneCols * r + k);
        }
    return bits;
}
__device__ inline bool pair_visible(uint32_t bits, int r, int k) { return (bits >> (kLaneCols * r + k)) & 1u; }

// ---- moving tiles --------------------------------------------------------------------------

// tile (64, ld) ← rows [row0, row0 + 64) of src (rows, D) at row stride src_ld, by the whole
// block; zeros past `rows` and past D (up to kD), so that the products read only defined
// values and padding adds nothing. Consecutive threads take consecutive 16 bytes of a row: the
// global reads are coalesced and a quarter warp's stores cover 32 banks once.
template <class T, int kD, bool kVector, class S>
__device__ void load_tile_as(T* tile, const S* src, int64_t src_ld, int64_t row0, int64_t rows, int D) {
    using L = Layout<T, kD>;
    constexpr int chunks = kD / L::V, pass = kThreads / chunks;  // rows per pass of the block
    const int r = int(threadIdx.x) / chunks, d = int(threadIdx.x) % chunks * L::V;
    const int64_t valid = rows - row0 - r;  // this thread's rows n·pass exist below `valid`
    const S* from = src + (row0 + r) * src_ld;
    T* to = tile + r * L::ld + d;
    GG_UNROLL
    for (int n = 0; n < kTile / pass; ++n) {
        T v[L::V] = {};
        if (n * pass < valid) load_global(v, from + int64_t(n) * pass * src_ld, d, D, kVector);
        store_vector(to + n * pass * L::ld, v);
    }
}
// The same from head bh of an operand with `heads` heads.
template <class T, int kD, class S>
__device__ void load_tile(T* tile, const Operand<S>& src, int64_t bh, int64_t heads, int64_t row0, int64_t rows,
                          int D, bool vector) {
    if (vector) load_tile_as<T, kD, true>(tile, src.rows(bh, heads), src.row, row0, rows, D);
    else load_tile_as<T, kD, false>(tile, src.rows(bh, heads), src.row, row0, rows, D);
}

// lse_s[r] ← lse[row0 + r] and delta[r][h] ← Σ over half h of D of dO[row0 + r] ⊙ O[row0 + r],
// for the 64 rows of a query tile of head bh (lse: that head's) (0 past `rows`); Δ_r =
// delta[r][0] + delta[r][1], in that order. Two threads per row: the loads are issued with the
// tile's, in the same phase.
template <class T, int kD, class S>
__device__ void load_row_stats(T* lse_s, T (*delta)[2], const T* lse, const Operand<const S>& dO,
                               const Operand<const S>& O, int64_t bh, int64_t heads, int64_t row0, int64_t rows,
                               int D, bool vector) {
    constexpr int V = Vector<T>::n, half = kD / 2;
    static_assert(kThreads == 2 * kTile, "two threads per row");
    const int r = int(threadIdx.x) / 2, h = int(threadIdx.x) % 2;
    const int64_t row = row0 + r;
    T sum = 0;
    if (row < rows) {
        GG_UNROLL
        for (int n = 0; n < half / V; ++n) {
            const int d = h * half + n * V;
            T a[V], b[V];
            load_global(a, dO.rows(bh, heads) + row * dO.row, d, D, vector);
            load_global(b, O.rows(bh, heads) + row * O.row, d, D, vector);
            GG_UNROLL
            for (int e = 0; e < V; ++e) sum += a[e] * b[e];
        }
    }
    delta[r][h] = sum;
    if (h == 0) lse_s[r] = row < rows ? lse[row] : T(0);
}

// ---- the two products ------------------------------------------------------------------------

// s[r][k] = Σ_d own[row(r)][d] · other[col(k)][d]: the lane's 4 × 8 block of own · otherᵀ, both
// tiles (64, ld) in shared memory. The sum runs over d in order, as the CPU's dot product.
template <class T, int kD>
__device__ void tile_scores(LaneScores<T>& s, const T* own, const T* other, const Lane& lane) {
    using L = Layout<T, kD>;
    GG_UNROLL
    for (int r = 0; r < kLaneRows; ++r) {
        GG_UNROLL
        for (int k = 0; k < kLaneCols; ++k) s[r][k] = 0;
    }
    for (int d = 0; d < kD; d += L::V) {
        T a[kLaneRows][L::V];
        GG_UNROLL
        for (int r = 0; r < kLaneRows; ++r) load_vector(a[r], own + lane.row(r) * L::ld + d);
        GG_UNROLL
        for (int k = 0; k < kLaneCols; ++k) {
            T b[L::V];
            load_vector(b, other + lane.col(k) * L::ld + d);
            GG_UNROLL
            for (int r = 0; r < kLaneRows; ++r) {
                GG_UNROLL
                for (int e = 0; e < L::V; ++e) s[r][k] += a[r][e] * b[e];
            }
        }
    }
}

// w[col(k)][4rg + r] = s[r][k]: the lane's weights into its warp's buffer (64 columns, ldw).
template <class T, int kD>
__device__ void store_weights(T* w, const LaneScores<T>& s, const Lane& lane) {
    using L = Layout<T, kD>;
    GG_UNROLL
    for (int k = 0; k < kLaneCols; ++k) {
        GG_UNROLL
        for (int r = 0; r < kLaneRows; r += L::V) {
            T v[L::V];
            GG_UNROLL
            for (int e = 0; e < L::V; ++e) v[e] = s[r + e][k];
            store_vector(w + lane.col(k) * L::ldw + lane.rg * kLaneRows + r, v);
        }
    }
}
// The inverse: s ← this lane's own slots of w.
template <class T, int kD>
__device__ void load_weights(LaneScores<T>& s, const T* w, const Lane& lane) {
    using L = Layout<T, kD>;
    GG_UNROLL
    for (int k = 0; k < kLaneCols; ++k) {
        GG_UNROLL
        for (int r = 0; r < kLaneRows; r += L::V) {
            T v[L::V];
            load_vector(v, w + lane.col(k) * L::ldw + lane.rg * kLaneRows + r);
            GG_UNROLL
            for (int e = 0; e < L::V; ++e) s[r + e][k] = v[e];
        }
    }
}

// acc[r][·] += Σ_c w[c][row(r)] · z[c][the lane's columns of D]: the warp's 16 × 64 weights
// (every lane's, so the buffer must be complete) times the tile z (64, ld), over c in order.
template <class T, int kD>
__device__ void tile_accumulate(Accumulator<T, kD>& acc, const T* w, const T* z, const Lane& lane) {
    using L = Layout<T, kD>;
    for (int c = 0; c < kTile; ++c) {
        T p[kLaneRows];
        GG_UNROLL
        for (int r = 0; r < kLaneRows; r += L::V) load_vector(p + r, w + c * L::ldw + lane.rg * kLaneRows + r);
        GG_UNROLL
        for (int q = 0; q < L::lane_cols / L::V; ++q) {
            T y[L::V];
            load_vector(y, z + c * L::ld + L::V * (lane.cg + kColGroups * q));
            GG_UNROLL
            for (int r = 0; r < kLaneRows; ++r) {
                GG_UNROLL
                for (int e = 0; e < L::V; ++e) acc[r][q * L::V + e] += p[r] * y[e];
            }
        }
    }
}

// out[the lane's columns of D] = a · factor, columns below D; out is one row (D) in global memory.
template <class T, int kD, class S>
__device__ void store_lane_row(S* out, const T (&a)[Layout<T, kD>::lane_cols], T factor, int D, bool vector,
                               const Lane& lane) {
    using L = Layout<T, kD>;
    GG_UNROLL
    for (int q = 0; q < L::lane_cols / L::V; ++q) {
        T v[L::V];
        GG_UNROLL
        for (int e = 0; e < L::V; ++e) v[e] = a[q * L::V + e] * factor;
        store_global(out, v, L::V * (lane.cg + kColGroups * q), D, vector);
    }
}

// Reductions over the 8 lanes that share a row (lane = 8·rg + cg: xor 1, 2, 4 stays in the row).
// Butterflies: all 8 lanes end with the same bits.
template <class T>
__device__ T row_max(T x) {
    for (int offset = 1; offset < kColGroups; offset *= 2) x = ::max(x, __shfl_xor_sync(kFullMask, x, offset));
    return x;
}
template <class T>
__device__ T row_sum(T x) {
    for (int offset = 1; offset < kColGroups; offset *= 2) x += __shfl_xor_sync(kFullMask, x, offset);
    return x;
}

// ---- host side -------------------------------------------------------------------------------

// The largest head size D the kernels take.
template <class T>
constexpr int kMaxHeadDim = sizeof(T) == 4 ? 128 : 64;

// Calls f.template operator()<S, kD>() for the storage type S of `dtype` (float, double or
// bfloat16) and the smallest bucket kD ∈ {32, 64, 128} that holds D; throws when D is more than
// the kernels take (see Limits).
template <class F>
void dispatch(const char* op, DType dtype, int64_t D, F&& f) {
    const auto with_type = [&]<class S>() {
        using T = compute_t<S>;
        if (D > kMaxHeadDim<T>)
            throw std::invalid_argument(std::string(op) + ": head size D = " + std::to_string(D) +
                                        " is more than the CUDA kernels support in " + dtype_name(dtype) + " (" +
                                        std::to_string(kMaxHeadDim<T>) + ")");
        if (D <= 32) f.template operator()<S, 32>();
        else if (D <= 64) f.template operator()<S, 64>();
        else if constexpr (kMaxHeadDim<T> >= 128) f.template operator()<S, 128>();
    };
    if (dtype == DType::f32) with_type.template operator()<float>();
    else if (dtype == DType::f64) with_type.template operator()<double>();
    else if (dtype == DType::bf16) with_type.template operator()<bfloat16>();
    else
        throw std::invalid_argument(std::string(op) + ": dtype " + dtype_name(dtype) +
                                    " is not float32, float64 or bfloat16");
}

// lse is stored in the compute type of Q's dtype: f32 for bf16 (see "bf16" above).
inline void check_lse_dtype(const char* op, DType q, const View& lse) {
    const DType expected = q == DType::bf16 ? DType::f32 : q;
    if (lse.dtype != expected)
        throw std::invalid_argument(std::string(op) + ": lse is " + dtype_name(lse.dtype) + "; with " +
                                    dtype_name(q) + " Q, K, V it must be " + dtype_name(expected));
}

// ScoreFunction::sink reads its slot logits from sink (H), contiguous, in lse's dtype.
inline void check_sink(const char* op, const AttentionShape& s, const View& lse, const View& sink) {
    if (s.score_fn != ScoreFunction::sink) return;
    if (sink.data == nullptr || sink.dtype != lse.dtype || sink.ndim != 1 || sink.shape[0] != s.H ||
        (s.H > 1 && sink.strides[0] != 1))
        throw std::invalid_argument(std::string(op) + ": the sink score function needs sink, " +
                                    std::to_string(s.H) + " contiguous " + dtype_name(lse.dtype) +
                                    " logits, one per query head; got " +
                                    (sink.data ? std::to_string(sink.numel()) + " " + dtype_name(sink.dtype) : "none"));
}

// One block per (head, tile of 64 rows): grid (heads, ⌈rows / 64⌉), heads on x, whose limit
// is 2³¹ − 1, the tiles on y (at most 65535).
inline dim3 tile_grid(const char* op, int64_t heads, int64_t rows) {
    const int64_t tiles = (rows + kTile - 1) / kTile;
    if (heads > 2147483647 || tiles > 65535)
        throw std::invalid_argument(std::string(op) + ": " + std::to_string(heads) + " heads of " +
                                    std::to_string(rows) + " rows are more than one launch takes (2³¹ − 1 heads, " +
                                    std::to_string(65535 * kTile) + " rows)");
    return dim3(unsigned(heads), unsigned(tiles));
}

// Under the causal band the last query tiles see the most keys: the forward and dQ kernels
// take their tiles last to first, so that the longest blocks start first and the short ones
// fill the tail.
__device__ inline int64_t heavy_first_tile() { return int64_t(gridDim.y) - 1 - int64_t(blockIdx.y); }

// The kv head that query head bh = b·H + h reads (GQA).
__device__ inline int64_t kv_head(const AttentionShape& s, int64_t bh) {
    return bh / s.H * s.Hkv + bh % s.H / (s.H / s.Hkv);
}

}  // namespace gg::cuda::GG_CUDA_BUILD::attention

// row_reduce.h — how the row-wise kernels (reduce, softmax, cross_entropy, rms_norm, topk,
// sum_squares) spread a row over threads and combine what the threads found, and how the
// column-wise ones (reduce over a leading axis, RMSNorm's dweight) do the same down columns.
//
// Rows. A row of `cols` elements belongs to a group of threads that stride over its columns
// (coalesced: neighbouring threads read neighbouring elements), then combine their partials:
//   - short rows (cols ≤ 1024): one warp per row, block = (32, 8), eight rows per block; the
//     warp combines with five shuffles and no barrier;
//   - long rows: one block of 256 threads per row, block = (256, 1); each warp combines with
//     shuffles, then the eight warp results meet in shared memory.
// In both, threadIdx.x is a thread's place in its row group and blockDim.x the group's size;
// the group's rows are blockIdx.x · blockDim.y + threadIdx.y, then every gridDim.x · blockDim.y.
// A row kernel built with W > 1 (cuda/packs.h: when cols is a multiple of W and the rows'
// pointers are aligned) reads and writes its rows in W-element packs: thread x of the group
// takes columns W·x .. W·x + W − 1, then the pack blockDim.x packs further on (row_visit,
// row_map); with W = 1 that is the column-by-column stride above.
//
// Columns. For a (R, C) block reduced over R, a (32, Y) block owns 32 neighbouring columns:
// thread (x, y) takes rows y, y + Y, ... of column x (a warp reads 32 contiguous elements),
// and the Y partials of each column meet in shared memory.
//
// Every combination runs in a fixed order (a tree over lanes, then warps or row groups in
// order), never through atomics, so two runs give bitwise identical results.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/launch.h"
#include "cuda/packs.h"

namespace gg::cuda {

constexpr unsigned kWarpSize = 32;  // warpSize is a device variable; launch shapes need it on the host
constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int64_t kWarpRowMaxCols = 1024;  // rows up to this long go to one warp
constexpr unsigned kWarpRowsPerBlock = 8;
constexpr unsigned kRowBlockThreads = 256;  // threads of a block that owns one long row
constexpr unsigned kColumnGroups = 16;      // Y of a column block: rows read side by side
constexpr int64_t kMaxGridX = 2147483647;   // grid.x's own limit, for grids that must cover every column

// −∞ for floats, the smallest value for integers: the start of a max, nothing below it.
template <class T>
constexpr T kLowest = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
template <class T>
constexpr T kHighest = std::is_floating_point_v<T> ? std::numeric_limits<T>::infinity()
                                                   : std::numeric_limits<T>::max();

template <class T>
__device__ inline bool is_nan(T x) {
    if constexpr (std::is_floating_point_v<T>) return x != x;  // only NaN differs from itself
    else return false;
}

// The launch shape of a row-wise kernel over (rows, cols): warps for short rows, blocks for long ones.
struct LaunchShape {
    dim3 grid, block;
};
inline LaunchShape row_launch(int64_t rows, int64_t cols) {
    if (cols <= kWarpRowMaxCols) {
        const int64_t blocks = (rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
        return {dim3(unsigned(std::clamp<int64_t>(blocks, 1, kMaxBlocks))), dim3(kWarpSize, kWarpRowsPerBlock)};
    }
    return {dim3(unsigned(std::clamp<int64_t>(rows, 1, kMaxBlocks))), dim3(kRowBlockThreads)};
}

// The first row of this thread's group, and the step to its next one.
__device__ inline int64_t first_row() { return int64_t(blockIdx.x) * blockDim.y + threadIdx.y; }
__device__ inline int64_t row_step() { return int64_t(gridDim.x) * blockDim.y; }

// Combines one value per thread of the row group and gives the result to every thread of
// the group. Lane 0 of a warp folds the others in a tree (v0 ⊕ v16, then ⊕ (v8 ⊕ v24), ...);
// a block then folds its warps' results in order. Every thread of the group must call it.
// T is a number, or a struct with its own shuffle_down and shuffle_first (found by
// argument-dependent lookup; MaxSumExp below), since a warp shuffle moves one number.
template <class T>
__device__ T shuffle_down(T v, unsigned delta) {
    return __shfl_down_sync(kFullWarp, v, delta);
}
template <class T>
__device__ T shuffle_first(T v) {
    return __shfl_sync(kFullWarp, v, 0);
}
template <class T, class Combine>
__device__ T row_reduce(T v, Combine combine) {
    for (unsigned delta = kWarpSize / 2; delta > 0; delta /= 2) v = combine(v, shuffle_down(v, delta));
    if (blockDim.x == kWarpSize) return shuffle_first(v);
    GG_SHARED(T[kRowBlockThreads / kWarpSize], warp_results);
    const unsigned lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    if (lane == 0) warp_results[warp] = v;
    __syncthreads();
    T total = warp_results[0];
    for (unsigned w = 1; w < blockDim.x / kWarpSize; ++w) total = combine(total, warp_results[w]);
    __syncthreads();  // the next call writes warp_results again
    return total;
}

struct Add {
    template <class T>
    __device__ T operator()(T a, T b) const { return a + b; }
};
// The larger, ignoring NaN as std::max_element does; enough where a NaN poisons the result anyway.
struct Larger {
    template <class T>
    __device__ T operator()(T a, T b) const { return b > a ? b : a; }
};

// Whether (rows, cols) matrices of T at these pointers can be read in packs: every row then
// starts on a 16-byte boundary.
template <class T, class... P>
bool packable_rows(int64_t cols, const P*... p) {
    return cols % kPackWidth<T> == 0 && aligned16(p...);
}

// f(c, a_c, b_c, ...) for each column c of this thread's part of the rows a, b, ... (cols),
// W columns to a load.
template <int W, class F, class... T>
__device__ void row_visit(int64_t cols, F&& f, const T*... rows) {
    for (int64_t c = int64_t(threadIdx.x) * W; c < cols; c += int64_t(blockDim.x) * W) visit_pack<W>(c, f, rows...);
}

// out_c = f(c, a_c, b_c, ...) for each column c of this thread's part of the rows (cols), W
// columns to a load and a store.
template <int W, class F, class O, class... T>
__device__ void row_map(int64_t cols, F&& f, O* out, const T*... rows) {
    for (int64_t c = int64_t(threadIdx.x) * W; c < cols; c += int64_t(blockDim.x) * W) map_pack<W>(c, f, out, rows...);
}

// Rows kept in registers. A kernel that must see a whole row before it writes any of it
// (RMSNorm's dx needs the row's dot product first) would read the row twice, once to sum and
// once to write. Instead each thread keeps the first K packs of its part of the row in
// registers between the two sweeps: for_row_packs calls f.template operator()<k>(c) for this
// thread's packs c = W·(threadIdx.x + k·blockDim.x) < cols, with k = 0, …, K − 1 a
// compile-time constant (so a per-thread array indexed by it stays in registers, as an array
// indexed by a loop counter would not), then with k = K for the packs beyond, which the second
// sweep reads from memory again. A row of up to K·W·(group size) columns is then read once.
constexpr int kKeptPacks = 8;  // K of the kernels that keep rows: 1024 f32 columns on a warp, 8192 on a block
template <int K, int W, class F>
__device__ void for_row_packs(int64_t cols, F&& f) {
    const int64_t first = int64_t(threadIdx.x) * W, step = int64_t(blockDim.x) * W;
    [&]<int... k>(std::integer_sequence<int, k...>) {
        ((first + k * step < cols ? f.template operator()<k>(first + k * step) : void()), ...);
    }(std::make_integer_sequence<int, K>{});
    for (int64_t c = first + K * step; c < cols; c += step) f.template operator()<K>(c);
}

// The max m of xr[0, cols) and z = Σ exp(x − m), which every thread of the row group gets,
// in one pass over the row. The statistics are kept in the type the row computes in
// (compute_t: float for f32 and bf16, double for f64), exp is that type's (expf for float),
// and each thread keeps a running pair (m, z) that it updates element by element, online:
//   x > m:  z ← z · exp(m − x) + 1,  m ← x      (rescale what was summed to the new max)
//   else:   z ← z + exp(x − m)
// so each element costs one exp. The pairs of the group then meet in row_reduce's order
// with the same rule, (m, z) ⊕ (m', z') = (M, z · exp(m − M) + z' · exp(m' − M)),
// M = max(m, m'), where a side already at M keeps its z untouched (also when M is ±∞, where
// m − M would be NaN). A −∞ element adds nothing; a NaN makes z NaN, as on the CPU.
// Accuracy (float): each exp is off by a few ulps, each add and rescale by half an ulp, so z
// is within about (n + log2(group) + a few) · ε relative of the exact sum, n being the
// elements one thread summed (cols / group): tests/test_cuda_nn.cpp checks against double.
template <class T>
struct MaxSumExp {
    compute_t<T> max;
    compute_t<T> sum;
};
template <class T>
__device__ MaxSumExp<T> shuffle_down(MaxSumExp<T> v, unsigned delta) {
    return {__shfl_down_sync(kFullWarp, v.max, delta), __shfl_down_sync(kFullWarp, v.sum, delta)};
}
template <class T>
__device__ MaxSumExp<T> shuffle_first(MaxSumExp<T> v) {
    return {__shfl_sync(kFullWarp, v.max, 0), __shfl_sync(kFullWarp, v.sum, 0)};
}
template <class C>
__device__ inline C row_exp(C x) {
    if constexpr (std::is_same_v<C, float>) return expf(x);
    else return exp(x);
}
template <class C>
__device__ inline C row_log(C x) {
    if constexpr (std::is_same_v<C, float>) return logf(x);
    else return log(x);
}
// (m, z) ⊕ (m', z'), as above.
struct CombineMaxSum {
    template <class T>
    __device__ MaxSumExp<T> operator()(MaxSumExp<T> a, MaxSumExp<T> b) const {
        const auto M = b.max > a.max ? b.max : a.max;
        return {M, (a.max == M ? a.sum : a.sum * row_exp(a.max - M)) + (b.max == M ? b.sum : b.sum * row_exp(b.max - M))};
    }
};
// keep.template operator()<k>(pack) receives this thread's packs k < K of the row as they are
// read (for_row_packs), for a caller that writes the row afterwards without reading it again.
template <int W, int K, class T, class Keep>
__device__ MaxSumExp<T> row_max_sum_exp(const T* xr, int64_t cols, Keep&& keep) {  // xr: (cols)
    using C = compute_t<T>;
    C m = kLowest<C>, z = 0;
    for_row_packs<K, W>(cols, [&]<int k>(int64_t c) {
        const Pack<T, W> pack = load_pack<W>(xr + c);
        if constexpr (k < K) keep.template operator()<k>(pack);
        GG_UNROLL
        for (int j = 0; j < W; ++j) {
            const C x = C(pack.at[j]);
            if (x > m) z = z * row_exp(m - x) + C(1), m = x;  // m = −∞ at first: z · 0 = 0
            else if (x != kLowest<C>) z += row_exp(x - m);    // −∞ adds nothing (and −∞ − −∞ is NaN)
        }
    });
    return row_reduce(MaxSumExp<T>{m, z}, CombineMaxSum{});
}
// For a caller that keeps none of the row (softmax reads it again).
struct KeepNothing {
    template <int k, class P>
    __device__ void operator()(const P&) const {}
};
template <int W, class T>
__device__ MaxSumExp<T> row_max_sum_exp(const T* xr, int64_t cols) {
    return row_max_sum_exp<W, 0>(xr, cols, KeepNothing{});
}

// Tall columns. A column-wise reduction of (R, cols) has only ⌈cols / 32⌉ blocks: RMSNorm's
// dweight over an (8192, 384) activation is 12 blocks on a 132-SM GPU, each walking all 8192
// rows. Then the rows are cut into `chunks` ranges of ⌈R / chunks⌉ ≥ kMinChunkRows rows (the
// last one shorter, at worst empty, which adds the identity) until there are about
// kFillBlocks blocks; each block reduces one range of its columns to a partial (in a
// scratch buffer), and combine_column_chunks (below) folds each column's partials in range
// order: still one fixed order, no atomics, the same bits on every run.
constexpr int64_t kMinChunkRows = 256;
inline int64_t column_chunks(int64_t outer, int64_t R, int64_t cols) {
    const int64_t blocks = outer * ((cols + kWarpSize - 1) / kWarpSize);
    if (blocks >= kFillBlocks || R < 2 * kMinChunkRows) return 1;
    return std::min((kFillBlocks + blocks - 1) / blocks, R / kMinChunkRows);
}

// Rows [begin, end) of range z when R rows are cut into `chunks` ranges of ⌈R / chunks⌉ rows
// (the last one shorter).
struct RowRange {
    int64_t begin, end;
};
__device__ inline RowRange chunk_rows(int64_t z, int64_t chunks, int64_t R) {
    const int64_t size = (R + chunks - 1) / chunks, begin = z * size < R ? z * size : R;
    return {begin, begin + size < R ? begin + size : R};
}

// The launch shape of a column-wise kernel: 32 columns per block along x (every column has
// its block), `groups` (outer · chunks, grid-strided beyond 65535) along y, Y = min(R, 16) row
// groups per block.
inline LaunchShape column_launch(int64_t groups, int64_t R, int64_t cols) {
    const int64_t column_blocks = (cols + kWarpSize - 1) / kWarpSize;
    return {dim3(unsigned(std::clamp<int64_t>(column_blocks, 1, kMaxGridX)),
                 unsigned(std::clamp<int64_t>(groups, 1, kMaxBlocks))),
            dim3(kWarpSize, unsigned(std::clamp<int64_t>(R, 1, kColumnGroups)))};
}

// Folds value(r) for r < R into `identity` down this thread's column, the rows split over the
// block's y groups; every thread gets its column's total. `active` is false for the threads
// whose column lies past the end: they only take part in the barriers.
template <class Acc, class Value, class Combine>
__device__ Acc column_reduce(bool active, int64_t R, Acc identity, Value value, Combine combine) {
    GG_SHARED(Acc[kColumnGroups][kWarpSize], partials);
    Acc acc = identity;
    if (active)
        for (int64_t r = threadIdx.y; r < R; r += blockDim.y) acc = combine(acc, value(r));
    partials[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    Acc total = partials[0][threadIdx.x];
    for (unsigned y = 1; y < blockDim.y; ++y) total = combine(total, partials[y][threadIdx.x]);
    __syncthreads();  // the next call writes partials again
    return total;
}

// out[o, c] = ⊕_z partials[o · chunks + z, c] for z = 0, 1, … in order: the second pass of a
// chunked column reduction, one thread per output (grid-strided).
namespace GG_CUDA_BUILD {
template <class Acc, class T, class Combine>
__global__ void combine_column_chunks(T* out, const Acc* partials, int64_t outer, int64_t chunks, int64_t cols,
                                      Combine combine) {
    const int64_t n = outer * cols;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const Acc* p = partials + (i / cols) * chunks * cols + i % cols;  // (chunks) at stride cols
        Acc total = p[0];
        for (int64_t z = 1; z < chunks; ++z) total = combine(total, p[z * cols]);
        out[i] = T(total);
    }
}

// A column-wise reduction of (outer, R, cols) into out (outer, cols), cut into row chunks
// where its blocks alone would leave the GPU idle. first_pass(shape, chunks, partials)
// launches the caller's kernel on `shape`: grid y runs over (o, z) = (g / chunks, g % chunks),
// and a block writes its totals to out (as T) when chunks is 1, else to partials (Acc,
// (outer · chunks, cols)), which the second pass then folds.
template <class Acc, class T, class Combine, class FirstPass>
void column_reduction(T* out, int64_t outer, int64_t R, int64_t cols, Combine combine, FirstPass first_pass) {
    const int64_t chunks = column_chunks(outer, R, cols);
    if (chunks == 1) return first_pass(column_launch(outer, R, cols), chunks, static_cast<Acc*>(nullptr));
    const size_t bytes = size_t(outer * chunks * cols) * sizeof(Acc);
    Acc* partials = static_cast<Acc*>(allocate(bytes));
    first_pass(column_launch(outer * chunks, (R + chunks - 1) / chunks, cols), chunks, partials);
    launch("combine_column_chunks", combine_column_chunks<Acc, T, Combine>,
           grid_covering(outer * cols, kRowBlockThreads), dim3(kRowBlockThreads), 0, out,
           static_cast<const Acc*>(partials), outer, chunks, cols, combine);
    deallocate(partials, bytes);  // one stream: a later kernel that reuses it runs after these two
}
}  // namespace GG_CUDA_BUILD

}  // namespace gg::cuda

// reduce.cu — sum, max and min over the middle axis of a contiguous (outer, R, inner) block,
// and the sum of squares behind the gradient norm.
//
//   out[o, j] = ⊕_{r < R} in[o, r, j],  ⊕ ∈ {+, max, min}            in (outer, R, inner) → out (outer, inner)
//   acc += Σ_i x_i²                                                    x (n), acc a float64 scalar
//
// As on the CPU, floats accumulate in double and int64 in int64, and max/min propagate NaN
// (a NaN anywhere in the reduced run makes the result NaN). bf16 is read as float, summed in
// double, and the result rounded to bf16 once.
//
// Two mappings for reduce, by the shape of the block (cuda/row_reduce.h):
//   - inner ≥ 32 (a reduction over a leading axis, e.g. a bias gradient): column-wise, a
//     (32, min(R, 16)) block per 32 neighbouring outputs of one o; a warp reads 32 contiguous
//     elements of each row r, the 16 row groups' partials meet in shared memory. Where that
//     gives few blocks and R is long, R is cut into chunks whose partials a second kernel
//     folds in order (cuda/row_reduce.h, "Tall columns").
//   - inner < 32 (e.g. a sum over the last dim): row-wise, each output's R elements, at
//     stride inner, go to one warp (R ≤ 1024) or one block of 256 threads.
// sum_squares is two passes: up to 1024 blocks of 256 threads each sum their grid-strided
// share (in 16-byte packs where x is aligned, cuda/packs.h) into one partial, then one block
// adds the partials in block order to acc. Both passes combine in a fixed order, so the
// result depends on n and on x's alignment (the pack width), never on timing.
#include <algorithm>
#include <stdexcept>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/row_reduce.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

// Accumulates in double for floats (bf16 among them), as the CPU does; in int64 for int64.
template <class T>
using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

// The combine step and starting value of each ReduceOp; max/min propagate NaN.
struct Sum : Add {
    template <class A>
    static constexpr A identity = A(0);
};
struct Max {
    template <class A>
    static constexpr A identity = kLowest<A>;
    template <class A>
    __device__ A operator()(A acc, A x) const { return is_nan(x) || x > acc ? x : acc; }
};
struct Min {
    template <class A>
    static constexpr A identity = kHighest<A>;
    template <class A>
    __device__ A operator()(A acc, A x) const { return is_nan(x) || x < acc ? x : acc; }
};

// in: (outer, R, inner) → out: (outer, inner), inner ≥ 32; grid (inner / 32, outer · chunks),
// block (32, Y). Block (x, g) folds rows chunk_rows(g % chunks) of o = g / chunks: the totals
// go to out when there is one chunk, to partials (outer · chunks, inner) otherwise.
template <class T, class Op>
__global__ void reduce_columns(T* out, Acc<T>* partials, const T* in, int64_t outer, int64_t chunks, int64_t R,
                               int64_t inner) {
    const int64_t j = int64_t(blockIdx.x) * kWarpSize + threadIdx.x;
    for (int64_t g = blockIdx.y; g < outer * chunks; g += gridDim.y) {
        const RowRange rows = chunk_rows(g % chunks, chunks, R);
        const T* block = in + ((g / chunks) * R + rows.begin) * inner;  // (rows, inner)
        const Acc<T> total = column_reduce(
            j < inner, rows.end - rows.begin, Op::template identity<Acc<T>>,
            [&](int64_t r) { return Acc<T>(block[r * inner + j]); }, Op{});
        if (threadIdx.y == 0 && j < inner) {
            if (chunks == 1) out[g * inner + j] = T(total);
            else partials[g * inner + j] = total;
        }
    }
}

// in: (outer, R, inner) → out: (outer, inner), inner < 32; output q = o · inner + j is one row
// of R elements at stride inner.
template <class T, class Op>
__global__ void reduce_rows(T* out, const T* in, int64_t outer, int64_t R, int64_t inner) {
    for (int64_t q = first_row(); q < outer * inner; q += row_step()) {
        const T* run = in + (q / inner) * R * inner + q % inner;  // (R) at stride inner
        Acc<T> acc = Op::template identity<Acc<T>>;
        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) acc = Op{}(acc, Acc<T>(run[r * inner]));
        acc = row_reduce(acc, Op{});
        if (threadIdx.x == 0) out[q] = T(acc);
    }
}

template <class T, class Op>
void launch_reduce(const View& out, const View& in, int64_t outer, int64_t R, int64_t inner) {
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(in.data);
    if (inner >= kWarpSize) {
        const auto first_pass = [&](const LaunchShape& shape, int64_t chunks, Acc<T>* partials) {
            launch("reduce_columns", reduce_columns<T, Op>, shape.grid, shape.block, 0, o, partials, x, outer, chunks,
                   R, inner);
        };
        column_reduction<Acc<T>>(o, outer, R, inner, Op{}, first_pass);
    } else {
        const LaunchShape shape = row_launch(outer * inner, R);
        launch("reduce_rows", reduce_rows<T, Op>, shape.grid, shape.block, 0, o, x, outer, R, inner);
    }
}

constexpr unsigned kSumSquaresThreads = kRowBlockThreads;
constexpr int64_t kSumSquaresBlocks = 1024;

// The first pass's partials, one per block: the kernels on the one stream run in order, so
// two sum_squares calls never use it at once.
__device__ double sum_squares_partials[kSumSquaresBlocks];

// x: (n) → sum_squares_partials[b] = Σ x² over block b's grid-strided share, read in W-element
// packs (cuda/packs.h).
template <int W, class T>
__global__ void sum_squares_blocks(const T* x, int64_t n) {
    double acc = 0;
    for_each_pack<W>(n, [&]<int V>(int64_t i) {
        visit_pack<V>(i, [&](int64_t, T xi) { acc += double(xi) * double(xi); }, x);
    });
    acc = row_reduce(acc, Add{});
    if (threadIdx.x == 0) sum_squares_partials[blockIdx.x] = acc;
}

// *acc += Σ sum_squares_partials[0, blocks); one block.
__global__ void sum_squares_total(double* acc, int64_t blocks) {
    double sum = 0;
    for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) sum += sum_squares_partials[b];
    sum = row_reduce(sum, Add{});
    if (threadIdx.x == 0) *acc += sum;
}

}  // namespace

void reduce(ReduceOp op, const View& out, const View& in, int64_t outer, int64_t R, int64_t inner) {
    if (op != ReduceOp::sum && R == 0) throw std::invalid_argument("reduce: max/min over an empty dim");
    if (outer * inner == 0) return;
    dispatch_any(out.dtype, [&]<class T>() {
        switch (op) {
            case ReduceOp::sum: launch_reduce<T, Sum>(out, in, outer, R, inner); break;
            case ReduceOp::max: launch_reduce<T, Max>(out, in, outer, R, inner); break;
            case ReduceOp::min: launch_reduce<T, Min>(out, in, outer, R, inner); break;
        }
    });
}

void sum_squares(const View& acc, const View& x) {
    const int64_t n = x.numel();
    if (n == 0) return;
    int64_t blocks = 0;
    dispatch_floating_bf16(x.dtype, [&]<class T>() {
        const T* xp = static_cast<const T*>(x.data);
        by_pack_width<T>(aligned16(xp), [&]<int W>() {
            const int64_t packs = (n + W - 1) / W;
            blocks = std::min(kSumSquaresBlocks, (packs + kSumSquaresThreads - 1) / kSumSquaresThreads);
            launch("sum_squares_blocks", sum_squares_blocks<W, T>, dim3(unsigned(blocks)), dim3(kSumSquaresThreads),
                   0, xp, n);
        });
    });
    launch("sum_squares_total", sum_squares_total, dim3(1), dim3(kSumSquaresThreads), 0,
           static_cast<double*>(acc.data), blocks);
}

}  // namespace gg::cuda::GG_CUDA_BUILD

// softmax.cu — row-wise softmax and log_softmax of a contiguous (rows, cols) matrix, and
// their backward.
//
//   softmax:      y_c = exp(x_c − m) / z,       m = max_c x_c,  z = Σ_c exp(x_c − m)
//   log_softmax:  y_c = x_c − m − log z
//   backward:     softmax      dx = y ⊙ (dy − Σ_c dy_c y_c)
//                 log_softmax  dx = dy − exp(y) Σ_c dy_c
//
// One warp per row (cols ≤ 1024, eight rows per block) or one block of 256 threads per row
// (cuda/row_reduce.h): the threads stride over the row's columns, combine the max, then the
// sum, in a fixed-order tree, and write their own columns. When cols is a multiple of 4
// (f32; 2 for f64) and the matrices are 16-byte aligned, each access moves a 16-byte pack of
// columns (cuda/packs.h; W below), else one column.
//
// Numerics follow the CPU exactly, for f32 too: x − m in T, exp in double, z and the backward
// dot product summed in double. Summing f32 exps in float would round log2(cols) times along
// the tree, up to ~1e-6 relative for a vocabulary-sized row, which is the whole tolerance;
// in double the only difference from the CPU is the order of the additions, invisible once
// rounded to float. The cost is small: the kernel is bound by memory traffic, and an H100/H200
// runs double arithmetic at half its float rate. bf16 rows are read as float (the max too) and
// each output rounded to bf16 once; the sums are the same doubles.
#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/row_reduce.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

// x, y: (rows, cols).
template <int W, class T>
__global__ void softmax_rows(T* y, const T* x, int64_t rows, int64_t cols, bool log_softmax) {
    for (int64_t r = first_row(); r < rows; r += row_step()) {
        const T* xr = x + r * cols;  // (cols)
        T* yr = y + r * cols;        // (cols)
        const MaxSumExp<T> s = row_max_sum_exp<W>(xr, cols);
        const double log_z = log(s.sum);
        row_map<W>(
            cols,
            [&](int64_t, T xc) { return log_softmax ? T(xc - s.max - log_z) : T(exp(double(xc - s.max)) / s.sum); },
            yr, xr);
    }
}

// y, dy, dx: (rows, cols).
template <int W, class T>
__global__ void softmax_backward_rows(T* dx, const T* y, const T* dy, int64_t rows, int64_t cols, bool log_softmax) {
    for (int64_t r = first_row(); r < rows; r += row_step()) {
        const T *yr = y + r * cols, *gr = dy + r * cols;  // (cols) each
        T* dxr = dx + r * cols;                           // (cols)
        double dot = 0;  // Σ dy ⊙ y, or Σ dy for log_softmax
        row_visit<W>(cols, [&](int64_t, T yc, T gc) { dot += log_softmax ? double(gc) : double(gc) * yc; }, yr, gr);
        dot = row_reduce(dot, Add{});
        row_map<W>(
            cols,
            [&](int64_t, T yc, T gc) { return log_softmax ? T(gc - exp(double(yc)) * dot) : T(yc * (gc - dot)); },
            dxr, yr, gr);
    }
}

}  // namespace

void softmax(const View& out, const View& in, int64_t rows, int64_t cols, bool log) {
    if (rows * cols == 0) return;
    const LaunchShape shape = row_launch(rows, cols);
    dispatch_floating_bf16(in.dtype, [&]<class T>() {
        T* y = static_cast<T*>(out.data);
        const T* x = static_cast<const T*>(in.data);
        by_pack_width<T>(packable_rows<T>(cols, y, x), [&]<int W>() {
            launch("softmax_rows", softmax_rows<W, T>, shape.grid, shape.block, 0, y, x, rows, cols, log);
        });
    });
}

void softmax_backward(const View& dx, const View& y, const View& dy, int64_t rows, int64_t cols, bool log) {
    if (rows * cols == 0) return;
    const LaunchShape shape = row_launch(rows, cols);
    dispatch_floating_bf16(y.dtype, [&]<class T>() {
        T* d = static_cast<T*>(dx.data);
        const T *yp = static_cast<const T*>(y.data), *g = static_cast<const T*>(dy.data);
        by_pack_width<T>(packable_rows<T>(cols, d, yp, g), [&]<int W>() {
            launch("softmax_backward_rows", softmax_backward_rows<W, T>, shape.grid, shape.block, 0, d, yp, g, rows,
                   cols, log);
        });
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

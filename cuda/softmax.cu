// softmax.cu — row-wise softmax and log_softmax of a contiguous (rows, cols) matrix, and
// their backward.
//
//   softmax:      y_c = exp(x_c − m) / z,       m = max_c x_c,  z = Σ_c exp(x_c − m)
//   log_softmax:  y_c = x_c − m − log z
//   backward:     softmax      dx = y ⊙ (dy − Σ_c dy_c y_c)
//                 log_softmax  dx = dy − exp(y) Σ_c dy_c
//
// One warp per row (cols ≤ 1024, eight rows per block) or one block of 256 threads per row
// (cuda/row_reduce.h): the threads stride over the row's columns once for the max and the
// sum together, combine their (max, sum) pairs in a fixed-order tree, then read the row again
// to write their own columns. When cols is a multiple of 4
// (f32; 2 for f64) and the matrices are 16-byte aligned, each access moves a 16-byte pack of
// columns (cuda/packs.h; W below), else one column.
//
// Numerics: f32 and bf16 rows compute in float, f64 rows in double (compute_t). The max and
// the normaliser z come from one pass over the row, an online max with a rescaled sum
// (row_max_sum_exp in cuda/row_reduce.h), with expf for float; the forward then multiplies
// by 1 / z, computed once per row, instead of dividing each column. Against the CPU, which
// sums in double, a float row differs by a few ulps of expf (2 at most on a GPU, by CUDA's
// documented bound) and the rounding of the sum, about (cols / group + log2(group)) · ε
// relative (tests/test_cuda_nn.cpp checks it against a double reference on rows of ±80, −∞
// and 50 000 columns). The backward's dot product is summed in double, and log_softmax's
// backward takes exp(y) in the row's compute type. bf16 rows are read as float and each
// output rounded to bf16 once.
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
        using C = compute_t<T>;
        const MaxSumExp<T> s = row_max_sum_exp<W>(xr, cols);
        const C log_z = row_log(s.sum), inv_z = C(1) / s.sum;
        row_map<W>(
            cols,
            [&](int64_t, T xc) {
                const C d = C(xc) - s.max;
                return log_softmax ? T(d - log_z) : T(row_exp(d) * inv_z);
            },
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
            [&](int64_t, T yc, T gc) {
                using C = compute_t<T>;
                return log_softmax ? T(C(gc) - row_exp(C(yc)) * C(dot)) : T(yc * (gc - dot));
            },
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

// rms_norm.cu — RMSNorm over the rows of a contiguous (rows, cols) x with weight w (cols).
//
//   forward:   rstd_r = 1 / √(mean_c x_rc² + ε),   y_rc = x_rc · rstd_r · w_c
//   backward:  dx_rc = rstd_r (w_c dy_rc − x_rc rstd_r² · mean_c(w_c dy_rc x_rc))
//              dw_c  = Σ_r dy_rc x_rc rstd_r
//
// forward and dx: one warp per row (cols ≤ 1024, eight rows per block) or one block of 256
// threads per row (cuda/row_reduce.h); the row group sums x² (or w·dy·x) in double, as the
// CPU does, then each thread writes its columns. The first thread of a row keeps rstd. dx
// keeps each thread's packs of dy and x in registers between the sum and the write
// (for_row_packs), so rows of up to 1024 columns on a warp, 8192 on a block (f32) are read
// once. Rows and w are read and written in 16-byte packs when cols is a multiple of the pack
// width and the pointers are aligned (cuda/packs.h; W below). bf16 is read as float; rstd, y
// and dx are computed in float (the sums in double); y and dx are rounded to bf16 once, when
// stored, and rstd is kept in float (tensor/backend.h).
// dw, when the rows are kept whole: from the same pass. The grid is cut to kFillBlocks blocks,
// so each row group takes many rows; it adds dy · x · rstd of its columns, row after row, in
// double registers. Then the sum runs as a fixed-order tree in two levels, so that no thread
// adds more than a few dozen numbers in a row: the block's row groups meet in shared memory,
// group 0 + 1 + … + 7 in that order, into one partial row per block (kFillBlocks rows, not
// the 2112 row groups' that one thread per column used to add one after another);
// rms_norm_dw_from_blocks then gives each column a warp, whose lane l adds blocks l, l + 32,
// … in order and whose lanes meet in row_reduce's shuffle tree. dy and x are read once for dx
// and dw together (three arrays' worth of traffic, plus the partials, against seven before),
// at the price of registers: 210 per thread for f32 and 255 for bf16 under nvcc for sm_90, no
// spills, one block of 256 threads per SM; whether that occupancy still reaches the bandwidth
// has not been measured on a GPU yet (bench/gpu memory: rms_norm_backward_1024 and _4096).
// dw otherwise (longer rows, or no rows): column-wise, a (32, min(rows, 16)) block per 32
// neighbouring columns; thread (x, y) sums rows y, y + 16, ... of its column in double and the
// 16 partials meet in a fixed order. With few columns and many rows (d_model 384 is 12 blocks)
// the rows are cut into chunks, one block per (32 columns, chunk), and a second kernel adds
// each column's chunk partials in order (cuda/row_reduce.h, "Tall columns"). Either way dw is
// written (never added to), with no atomics, and does not depend on timing. With no rows at
// all, dw is zero, as on the CPU.
#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/row_reduce.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

// x, y: (rows, cols), w: (cols) → y, rstd: (rows).
template <int W, class T>
__global__ void rms_norm_forward_rows(T* y, compute_t<T>* rstd, const T* x, const T* w, int64_t rows, int64_t cols, double eps) {
    for (int64_t r = first_row(); r < rows; r += row_step()) {
        const T* xr = x + r * cols;  // (cols)
        T* yr = y + r * cols;        // (cols)
        double sum_sq = 0;
        row_visit<W>(cols, [&](int64_t, T xc) { sum_sq += double(xc) * double(xc); }, xr);
        sum_sq = row_reduce(sum_sq, Add{});
        const compute_t<T> rs = compute_t<T>(1 / sqrt(sum_sq / double(cols) + eps));
        if (threadIdx.x == 0) rstd[r] = rs;
        row_map<W>(cols, [&](int64_t, T xc, T wc) { return xc * rs * wc; }, yr, xr, w);
    }
}

// The block's share of dw, from each thread's dw_sum[k][j] (column W·(x + k·blockDim.x) + j of
// its row group y): the row groups' values meet in y order, 0 + 1 + … + blockDim.y − 1, one
// slot of blockDim.x · W columns at a time through shared memory, and the block writes row
// blockIdx.x of block_partials (gridDim.x, cols). Both row shapes, (32, 8) and (256, 1), are
// 256 threads; a (256, 1) block has one row group, which the fold copies.
template <int W>
__device__ void fold_row_groups(double* block_partials, const double (&dw_sum)[kKeptPacks][W], int64_t cols) {
    constexpr int64_t kThreads = kWarpSize * kWarpRowsPerBlock;
    GG_SHARED(double[kThreads * W], slot);  // (blockDim.y, blockDim.x · W)
    const int64_t t = int64_t(threadIdx.y) * blockDim.x + threadIdx.x, slot_cols = int64_t(blockDim.x) * W;
    double* out = block_partials + int64_t(blockIdx.x) * cols;  // (cols)
    const auto fold_slot = [&]<int k>() {
        GG_UNROLL
        for (int j = 0; j < W; ++j) slot[t * W + j] = dw_sum[k][j];
        __syncthreads();
        for (int64_t i = t; i < slot_cols; i += kThreads) {
            double total = slot[i];
            for (unsigned y = 1; y < blockDim.y; ++y) total += slot[y * slot_cols + i];
            if (k * slot_cols + i < cols) out[k * slot_cols + i] = total;
        }
        __syncthreads();  // the next slot overwrites it
    };
    [&]<int... k>(std::integer_sequence<int, k...>) {  // k is a constant, so dw_sum stays in registers
        ((k * slot_cols < cols ? fold_slot.template operator()<k>() : void()), ...);  // the same for the whole block
    }(std::make_integer_sequence<int, kKeptPacks>{});
}

// dy, x: (rows, cols), w: (cols), rstd: (rows) → dx: (rows, cols). With WithDw (rows kept
// whole in registers: cols ≤ kKeptPacks · W · group), also block_partials (gridDim.x, cols):
// row group q (rows q, q + row_step(), ...) adds dy · x · rstd of its rows, in that order, in
// registers, and the block folds its groups' sums into its partial row (fold_row_groups).
template <int W, bool WithDw, class T>
__global__ void rms_norm_dx_rows(T* dx, double* block_partials, const T* dy, const T* x, const T* w, const compute_t<T>* rstd,
                                 int64_t rows, int64_t cols) {
    double dw_sum[WithDw ? kKeptPacks : 1][W] = {};  // this thread's columns of the group's partial
    for (int64_t r = first_row(); r < rows; r += row_step()) {
        const T *xr = x + r * cols, *gr = dy + r * cols;     // (cols) each
        T* dxr = dx + r * cols;                              // (cols)
        Pack<T, W> kept_dy[kKeptPacks], kept_x[kKeptPacks];  // this thread's first packs: 64 registers in f32
        double dot = 0;                                      // Σ_c w_c dy_c x_c
        for_row_packs<kKeptPacks, W>(cols, [&]<int k>(int64_t c) {
            const Pack<T, W> wc = load_pack<W>(w + c), gc = load_pack<W>(gr + c), xc = load_pack<W>(xr + c);
            GG_UNROLL
            for (int j = 0; j < W; ++j) dot += double(wc.at[j]) * double(gc.at[j]) * double(xc.at[j]);
            if constexpr (k < kKeptPacks) kept_dy[k] = gc, kept_x[k] = xc;
        });
        dot = row_reduce(dot, Add{});
        const compute_t<T> rs = rstd[r], correction = compute_t<T>(dot / double(cols)) * rs * rs;
        for_row_packs<kKeptPacks, W>(cols, [&]<int k>(int64_t c) {
            Pack<T, W> gc, xc, out;
            if constexpr (k < kKeptPacks) gc = kept_dy[k], xc = kept_x[k];
            else gc = load_pack<W>(gr + c), xc = load_pack<W>(xr + c);  // a row too long to keep whole
            const Pack<T, W> wc = load_pack<W>(w + c);
            GG_UNROLL
            for (int j = 0; j < W; ++j) {
                out.at[j] = rs * (wc.at[j] * gc.at[j] - xc.at[j] * correction);
                if constexpr (WithDw && k < kKeptPacks) dw_sum[k][j] += double(gc.at[j]) * double(xc.at[j]) * double(rs);
            }
            store_pack_global<W>(dxr + c, out);  // one st.global.v4 a pack, kept or not
        });
    }
    if constexpr (WithDw) fold_row_groups<W>(block_partials, dw_sum, cols);
}

// block_partials: (blocks, cols) → dw: (cols), Σ_b block_partials[b, c], a warp per column
// (block (32, 8): eight columns, grid-strided): lane l adds rows l, l + 32, … in order, and
// the lanes meet in row_reduce's tree, the same order on every run.
template <class T>
__global__ void rms_norm_dw_from_blocks(T* dw, const double* block_partials, int64_t blocks, int64_t cols) {
    for (int64_t c = first_row(); c < cols; c += row_step()) {
        double sum = 0;
        for (int64_t b = threadIdx.x; b < blocks; b += kWarpSize) sum += block_partials[b * cols + c];
        sum = row_reduce(sum, Add{});
        if (threadIdx.x == 0) dw[c] = T(sum);
    }
}

// dy, x: (rows, cols), rstd: (rows) → dw: (cols); grid (cols / 32, chunks), block (32, Y).
// Block (x, z) sums rows chunk_rows(z) into dw when there is one chunk, else into partials
// (chunks, cols).
template <class T>
__global__ void rms_norm_dw_columns(T* dw, double* partials, const T* dy, const T* x, const compute_t<T>* rstd, int64_t chunks,
                                    int64_t rows, int64_t cols) {
    const int64_t c = int64_t(blockIdx.x) * kWarpSize + threadIdx.x;
    for (int64_t z = blockIdx.y; z < chunks; z += gridDim.y) {
        const RowRange range = chunk_rows(z, chunks, rows);
        const double total = column_reduce(
            c < cols, range.end - range.begin, 0.0,
            [&](int64_t i) {
                const int64_t r = range.begin + i;
                return double(dy[r * cols + c]) * double(x[r * cols + c]) * double(rstd[r]);
            },
            Add{});
        if (threadIdx.y == 0 && c < cols) {
            if (chunks == 1) dw[c] = T(total);
            else partials[z * cols + c] = total;
        }
    }
}

}  // namespace

void rms_norm_forward(const View& y, const View& rstd, const View& x, const View& weight, int64_t rows, int64_t cols,
                      double eps) {
    if (rows == 0) return;
    const LaunchShape shape = row_launch(rows, cols);
    dispatch_floating_bf16(x.dtype, [&]<class T>() {
        T* yp = static_cast<T*>(y.data);
        const T *xp = static_cast<const T*>(x.data), *w = static_cast<const T*>(weight.data);
        by_pack_width<T>(packable_rows<T>(cols, yp, xp, w), [&]<int W>() {
            launch("rms_norm_forward_rows", rms_norm_forward_rows<W, T>, shape.grid, shape.block, 0, yp,
                   static_cast<compute_t<T>*>(rstd.data), xp, w, rows, cols, eps);
        });
    });
}

void rms_norm_backward(const View& dx, const View& dweight, const View& dy, const View& x, const View& weight,
                       const View& rstd, int64_t rows, int64_t cols) {
    if (cols == 0) return;
    dispatch_floating_bf16(x.dtype, [&]<class T>() {
        T *d = static_cast<T*>(dx.data), *dw = static_cast<T*>(dweight.data);
        const T *g = static_cast<const T*>(dy.data), *xp = static_cast<const T*>(x.data);
        const T* w = static_cast<const T*>(weight.data);
        const compute_t<T>* rs = static_cast<const compute_t<T>*>(rstd.data);
        by_pack_width<T>(packable_rows<T>(cols, d, g, xp, w), [&]<int W>() {
            LaunchShape shape = row_launch(rows, cols);
            if (rows > 0 && cols <= kKeptPacks * W * int64_t(shape.block.x)) {
                // Rows kept whole: dw from the same pass, as kFillBlocks blocks' partial rows,
                // which rms_norm_dw_from_blocks adds with a warp per column.
                shape.grid.x = unsigned(std::min<int64_t>(shape.grid.x, kFillBlocks));
                const int64_t blocks = shape.grid.x;
                const size_t bytes = size_t(blocks * cols) * sizeof(double);
                auto* partials = static_cast<double*>(allocate(bytes));
                launch("rms_norm_dx_rows", rms_norm_dx_rows<W, true, T>, shape.grid, shape.block, 0, d, partials, g,
                       xp, w, rs, rows, cols);
                const LaunchShape columns = row_launch(cols, 1);  // a warp per column, eight to a block
                launch("rms_norm_dw_from_blocks", rms_norm_dw_from_blocks<T>, columns.grid, columns.block, 0, dw,
                       static_cast<const double*>(partials), blocks, cols);
                deallocate(partials, bytes);  // one stream: a later kernel that reuses it runs after these two
                return;
            }
            // Longer rows (or none): dx, then dw down the columns, reading dy and x again.
            if (rows > 0)
                launch("rms_norm_dx_rows", rms_norm_dx_rows<W, false, T>, shape.grid, shape.block, 0, d,
                       static_cast<double*>(nullptr), g, xp, w, rs, rows, cols);
            const auto first_pass = [&](const LaunchShape& column_shape, int64_t chunks, double* partials) {
                launch("rms_norm_dw_columns", rms_norm_dw_columns<T>, column_shape.grid, column_shape.block, 0, dw,
                       partials, g, xp, rs, chunks, rows, cols);
            };
            column_reduction<double>(dw, 1, rows, cols, Add{}, first_pass);
        });
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

// routing.cu — the per-row selections of mixture-of-experts routing (and of gather, argmax),
// along the last dim of contiguous (rows, C) tensors with (rows, k) indices.
//
//   gather_last:       out[r, j] = in[r, idx[r, j]]              in (rows, C), idx (rows, k) → out (rows, k)
//   scatter_add_last:  out[r, idx[r, j]] += src[r, j]            out (rows, C), idx, src (rows, k)
//   topk_last:         values[r, :], indices[r, :] = the k largest of in[r, :], largest first,
//                      ties by lower index first (the CPU's order)   in (rows, C) → (rows, k) each
//
// gather_last: one thread per output element, grid-strided.
// scatter_add_last: one thread per row owns that row's outputs and adds its k sources in
// order j = 0, 1, ...: repeated indices add up in the CPU's order, with no atomics (k is small).
// topk_last: one warp per row (C ≤ 1024) or one block of 256 threads per row
// (cuda/row_reduce.h), which selects the k winners one per pass: in pass p each thread finds
// the best of its columns that rank after winner p − 1, then the row group agrees on the best
// value (a max) and, among the columns holding it, on the lowest index (a min). That is
// O(k · C) work per row, the best shape for routing (C experts, k of 1 to 8) and for argmax
// over a vocabulary (k = 1); k = C sorts in O(C²).
// The order is total even with NaN, which ranks above +∞ (as torch.topk does; the CPU's
// comparator leaves NaN unspecified).
//
// bf16 is compared as float and summed in float, rounded once per output; gather copies it.
//
// Indices outside [0, C) are reported with report_index_error (cuda/device_error.h) and the
// element skipped.
#include "cuda/device_error.h"
#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/row_reduce.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;

// in: (rows, C), idx: (rows, k) → out: (rows, k).
template <class T>
__global__ void gather_last_elements(T* out, const T* in, const int64_t* idx, int64_t rows, int64_t k, int64_t C,
                                     DeviceError* error) {
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * k;
         e += int64_t(gridDim.x) * blockDim.x) {
        const int64_t c = idx[e];
        if (c >= 0 && c < C) out[e] = in[(e / k) * C + c];
        else report_index_error(error, kGather, c, e, C);
    }
}

// out: (rows, C) += src: (rows, k) at idx: (rows, k); thread r owns row r.
template <class T>
__global__ void scatter_add_last_rows(T* out, const int64_t* idx, const T* src, int64_t rows, int64_t k, int64_t C,
                                      DeviceError* error) {
    for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x)
        for (int64_t e = r * k; e < (r + 1) * k; ++e) {
            const int64_t c = idx[e];
            if (c < 0 || c >= C) {
                report_index_error(error, kScatterAdd, c, e, C);
                continue;
            }
            // The first position of column c sums all of them, in order, in the compute type,
            // and stores once: bf16 is rounded once, f32 and f64 add exactly as `+=` would.
            bool first = true;
            for (int64_t before = r * k; before < e && first; ++before) first = idx[before] != c;
            if (!first) continue;
            compute_t<T> sum = out[r * C + c];
            for (int64_t same = e; same < (r + 1) * k; ++same)
                if (idx[same] == c) sum += compute_t<T>(src[same]);
            out[r * C + c] = T(sum);
        }
}

// Whether (a, i) comes before (b, j) in topk's order: larger first, NaN above everything,
// equal values by lower index.
template <class T>
__device__ bool ranks_before(T a, int64_t i, T b, int64_t j) {
    if (is_nan(a) || is_nan(b)) return is_nan(a) && (!is_nan(b) || i < j);
    return a > b || (a == b && i < j);
}

// The larger of two values in topk's order, indices aside: NaN above everything.
struct Best {
    template <class T>
    __device__ T operator()(T a, T b) const { return is_nan(a) ? a : is_nan(b) || b > a ? b : a; }
};
struct Smaller {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return b < a ? b : a; }
};

// in: (rows, C) → values, indices: (rows, k).
template <class T>
__global__ void topk_rows(T* values, int64_t* indices, const T* in, int64_t rows, int64_t C, int64_t k) {
    constexpr int64_t kNone = kHighest<int64_t>;  // no column: loses every min
    for (int64_t r = first_row(); r < rows; r += row_step()) {
        const T* xr = in + r * C;  // (C)
        using Value = compute_t<T>;  // bf16 compares as float
        Value last_value = Value(0);
        int64_t last = -1;  // winner of the previous pass; none before the first
        for (int64_t p = 0; p < k; ++p) {
            Value mine = kLowest<Value>;
            int64_t mine_at = kNone;
            for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
                const Value x = xr[c];
                if ((last < 0 || ranks_before(last_value, last, x, c)) &&
                    (mine_at == kNone || ranks_before(x, c, mine, mine_at))) {
                    mine = x;
                    mine_at = c;
                }
            }
            const Value best = row_reduce(mine, Best{});
            const bool holds_best = mine_at != kNone && (mine == best || (is_nan(mine) && is_nan(best)));
            last = row_reduce(holds_best ? mine_at : kNone, Smaller{});
            last_value = best;
            if (threadIdx.x == 0) {
                values[r * k + p] = xr[last];  // the winner's own value: -0.0 and 0.0 compare equal
                indices[r * k + p] = last;
            }
        }
    }
}


}  // namespace

void gather_last(const View& out, const View& in, const View& idx) {
    const int64_t rows = out.shape[0], k = out.shape[1], C = in.shape[1];
    if (rows * k == 0) return;
    dispatch_any(out.dtype, [&]<class T>() {
        launch("gather_last_elements", gather_last_elements<T>, grid_covering(rows * k, kThreads), dim3(kThreads), 0,
               static_cast<T*>(out.data), static_cast<const T*>(in.data), static_cast<const int64_t*>(idx.data), rows,
               k, C, device_error());
    });
}

void scatter_add_last(const View& out, const View& idx, const View& src) {
    const int64_t rows = src.shape[0], k = src.shape[1], C = out.shape[1];
    if (rows * k == 0) return;
    dispatch_any(out.dtype, [&]<class T>() {
        launch("scatter_add_last_rows", scatter_add_last_rows<T>, grid_covering(rows, kThreads), dim3(kThreads), 0,
               static_cast<T*>(out.data), static_cast<const int64_t*>(idx.data), static_cast<const T*>(src.data), rows,
               k, C, device_error());
    });
}

void topk_last(const View& values, const View& indices, const View& in, int64_t k) {
    const int64_t rows = in.shape[0], C = in.shape[1];
    if (rows * k == 0) return;
    const LaunchShape shape = row_launch(rows, C);
    dispatch_any(in.dtype, [&]<class T>() {
        launch("topk_rows", topk_rows<T>, shape.grid, shape.block, 0, static_cast<T*>(values.data),
               static_cast<int64_t*>(indices.data), static_cast<const T*>(in.data), rows, C, k);
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

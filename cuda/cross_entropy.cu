// cross_entropy.cu — the fused log-softmax + negative log-likelihood of contiguous logits
// (N, V) against int64 targets (N), and its gradient.
//
//   loss_i     = log Σ_c exp(x_ic) − x_{i,t_i}  = m_i + log z_i − x_{i,t_i},   0 where t_i == ignore_index
//   dlogits_ic = (softmax(x_i)_c − [c == t_i]) · s_i,   0 for the whole row where s_i == 0
//
// One warp per row (V ≤ 1024) or one block of 256 threads per row (cuda/row_reduce.h), as
// softmax.cu: the row group finds m_i and z_i in one online pass (row_max_sum_exp: in float
// with expf for f32 and bf16 logits, in double for f64), then writes the loss (its first
// thread) or every column of the gradient row (each thread its columns, multiplying by
// s_i / z_i, computed once per row).
// Rows are read and written in 16-byte packs when V is a multiple of the pack width and the
// matrices are aligned (cuda/packs.h; W below). bf16 logits are read as float, the statistics
// are float, and the loss and each gradient element are rounded to bf16 once.
//
// A target outside [0, V) (and not ignore_index) is reported with report_index_error and its
// row is left unwritten, where the CPU throws before computing: never a read out of bounds.
// The backward checks only rows that count (s_i ≠ 0), since ignored rows carry ignore_index.
#include "cuda/device_error.h"
#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/row_reduce.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

// Whether row i's target t is a column of the row; reports it (once per row) when not.
__device__ bool target_in_range(int64_t t, int64_t i, int64_t V, DeviceError* error) {
    if (t >= 0 && t < V) return true;
    if (threadIdx.x == 0) report_index_error(error, kCrossEntropy, t, i, V);
    return false;
}

// logits: (N, V), targets: (N) → loss: (N).
template <int W, class T>
__global__ void cross_entropy_rows(T* loss, const T* logits, const int64_t* targets, int64_t N, int64_t V,
                                   int64_t ignore_index, DeviceError* error) {
    for (int64_t i = first_row(); i < N; i += row_step()) {
        const int64_t t = targets[i];
        if (t == ignore_index) {
            if (threadIdx.x == 0) loss[i] = T(0);
            continue;
        }
        if (!target_in_range(t, i, V, error)) continue;
        const T* xr = logits + i * V;  // (V)
        const MaxSumExp<T> s = row_max_sum_exp<W>(xr, V);
        if (threadIdx.x == 0) loss[i] = T((s.max - compute_t<T>(xr[t])) + row_log(s.sum));  // logsumexp − target logit
    }
}

// logits, dlogits: (N, V); targets, row_scale: (N).
template <int W, class T>
__global__ void cross_entropy_backward_rows(T* dlogits, const T* logits, const int64_t* targets, const T* row_scale,
                                            int64_t N, int64_t V, DeviceError* error) {
    for (int64_t i = first_row(); i < N; i += row_step()) {
        T* dr = dlogits + i * V;  // (V)
        const T s = row_scale[i];
        if (s == T(0)) {  // an ignored row
            row_map<W>(V, [](int64_t) { return T(0); }, dr);
            continue;
        }
        const int64_t t = targets[i];
        if (!target_in_range(t, i, V, error)) continue;
        const T* xr = logits + i * V;  // (V)
        using C = compute_t<T>;
        const MaxSumExp<T> sums = row_max_sum_exp<W>(xr, V);
        const C scale = C(s) / sums.sum;  // s_i / z_i
        row_map<W>(
            V,
            [&](int64_t c, T x) {
                T d = T(row_exp(C(x) - sums.max) * scale);
                if (c == t) d = T(d - s);  // the one-hot, subtracted after rounding as the CPU does
                return d;
            },
            dr, xr);
    }
}

}  // namespace

void cross_entropy(const View& loss, const View& logits, const View& targets, int64_t ignore_index) {
    check_logits_and_targets("cross_entropy", logits, targets);
    const int64_t N = logits.shape[0], V = logits.shape[1];
    if (N == 0) return;
    const LaunchShape shape = row_launch(N, V);
    dispatch_floating_bf16(logits.dtype, [&]<class T>() {
        const T* x = static_cast<const T*>(logits.data);
        by_pack_width<T>(packable_rows<T>(V, x), [&]<int W>() {
            launch("cross_entropy_rows", cross_entropy_rows<W, T>, shape.grid, shape.block, 0,
                   static_cast<T*>(loss.data), x, static_cast<const int64_t*>(targets.data), N, V, ignore_index,
                   device_error());
        });
    });
}

void cross_entropy_backward(const View& dlogits, const View& logits, const View& targets, const View& row_scale) {
    check_logits_and_targets("cross_entropy_backward", logits, targets);
    const int64_t N = logits.shape[0], V = logits.shape[1];
    if (N * V == 0) return;
    const LaunchShape shape = row_launch(N, V);
    dispatch_floating_bf16(logits.dtype, [&]<class T>() {
        T* d = static_cast<T*>(dlogits.data);
        const T* x = static_cast<const T*>(logits.data);
        by_pack_width<T>(packable_rows<T>(V, d, x), [&]<int W>() {
            launch("cross_entropy_backward_rows", cross_entropy_backward_rows<W, T>, shape.grid, shape.block, 0, d, x,
                   static_cast<const int64_t*>(targets.data), static_cast<const T*>(row_scale.data), N, V,
                   device_error());
        });
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

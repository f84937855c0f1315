// cross_entropy.cu — the fused log-softmax + negative log-likelihood of contiguous logits
// (N, V) against int64 targets (N), and, in the same pass, its gradient (llm.c's fused
// classifier: the loss is the logits' only consumer, so the forward pass that has each row
// in hand writes the row's gradient too, and backward never reads the logits again).
//
//   loss_i     = log Σ_c exp(x_ic) − x_{i,t_i}  = m_i + log z_i − x_{i,t_i},   0 where t_i == ignore_index
//   dlogits_ic = (softmax(x_i)_c − [c == t_i]) · s_i,   the whole row 0 where t_i == ignore_index
//
// One warp per row (V ≤ 1024) or one block of 256 threads per row (cuda/row_reduce.h), as
// softmax.cu: the row group finds m_i and z_i in one online pass over the row
// (row_max_sum_exp: in float with expf for f32 and bf16 logits, in double for f64), its
// first thread writes the loss, and, when dlogits is asked for, each thread writes its
// columns of the gradient row, multiplying exp(x − m) by s_i / z_i (computed once per row).
// Each thread keeps its first 8 packs of the row in registers from the first sweep to the
// second (for_row_packs in cuda/row_reduce.h), so rows of up to 1024 f32 columns on a warp,
// 8192 on a block, are read from memory once: all but one column of the byte-level
// vocabulary (257 columns, one a load: 8 · 32 kept), the first 8192 of a 50 000-word one. Against the loss and a
// separate backward (which read each row twice more), a training step moves two passes over
// the (N, V) logits fewer, or one for the columns past those kept, and launches one kernel
// fewer. This has not been measured on a GPU yet.
// Rows are read and written in 16-byte packs when V is a multiple of the pack width and the
// matrices are aligned (cuda/packs.h; W below). bf16 logits are read as float, the statistics
// are float, and the loss and each gradient element are rounded to bf16 once.
//
// A target outside [0, V) (and not ignore_index) is reported with report_index_error and its
// row is left unwritten, where the CPU throws before computing: never a read out of bounds.
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

// logits: (N, V), targets: (N) → loss: (N); with dlogits (not null) and row_scale (N) also
// dlogits: (N, V).
template <int W, class T>
__global__ void cross_entropy_rows(T* loss, T* dlogits, const T* logits, const int64_t* targets, const T* row_scale,
                                   int64_t N, int64_t V, int64_t ignore_index, DeviceError* error) {
    using C = compute_t<T>;
    for (int64_t i = first_row(); i < N; i += row_step()) {
        T* dr = dlogits ? dlogits + i * V : nullptr;  // (V), when the gradient is asked for
        const int64_t t = targets[i];
        if (t == ignore_index) {
            if (threadIdx.x == 0) loss[i] = T(0);
            if (dr) row_map<W>(V, [](int64_t) { return T(0); }, dr);
            continue;
        }
        if (!target_in_range(t, i, V, error)) continue;
        const T* xr = logits + i * V;     // (V)
        Pack<T, W> kept[kKeptPacks];       // this thread's first packs of the row
        const MaxSumExp<T> sums =
            row_max_sum_exp<W, kKeptPacks>(xr, V, [&]<int k>(const Pack<T, W>& x) { kept[k] = x; });
        if (threadIdx.x == 0) loss[i] = T((sums.max - C(xr[t])) + row_log(sums.sum));  // logsumexp − target logit
        if (!dr) continue;
        const T s = row_scale[i];
        const C scale = C(s) / sums.sum;  // s_i / z_i
        for_row_packs<kKeptPacks, W>(V, [&]<int k>(int64_t c) {
            Pack<T, W> x, d;
            if constexpr (k < kKeptPacks) x = kept[k];
            else x = load_pack<W>(xr + c);  // a row too long to keep whole
            GG_UNROLL
            for (int j = 0; j < W; ++j) {
                d.at[j] = T(row_exp(C(x.at[j]) - sums.max) * scale);
                if (c + j == t) d.at[j] = T(d.at[j] - s);  // the one-hot, subtracted after rounding as the CPU does
            }
            store_pack<W>(dr + c, d);
        });
    }
}

}  // namespace

void cross_entropy(const View& loss, const View& dlogits, const View& logits, const View& targets,
                   const View& row_scale, int64_t ignore_index) {
    check_logits_and_targets("cross_entropy", logits, targets);
    const int64_t N = logits.shape[0], V = logits.shape[1];
    if (N == 0) return;
    const LaunchShape shape = row_launch(N, V);
    dispatch_floating_bf16(logits.dtype, [&]<class T>() {
        T* d = static_cast<T*>(dlogits.data);  // null: the loss alone
        const T* x = static_cast<const T*>(logits.data);
        by_pack_width<T>(packable_rows<T>(V, d, x), [&]<int W>() {
            launch("cross_entropy_rows", cross_entropy_rows<W, T>, shape.grid, shape.block, 0,
                   static_cast<T*>(loss.data), d, x, static_cast<const int64_t*>(targets.data),
                   static_cast<const T*>(row_scale.data), N, V, ignore_index, device_error());
        });
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

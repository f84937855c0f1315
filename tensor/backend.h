// backend.h — the table of primitive kernels that every device implements.
//
// Ops (autograd/ops_*.cpp) never branch on the device: they describe their operands
// as `View`s and call backend(device).<kernel>. The CPU table lives in
// cpu/backend.cpp; the CUDA table (cuda/) fills in the same struct.
#pragma once
#include <span>
#include <string>

#include "tensor/dtype.h"
#include "tensor/score_functions.h"

namespace gg {

// Tensors have at most this many dims: enough for (B, H, T, T) and its broadcasts.
constexpr int kMaxDims = 8;

// A strided window on device memory, as kernels see it: `data` already points at element
// [0,...,0]. Fixed rank and trivially copyable, so a CUDA kernel takes it by value.
struct View {
    void* data = nullptr;
    DType dtype = DType::f32;
    int ndim = 0;
    int64_t shape[kMaxDims] = {};
    int64_t strides[kMaxDims] = {};  // in elements

    constexpr int64_t numel() const {
        int64_t n = 1;
        for (int d = 0; d < ndim; ++d) n *= shape[d];
        return n;
    }
};

// A View of `shape` and `strides` (the same length); throws past kMaxDims dims.
View make_view(void* data, DType dtype, const Shape& shape, const Strides& strides);
// The same memory seen as a contiguous (rows, cols) matrix.
View matrix_view(const View& v, int64_t rows, int64_t cols);
// What cross_entropy and its backward read their sizes from: logits (N, V) and int64 targets
// (N). Throws std::invalid_argument naming both shapes otherwise, before any kernel reads
// rows that are not there.
void check_logits_and_targets(const char* op, const View& logits, const View& targets);
// What scale_list reads its tensors as: each a contiguous f32, f64 or bf16 block of numel()
// elements. Throws std::invalid_argument naming the op and the offending tensor's index,
// dtype, shape and strides otherwise.
void check_contiguous_floats(const char* op, std::span<const View> xs);

enum class UnaryOp { neg, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu, gelu, erf, abs, pow };
enum class BinaryOp { add, sub, mul, div, maximum, minimum, eq, ne, lt, le, gt, ge };
enum class ReduceOp { sum, max, min };

// Geometry of one attention call. Q is (B, H, Tq, D); K and V are (B, Hkv, Tk, D) with
// H a multiple of Hkv (grouped-query attention: query head h reads kv head h / (H/Hkv)).
// Query i sits at absolute position Tk − Tq + i, so a KV cache of earlier keys just
// makes Tk longer. causal: key j is visible when j ≤ pos(i); window > 0 also needs
// pos(i) − j < window (sliding-window attention). score_fn: how a row of scores becomes
// weights (tensor/score_functions.h).
struct AttentionShape {
    int64_t B, H, Hkv, Tq, Tk, D;
    bool causal;
    int64_t window;
    double scale;
    bool exclude_self = false;  // query t sees keys < t (the query at key 0 still sees key 0)
    ScoreFunction score_fn = ScoreFunction::softmax;
};

// One AdamW step for parameters of step count t, the scalars computed on the host in double:
//   p *= 1 − lr·λ;  m = β1 m + (1 − β1) g;  v = β2 v + (1 − β2) g²;
//   p −= (lr / bc1) · m / (√v / √bc2 + ε),  bc1 = 1 − β1ᵗ, bc2 = 1 − β2ᵗ.
struct AdamWStep {
    double lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2;
};
// One parameter of an AdamW step over a list: its step's scalars (each parameter counts its
// own steps) and four contiguous tensors of one shape and dtype, updated in place.
struct AdamWTensors {
    AdamWStep step;
    View param, grad, exp_avg, exp_avg_sq;
};
// One SGD step: d = g + λ p;  buf = μ buf + d (when μ ≠ 0, else buf is d);  p −= lr · buf.
struct SGDStep {
    double lr, momentum, weight_decay;
};

struct Backend {
    const char* name;

    // Memory. Copies to and from the host are complete when they return; kernels may run
    // asynchronously, and synchronize() waits for all of them (a no-op on the CPU).
    void* (*allocate)(size_t nbytes);
    void (*deallocate)(void* ptr, size_t nbytes);
    void (*to_host)(void* host_dst, const void* device_src, size_t nbytes);
    void (*from_host)(void* device_dst, const void* host_src, size_t nbytes);
    void (*synchronize)();

    // Element-wise. `out` is contiguous; inputs are already broadcast (expanded) to
    // out.shape, so a broadcast dim simply has stride 0.
    void (*fill)(const View& out, double value);
    void (*arange)(const View& out, double start, double step);
    void (*copy)(const View& out, const View& in);  // any strides on both sides, converts dtype
    void (*unary)(UnaryOp op, const View& out, const View& in, double exponent);
    void (*binary)(BinaryOp op, const View& out, const View& a, const View& b);
    void (*where)(const View& out, const View& cond, const View& a, const View& b);

    // Reductions of a contiguous (outer, R, inner) block over R into (outer, inner).
    void (*reduce)(ReduceOp op, const View& out, const View& in, int64_t outer, int64_t R, int64_t inner);

    // Row-wise softmax of a contiguous (rows, cols) matrix; log selects log_softmax.
    void (*softmax)(const View& out, const View& in, int64_t rows, int64_t cols, bool log);
    // dx from y = softmax(x) (or log_softmax) and dy.
    void (*softmax_backward)(const View& dx, const View& y, const View& dy, int64_t rows, int64_t cols, bool log);

    // C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] for b < batch; row-major, op = transpose
    // when the flag is set. Matrices of batch b start at base + b * batch_stride.
    void (*gemm)(DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                 double alpha, const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb,
                 int64_t stride_b, double beta, void* C, int64_t ldc, int64_t stride_c);

    // Row gather/scatter for embeddings: out[i, :] = table[idx[i], :]; table[idx[i], :] += src[i, :].
    void (*index_select_rows)(const View& out, const View& table, const View& idx);
    void (*index_add_rows)(const View& table, const View& idx, const View& src);

    // Along the last dim of contiguous (rows, C) tensors with (rows, k) indices.
    void (*gather_last)(const View& out, const View& in, const View& idx);
    void (*scatter_add_last)(const View& out, const View& idx, const View& src);
    void (*topk_last)(const View& values, const View& indices, const View& in, int64_t k);

    // Fused cross-entropy over contiguous logits (N, V) and int64 targets (N):
    //   loss[i] = logsumexp(logits[i]) − logits[i, t_i],   0 where t_i == ignore_index;
    // and, when dlogits.data is not null, the gradient of Σ_i row_scale[i] · loss[i] (N, V) in
    // the same pass over each row, so that no backward pass reads the logits again:
    //   dlogits[i] = (softmax(logits[i]) − onehot(t_i)) · row_scale[i],   0 where t_i == ignore_index.
    void (*cross_entropy)(const View& loss, const View& dlogits, const View& logits, const View& targets,
                          const View& row_scale, int64_t ignore_index);

    // Fused attention: O = W V with W the weights of the scores Q Kᵀ · scale under the mask, by
    // s.score_fn (softmax(Q Kᵀ · scale + mask) by default), and the row statistic lse (B, H, Tq)
    // that backward recomputes them from: for softmax, softmax1 and sink the log-sum-exp of the
    // row, the slot's e^c included; for softpick the log of its denominator; for sigmoid the
    // bias b_i (tensor/score_functions.h). Q, K, V, O, dO, dQ, dK, dV may have any strides whose
    // last is 1 and whose row stride (dim 2) is at least D: the heads split from a (B, T, heads·D)
    // projection are read and written where they lie. lse is contiguous, and so is probs
    // (B, H, Tq, Tk), the weights W, filled only when its data pointer is not null. sink (H)
    // holds each query head's slot logit b_h for ScoreFunction::sink, in lse's dtype, and is
    // read for nothing else.
    void (*attention_forward)(const AttentionShape& s, const View& O, const View& lse, const View& probs,
                              const View& Q, const View& K, const View& V, const View& sink);
    // When probs' data pointer is not null it holds forward's weights, and backward may read them
    // instead of recomputing Q Kᵀ and the weights from lse (not for softpick, whose gradient needs
    // the scores' signs). The slot logit's own gradient, −Σ_i p_slot,i δ_i, is the caller's to
    // take from lse and δ = dO · O (nn/attention.cpp).
    void (*attention_backward)(const AttentionShape& s, const View& dQ, const View& dK, const View& dV,
                               const View& dO, const View& Q, const View& K, const View& V, const View& O,
                               const View& lse, const View& probs);
    // The most bytes of probabilities (B, H, Tq, Tk) a training forward should keep for
    // backward: short sequences then skip backward's recomputation. 0 where backward always
    // recomputes them (the GPU, whose tiles are recomputed in shared memory for less than
    // reading them back from device memory would cost).
    int64_t attention_keep_bytes;

    // RMSNorm over the rows of contiguous (rows, cols) x with weight w (cols):
    //   rstd_r = 1 / √(mean_c x_rc² + eps),  y_rc = x_rc · rstd_r · w_c;  rstd (rows) is kept,
    // in f32 when x is bf16 (it is a sum's result, as autocast keeps sums in f32).
    void (*rms_norm_forward)(const View& y, const View& rstd, const View& x, const View& weight, int64_t rows,
                             int64_t cols, double eps);
    //   dx_rc = rstd_r (w_c dy_rc − x_rc rstd_r² · mean_c(w_c dy_rc x_rc)),  dw_c = Σ_r dy_rc x_rc rstd_r
    // dweight is written (not added to), summed over rows in a fixed order: the result does
    // not depend on how the work is split.
    void (*rms_norm_backward)(const View& dx, const View& dweight, const View& dy, const View& x, const View& weight,
                              const View& rstd, int64_t rows, int64_t cols);

    // SwiGLU's gating product (nn/layers.h), one pass each way instead of a silu and a product,
    // each with its own backward. Every operand is (rows, C) with contiguous channels, and its
    // rows may lie apart: a, b and da, db can be the halves of one (rows, 2C) product and its
    // gradient:
    //   y = silu(a) · b = a σ(a) b;   da = dy · b · σ(a) (1 + a (1 − σ(a))),   db = dy · a σ(a)
    void (*swiglu_forward)(const View& y, const View& a, const View& b);
    void (*swiglu_backward)(const View& da, const View& db, const View& dy, const View& a, const View& b);

    // The G1 gate (nn/attention.h), one pass each way instead of a sigmoid and a product, each
    // with its own backward; its operands laid out as SwiGLU's:
    //   y = σ(s) · a;   ds = dy · a · σ(s) (1 − σ(s)),   da = dy · σ(s)
    void (*sigmoid_gate_forward)(const View& y, const View& s, const View& a);
    void (*sigmoid_gate_backward)(const View& ds, const View& da, const View& dy, const View& s, const View& a);

    // RoPE (nn/rope.h) of x (B, H, T, D), any strides, into out (B, H, T, D) with contiguous
    // channels, with the (T, D) tables cos and sin (their columns c and c + D/2 equal): each
    // channel pair rotates,
    //   out_c = x_c cos_c − x_{c+D/2} sin_c,   out_{c+D/2} = x_{c+D/2} cos_c + x_c sin_c   (c < D/2).
    // transpose rotates the other way (sin → −sin): the transposed map, which is backward.
    void (*rope)(const View& out, const View& x, const View& cos, const View& sin, bool transpose);

    // Optimiser updates, in place (nn/optim/optimizer.h). AdamW takes every parameter of a
    // step at once (on CUDA one launch for the whole list, not one per parameter):
    void (*adamw_step)(std::span<const AdamWTensors> params);
    // SGD, one contiguous parameter; momentum_buffer.data is null when s.momentum == 0.
    void (*sgd_step)(const SGDStep& s, const View& param, const View& grad, const View& momentum_buffer);
    // acc (a float64 scalar on this device) += Σ x² over every element of the contiguous
    // tensors xs, summed in float64 in a fixed order (the same bits on every run): the
    // gradient norm of a whole model in one call, with one read back to the host at the end.
    void (*sum_squares)(const View& acc, std::span<const View> xs);
    // x *= factor, in place, for every tensor of xs (f32, f64 or bf16, each contiguous; bf16
    // multiplied in float and rounded once): gradient clipping scales a whole model's gradients
    // in one call (on CUDA one launch for the list, not two per gradient).
    void (*scale_list)(double factor, std::span<const View> xs);
};

// The table for a device: the CPU's is built in, any other comes from the provider its own
// folder registered (below). Without a table this throws the provider's one-line reason
// (for CUDA, "no CUDA device: <why>; ...").
const Backend& backend(Device device);
// Whether backend(device) has a table: always for the CPU.
bool device_available(Device device);

// How a device's folder tells this layer that it exists, so that tensor/ never names its
// devices: `table` picks the device's table on first use (null when the device is missing)
// and `why_missing` then says why, in one line. The CUDA folder registers Device::CUDA's
// (cuda/cuda.h); a second call for the same device replaces the first.
void register_backend_provider(Device device, const Backend* (*table)(), std::string (*why_missing)());

// Serves `device` with `table` from now on, over what its provider would choose; a null
// table hands the device back to the provider.
void register_backend(Device device, const Backend* table);

}  // namespace gg

// linalg.cpp — matmul, as torch.matmul: 1-d and n-d operands, broadcast batch dims; and
// add_linear, a Linear layer whose output lands on a residual stream.
//
// Forward and both gradients are GEMMs through the backend (OpenBLAS on the CPU):
//   Y = A B   ⇒   dA = dY Bᵀ,   dB = Aᵀ dY   (summed over broadcast batch dims).
// A transposed view is handed to GEMM as a flag instead of being copied.
#include <stdexcept>
#include <string>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"

namespace gg {

namespace {

// One side of a batched GEMM: where its matrices start, their leading dimension,
// whether they are stored transposed, and the distance between batches.
struct GemmOperand {
    Tensor storage_owner;
    const void* data;
    bool trans;
    int64_t ld;
    int64_t batch_stride;
};

// Describes `t` broadcast to batch + (rows, cols) for GEMM; copies only when its strides
// fit neither a row-major nor a transposed matrix, or its batches are not evenly spaced.
GemmOperand gemm_operand(const Tensor& t, const Shape& batch) {
    Shape full = batch;
    full.push_back(t.size(-2));
    full.push_back(t.size(-1));
    Tensor v = t.detach().expand(full);
    for (int attempt = 0;; ++attempt) {
        const int64_t nd = v.dim(), rows = v.size(-2), cols = v.size(-1);
        // Strides of size-1 dims are arbitrary; pick ones GEMM accepts.
        const int64_t sr = rows == 1 ? std::max<int64_t>(cols, 1) : v.strides()[nd - 2];
        const int64_t sc = cols == 1 ? 1 : v.strides()[nd - 1];
        bool ok = true, trans = false;
        int64_t ld = 0;
        if (sc == 1 && sr >= std::max<int64_t>(cols, 1)) ld = sr;
        else if (sr == 1 && sc >= std::max<int64_t>(rows, 1)) trans = true, ld = sc;
        else ok = false;
        // Batch dims must collapse to one stride (or all be broadcast, stride 0).
        int64_t batch_stride = 0, expected = -1;
        for (int64_t d = nd - 3; d >= 0 && ok; --d) {
            if (v.shape()[d] == 1) continue;
            const int64_t s = v.strides()[d];
            if (expected < 0) batch_stride = s;
            else if (s != expected) ok = false;
            expected = s * v.shape()[d];
        }
        if (ok) return {v, v.view_desc().data, trans, ld, batch_stride};
        if (attempt > 0) throw std::logic_error("matmul: could not lay out operand " + shape_str(t.shape()));
        v = v.contiguous();
    }
}

// (..., M, K) @ (..., K, N) → (broadcast batch..., M, N); no autograd.
Tensor gemm_forward(const Tensor& a, const Tensor& b) {
    const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
    const Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                         Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
    Shape out_shape = batch;
    out_shape.push_back(M);
    out_shape.push_back(N);
    // An empty operand: nothing for GEMM to lay out. With K = 0 every entry is an empty sum,
    // 0, as in torch; with M, N or a batch dim 0 there are no entries.
    if (K == 0 || shape_numel(out_shape) == 0) return zeros(out_shape, a.dtype(), a.device());
    Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
    const int64_t nb = shape_numel(batch);
    const Backend& be = backend(a.device());
    if (b.dim() == 2 && a.dim() > 2 && a.is_contiguous()) {
        // (B, T, K) @ (K, N): one tall GEMM of B·T rows beats B small ones.
        const GemmOperand B = gemm_operand(b, {});
        be.gemm(a.dtype(), 1, false, B.trans, nb * M, N, K, 1, a.view_desc().data, K, 0, B.data, B.ld, 0, 0,
                out.view_desc().data, N, 0);
        return out;
    }
    const GemmOperand A = gemm_operand(a, batch), B = gemm_operand(b, batch);
    be.gemm(a.dtype(), nb, A.trans, B.trans, M, N, K, 1, A.data, A.ld, A.batch_stride, B.data, B.ld,
            B.batch_stride, 0, out.view_desc().data, N, M * N);
    return out;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
    const Tensor a = autocast_lower(a_in), b = autocast_lower(b_in);
    check_defined(a, "matmul");
    check_defined(b, "matmul");
    const std::string shapes = shape_str(a.shape()) + " @ " + shape_str(b.shape());
    if (a.dim() == 0 || b.dim() == 0) throw std::invalid_argument("matmul: " + shapes + ": scalars cannot be multiplied");
    if (a.device() != b.device())
        throw std::invalid_argument("matmul: " + shapes + ": device mismatch, " + device_name(a.device()) + " vs " +
                                    device_name(b.device()));
    if (a.dtype() != b.dtype())
        throw std::invalid_argument("matmul: " + shapes + ": dtype mismatch, " + dtype_name(a.dtype()) + " vs " +
                                    dtype_name(b.dtype()));
    if (!is_floating(a.dtype())) throw std::invalid_argument("matmul: " + shapes + ": needs floating tensors");
    const int64_t inner_b = b.dim() == 1 ? b.size(0) : b.size(-2);
    if (a.size(-1) != inner_b)
        throw std::invalid_argument("matmul: " + shapes + ": inner dims " + std::to_string(a.size(-1)) + " and " +
                                    std::to_string(inner_b) + " differ");
    // Vectors become matrices (a column on the right, a row on the left) and back; the
    // column goes first so that 1-d · 1-d squeezes (1, 1) → (1) → ().
    if (b.dim() == 1) return matmul(a, b.unsqueeze(1)).squeeze(-1);
    if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
    return record("matmul", gemm_forward(a, b), {a, b}, [a, b](const Tensor& g) {
        const Tensor da = sum_to(gemm_forward(g, b.transpose(-1, -2)), a.shape());
        if (b.dim() == 2 && a.dim() > 2) {
            // A shared weight: dB = Σ_batch Aᵀ dY as one GEMM over all B·T rows. When b is a
            // transposed view (a Linear's Wᵀ), dB is made as (dYᵀ A)ᵀ instead, the same GEMM with
            // its result in W's layout: W's gradient then arrives contiguous, with no copy to make it so.
            const int64_t rows = shape_numel(Shape(a.shape().begin(), a.shape().end() - 1));  // not -1: K may be 0
            const Tensor rows_a = a.reshape({rows, a.size(-1)}), rows_g = g.reshape({rows, g.size(-1)});
            const bool transposed_b = b.strides()[0] == 1 && b.size(1) > 1;
            return std::vector<Tensor>{da, transposed_b ? gemm_forward(rows_g.t(), rows_a).t()
                                                        : gemm_forward(rows_a.t(), rows_g)};
        }
        return std::vector<Tensor>{da, sum_to(gemm_forward(a.transpose(-1, -2), g), b.shape())};
    }, {a, b});
}

Tensor add_linear(const Tensor& residual, const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
    const Tensor x = autocast_lower(x_in), weight = autocast_lower(weight_in);
    const Tensor bias = bias_in.defined() ? autocast_lower(bias_in) : Tensor();
    check_defined(residual, "add_linear");
    check_defined(x, "add_linear");
    check_defined(weight, "add_linear");
    const int64_t N = weight.dim() == 2 ? weight.size(0) : -1, K = weight.dim() == 2 ? weight.size(1) : -1;
    Shape out_shape = x.shape();
    if (!out_shape.empty()) out_shape.back() = N;
    const bool mixed = residual.dtype() != x.dtype();  // under autocast: a bfloat16 product, a float32 stream
    bool ok = x.dim() >= 1 && x.size(-1) == K && residual.shape() == out_shape && is_floating(x.dtype()) &&
              weight.dtype() == x.dtype() && is_floating(residual.dtype()) && weight.device() == x.device() &&
              residual.device() == x.device();
    if (bias.defined()) ok = ok && bias.shape() == Shape{N} && bias.dtype() == x.dtype() && bias.device() == x.device();
    if (!ok)
        throw std::invalid_argument("add_linear: residual " + describe(residual) + ", x " + describe(x) + ", weight " +
                                    describe(weight) + (bias.defined() ? ", bias " + describe(bias) : "") +
                                    ": need x (..., K), weight (N, K), bias (N) and residual (..., N), floating, "
                                    "of one dtype and device");
    // The GEMM writes one dtype; a residual of another takes the product through add's promote rule.
    if (mixed) return residual + (bias.defined() ? matmul(x, weight.t()) + bias : matmul(x, weight.t()));
    const int64_t M = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));  // the rows of x
    const Tensor rows_x = x.detach().reshape({M, K});  // (M, K)
    // y (M, N) starts as residual (+ bias), and GEMM adds x Wᵀ to it (β = 1).
    const Tensor start = residual.detach().reshape({M, N});
    Tensor y = bias.defined() ? start + bias.detach() : start.clone();
    if (M > 0 && N > 0 && K > 0) {
        const GemmOperand A = gemm_operand(rows_x, {}), W = gemm_operand(weight.detach().t(), {});
        backend(x.device()).gemm(x.dtype(), 1, A.trans, W.trans, M, N, K, 1, A.data, A.ld, 0, W.data, W.ld, 0, 1,
                                 y.view_desc().data, N, 0);
    }
    return record("add_linear", y.view(out_shape), {residual, x, weight, bias}, [=](const Tensor& g) {
        const Tensor rows_g = g.reshape({M, N});  // (M, N)
        // dx = dY W (M, K);  dW = dYᵀ x (N, K), in W's own layout;  db = Σ_rows dY (N).
        const Tensor dx = gemm_forward(rows_g, weight.detach()).view(x.shape());
        const Tensor dw = gemm_forward(rows_g.t(), rows_x);
        return std::vector<Tensor>{g, dx, dw, bias.defined() ? sum(rows_g, {0}) : Tensor()};
    }, {rows_x, weight});
}

}  // namespace gg

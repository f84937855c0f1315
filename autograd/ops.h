// ops.h — the op front-end: every op a model can use, each differentiable where the
// maths is. Forward passes call the device's backend table; each op's backward is next
// to its forward in autograd/ (elementwise.cpp, reduce.cpp, linalg.cpp, nn_ops.cpp,
// shape_ops.cpp), written with these same ops.
//
// Operands must share a dtype and a device: a mismatch is an error, never a silent
// conversion or copy. Shapes broadcast as in NumPy.
#pragma once
#include <utility>
#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace gg {

// --- element-wise, broadcasting (autograd/elementwise.cpp) ---
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Comparisons give 0/1 in the operands' dtype and carry no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor silu(const Tensor& x);  // x σ(x)
Tensor gelu(const Tensor& x);  // x Φ(x), the exact (erf) form
Tensor erf(const Tensor& x);
Tensor abs(const Tensor& x);
// log(1 + eˣ), as max(x, 0) + log(1 + e^(−|x|)): no overflow for large x. Its derivative is
// σ(x), exactly, at 0 too (where relu's and abs's one-sided derivatives would give 0).
Tensor softplus(const Tensor& x);

// where(cond, a, b): a where cond != 0, else b (cond broadcasts too).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// Sums a broadcast gradient back down to `shape` (the adjoint of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// --- reductions (autograd/reduce.cpp); empty dims = all dims ---
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Values and int64 indices of the maximum along one dim (first index on ties).
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);

// --- linear algebra (autograd/linalg.cpp) ---
// 1-d·1-d, matrix @ matrix, and batched with broadcast batch dims, as torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);
// residual + x Wᵀ (+ bias): a Linear layer whose output lands on a residual stream, with the
// sum folded into the GEMM (it accumulates onto a copy of residual) instead of a pass of its
// own. x (..., K), weight (N, K), bias (N) or undefined, residual (..., N).
Tensor add_linear(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// --- neural-network ops (autograd/nn_ops.cpp) ---
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// log Σ exp(x) along dim, as m + log Σ exp(x − m) with m the row's max (no overflow).
Tensor logsumexp(const Tensor& x, int64_t dim = -1, bool keepdim = false);
// Mean over non-ignored rows of −log softmax(logits)[target]; logits (..., V), targets (...).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// The z-loss (PaLM; Wortsman et al. 2023, arXiv 2309.14322): the mean over rows of (log Z)²,
// Z = Σ_v exp(logit_v), logits (..., V). Cross-entropy is blind to a shift of every logit of a
// row; this term pulls log Z towards 0, so the output logits cannot drift off unnoticed.
Tensor z_loss(const Tensor& logits);
// x / √(mean(x², last dim) + eps) ⊙ weight, one fused kernel each way: x (..., C), weight (C).
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// SwiGLU's product silu(a) ⊙ b = a σ(a) b, one fused kernel each way: a, b of one shape.
Tensor swiglu(const Tensor& a, const Tensor& b);
// The same of a = h[..., :n] and b = h[..., n:], read in place: h (..., 2n) → (..., n). Its
// gradient is one (..., 2n) tensor, so a product x [W1; W2]ᵀ needs no split (nn/layers.h).
Tensor swiglu(const Tensor& h);
// σ(s) ⊙ a in one pass each way (the G1 gate): s and a of one shape, dtype and device.
Tensor sigmoid_gate(const Tensor& s, const Tensor& a);
// RoPE's rotation of x (B, H, T, D) by the constant (T, D) tables cos and sin (nn/rope.h):
// each channel pair (c, c + D/2) ↦ (x_c cos − x_{c+D/2} sin, x_{c+D/2} cos + x_c sin).
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);
// weight (V, D), ids int64 (...) → (..., D); backward scatter-adds into weight rows.
Tensor embedding(const Tensor& weight, const Tensor& ids);
// Rows of x at ids: x (N, D), ids int64 (M) → (M, D). The same as embedding(x, ids).
Tensor index_select(const Tensor& x, const Tensor& ids);
// x with src's rows added at ids: x (N, D), ids int64 (M), src (M, D) → (N, D); repeated ids add up.
Tensor index_add(const Tensor& x, const Tensor& ids, const Tensor& src);
// Zeroes each element with probability p and scales the rest by 1/(1−p) (when training).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());
// The k largest along `dim` (sorted, largest first) and their int64 indices.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1);
// out[..., j] = x[..., idx[..., j]] along `dim`, as torch.gather.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx);

// --- joining, splitting, masks (autograd/shape_ops.cpp) ---
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of x along dim: pieces of split_size (the last one shorter), or of the given sizes,
// which must add up to x.size(dim), as torch.split. Their gradients meet in one tensor.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim);
// Zero above (tril) / below (triu) the k-th diagonal of the last two dims.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

}  // namespace gg

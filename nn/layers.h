// layers.h — the basic layers: Linear, Embedding, norms, Dropout, SwiGLU, learned positions.
//
// Shapes: B batch, T time, C = d_model channels. Every layer takes float tensors of its
// parameters' dtype; create in float32 and call Module::to(DType::f64) for gradchecks.
#pragma once
#include <functional>

#include "nn/module.h"

namespace gg::nn {

// y = x Wᵀ + b, W: (out, in). Init as torch: U(−1/√in, 1/√in).
class Linear : public Module {
public:
    Linear(int64_t in_features, int64_t out_features, bool bias = true);
    // (..., in) → (..., out). With a residual (..., out), residual + that, the sum folded into
    // the GEMM (add_linear): a layer that writes onto a residual stream needs no pass of its
    // own for the addition.
    Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) const;
    Tensor weight, bias;                    // bias undefined when disabled
    // When set, forward() multiplies input_transform(x) instead of x: an experiment's hook
    // (tutorial 07 rounds every matmul input to bfloat16 with it). Not state: never saved.
    std::function<Tensor(const Tensor&)> input_transform;
};

// The products of several Linear layers that read the same x side by side, (..., in) →
// (..., Σ out_i), from one GEMM: the weights (and biases) joined along out by a differentiable
// cat. One GEMM each way instead of one per layer, and the layers' dx arrive summed. Undefined when
// joining does not pay (x has under 64 rows) or cannot be: an input_transform, a bias not in all.
Tensor joined_linear(const Tensor& x, const std::vector<const Linear*>& layers);
// The same split into one (..., out_i) view per layer (gg::split, whose gradients meet in one
// tensor): each layer's forward(x), run one by one when the layers cannot be joined.
std::vector<Tensor> fused_linear(const Tensor& x, const std::vector<const Linear*>& layers);

// Rows of a (num_embeddings, dim) table, N(0, 1) init as torch.
class Embedding : public Module {
public:
    // Rows start as N(0, init_std²): PyTorch's N(0, 1) by default.
    Embedding(int64_t num_embeddings, int64_t dim, double init_std = 1);
    Tensor forward(const Tensor& ids) const;  // int64 (...) → (..., dim)
    Tensor weight;
};

// y = x / √(mean(x²) + ε) ⊙ g   (Zhang & Sennrich 2019)
// Zero-centred, as Qwen3-Next and Qwen3.5 store their norms: g = 1 + weight, the weight
// starting at 0, so that weight decay pulls the scale towards 1 rather than towards 0. In
// bfloat16 the sum 1 + weight is rounded to bfloat16 (steps of 2⁻⁷ near 1).
class RMSNorm : public Module {
public:
    explicit RMSNorm(int64_t dim, double eps = 1e-6, bool zero_centred = false);
    Tensor forward(const Tensor& x) const;  // (..., dim) → (..., dim)
    Tensor weight;
    double eps;
    bool zero_centred;
};

// y = (x − mean) / √(var + ε) ⊙ g + b, biased variance as torch.
class LayerNorm : public Module {
public:
    explicit LayerNorm(int64_t dim, double eps = 1e-5);
    Tensor forward(const Tensor& x) const;  // (..., dim) → (..., dim)
    Tensor weight, bias;
    double eps;
};

class Dropout : public Module {
public:
    explicit Dropout(double p) : p(p) {}
    Tensor forward(const Tensor& x) const { return dropout(x, p, is_training()); }
    double p;
};

// SwiGLU feed-forward (Shazeer 2020): W3 (silu(W1 x) ⊙ W2 x), no biases.
class SwiGLU : public Module {
public:
    SwiGLU(int64_t dim, int64_t hidden);
    // (..., dim) → (..., dim); with a residual, residual + that, added by W3 as Linear does.
    Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) const;
    std::shared_ptr<Linear> w1, w2, w3;
};

// A learned vector per absolute position, N(0, 0.02²) init.
class LearnedPositionalEmbedding : public Module {
public:
    LearnedPositionalEmbedding(int64_t max_len, int64_t dim);
    Tensor forward(int64_t T, int64_t offset = 0) const;  // positions [offset, offset+T) → (T, dim)
    Tensor weight;
};

}  // namespace gg::nn

#include "nn/layers.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/autocast.h"

namespace gg::nn {

namespace {
void check_last_dim(const char* layer, const Tensor& x, int64_t expected) {
    check_defined(x, layer);
    if (x.dim() == 0 || x.size(-1) != expected)
        throw std::invalid_argument(std::string(layer) + ": input of shape " + shape_str(x.shape()) +
                                    " but the layer expects a last dim of " + std::to_string(expected));
}
}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias) {
    const double bound = 1.0 / std::sqrt(double(in_features));
    weight = init_uniform({out_features, in_features}, bound);
    register_parameter("weight", weight);
    if (has_bias) {
        bias = init_uniform({out_features}, bound);
        register_parameter("bias", bias);
    }
}

Tensor Linear::forward(const Tensor& x, const Tensor& residual) const {
    check_last_dim("Linear", x, weight.size(1));
    const Tensor in = input_transform ? input_transform(x) : x;
    if (residual.defined()) return add_linear(residual, in, weight, bias);
    const Tensor y = matmul(in, weight.t());  // the transpose is a view: GEMM reads it as such
    return bias.defined() ? y + autocast_lower(bias) : y;  // under autocast the whole layer is bfloat16
}

Tensor joined_linear(const Tensor& x, const std::vector<const Linear*>& layers) {
    // Joining the weights copies them each step: (Σ out_i, in) values, a small cost next to a
    // GEMM of many rows of x, but as much as the products themselves for the one row of a
    // decoding step, which then multiplies layer by layer. And only small weights gain: past
    // kJoinValues each product keeps the GEMM at full speed alone, and the copy is only memory
    // (Qwen3-0.6B's gate and up: 12.6 MB a layer per forward, twice that widened to float32).
    constexpr int64_t kJoinRows = 64, kJoinValues = int64_t(1) << 20;
    if (x.dim() == 0 || x.numel() < kJoinRows * x.size(-1)) return Tensor();
    int64_t values = 0;
    for (const Linear* layer : layers) values += layer->weight.numel();
    if (values > kJoinValues) return Tensor();
    std::vector<Tensor> weights, biases;
    for (const Linear* layer : layers) {
        if (layer->input_transform || layer->bias.defined() != layers[0]->bias.defined()) return Tensor();
        check_last_dim("Linear", x, layer->weight.size(1));
        weights.push_back(layer->weight);
        if (layer->bias.defined()) biases.push_back(layer->bias);
    }
    // The copy leaves each layer's parameter as it is (its name, its checkpoint entry, the
    // optimiser's view of it).
    const Tensor y = matmul(x, cat(weights, 0).t());  // (..., Σ out_i)
    return biases.empty() ? y : y + autocast_lower(cat(biases, 0));
}

std::vector<Tensor> fused_linear(const Tensor& x, const std::vector<const Linear*>& layers) {
    const Tensor joined = joined_linear(x, layers);  // (..., Σ out_i)
    std::vector<Tensor> out;
    std::vector<int64_t> sizes;
    for (const Linear* layer : layers) {
        if (!joined.defined()) out.push_back(layer->forward(x));
        sizes.push_back(layer->weight.size(0));
    }
    return joined.defined() ? split(joined, sizes, -1) : out;
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, double init_std) {
    weight = init_normal({num_embeddings, dim}, init_std);
    register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

RMSNorm::RMSNorm(int64_t dim, double eps_, bool zero_centred_) : eps(eps_), zero_centred(zero_centred_) {
    weight = zero_centred ? zeros({dim}) : ones({dim});
    register_parameter("weight", weight);
}

Tensor RMSNorm::forward(const Tensor& x) const {
    check_last_dim("RMSNorm", x, weight.size(0));
    return rms_norm(x, zero_centred ? weight + 1.0 : weight, eps);
}

LayerNorm::LayerNorm(int64_t dim, double eps_) : eps(eps_) {
    weight = ones({dim});
    bias = zeros({dim});
    register_parameter("weight", weight);
    register_parameter("bias", bias);
}

Tensor LayerNorm::forward(const Tensor& x) const {
    check_last_dim("LayerNorm", x, weight.size(0));
    const Tensor centered = x - mean(x, {-1}, true);
    const Tensor var = mean(centered * centered, {-1}, true);
    return centered * rsqrt(var + eps) * weight + bias;
}

SwiGLU::SwiGLU(int64_t dim, int64_t hidden)
    : w1(register_module("w1", std::make_shared<Linear>(dim, hidden, false))),
      w2(register_module("w2", std::make_shared<Linear>(dim, hidden, false))),
      w3(register_module("w3", std::make_shared<Linear>(hidden, dim, false))) {}

Tensor SwiGLU::forward(const Tensor& x, const Tensor& residual) const {
    // x [W1; W2]ᵀ (..., 2·hidden) in one GEMM, whose halves swiglu reads in place.
    const Tensor joined = joined_linear(x, {w1.get(), w2.get()});
    return w3->forward(joined.defined() ? swiglu(joined) : swiglu(w1->forward(x), w2->forward(x)), residual);
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_len, int64_t dim) {
    weight = init_normal({max_len, dim}, 0.02);
    register_parameter("weight", weight);
}

Tensor LearnedPositionalEmbedding::forward(int64_t T, int64_t offset) const {
    if (offset < 0 || offset + T > weight.size(0))
        throw std::out_of_range("LearnedPositionalEmbedding: positions [" + std::to_string(offset) + ", " +
                                std::to_string(offset + T) + ") exceed max_len " + std::to_string(weight.size(0)));
    return weight.narrow(0, offset, T);
}

}  // namespace gg::nn

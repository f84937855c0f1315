#include "nn/gated_deltanet.h"

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/engine.h"

namespace gg::nn {

// ---------------------------------------------------------------- the delta rule, two ways

namespace {

void check_delta_rule_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                             const Tensor& beta, const Tensor& S0) {
    for (const Tensor* t : {&q, &k, &v, &g, &beta}) check_defined(*t, op);
    const bool ok = q.dim() == 4 && k.shape() == q.shape() && v.dim() == 4 && v.size(0) == q.size(0) &&
                    v.size(1) == q.size(1) && v.size(2) == q.size(2) && g.shape() == Shape{q.size(0), q.size(1), q.size(2)} &&
                    beta.shape() == g.shape() &&
                    (!S0.defined() || S0.shape() == Shape{q.size(0), q.size(1), q.size(3), v.size(3)});
    if (!ok)
        throw std::invalid_argument(std::string(op) + ": q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) +
                                    ", v " + shape_str(v.shape()) + ", g " + shape_str(g.shape()) + ", beta " +
                                    shape_str(beta.shape()) + ", S0 " + (S0.defined() ? shape_str(S0.shape()) : "none") +
                                    ": need q = k (B, H, T, dk), v (B, H, T, dv), g = beta (B, H, T), S0 (B, H, dk, dv)");
}

Tensor initial_state(const Tensor& S0, const Tensor& q, const Tensor& v) {
    return S0.defined() ? S0 : zeros({q.size(0), q.size(1), q.size(3), v.size(3)}, q.dtype(), q.device());
}

// The slices of t along dim 2 (tokens or chunks), that dim dropped. split's views write their
// gradients into one tensor of t's shape; select's would each make a zero tensor of t's whole
// size in backward, work that grows as the square of the sequence.
std::vector<Tensor> unbind_steps(const Tensor& t) {
    std::vector<Tensor> pieces = split(t, 1, 2);
    for (Tensor& piece : pieces) piece = piece.squeeze(2);
    return pieces;
}

}  // namespace

std::pair<Tensor, Tensor> gated_delta_rule_recurrent(const Tensor& q, const Tensor& k, const Tensor& v,
                                                     const Tensor& g, const Tensor& beta, const Tensor& S0) {
    check_delta_rule_inputs("gated_delta_rule_recurrent", q, k, v, g, beta, S0);
    // Per token: q_t, k_t (B, H, 1, dk), v_t (B, H, 1, dv), α_t and β_t (B, H, 1, 1).
    const auto tokens = [](const Tensor& t) { return unbind_steps(t.unsqueeze(3)); };
    const std::vector<Tensor> qs = tokens(q), ks = tokens(k), vs = tokens(v);
    const std::vector<Tensor> alphas = tokens(exp(g).unsqueeze(-1)), betas = tokens(beta.unsqueeze(-1));
    Tensor S = initial_state(S0, q, v);  // (B, H, dk, dv)
    std::vector<Tensor> out;
    for (size_t t = 0; t < qs.size(); ++t) {
        S = S * alphas[t];                                         // forget
        const Tensor u = (vs[t] - matmul(ks[t], S)) * betas[t];    // (B, H, 1, dv) what k_t's value moves by
        S = S + matmul(ks[t].transpose(2, 3), u);                  // (B, H, dk, dv)
        out.push_back(matmul(qs[t], S));                           // (B, H, 1, dv)
    }
    return {cat(out, 2), S};
}

namespace {

// (B, H, Tp, ·) ↔ (B, H, Tp/C, C, ·): chunk n holds tokens n·C … n·C + C − 1.
Tensor to_chunks(const Tensor& t, int64_t C) {
    Shape shape = t.shape();
    shape[2] /= C;
    shape.insert(shape.begin() + 3, C);
    return t.reshape(shape);
}

// Zeros after the T tokens, up to Tp, along dim 2: a padded token has k = v = 0 and β = g = 0,
// so it writes nothing and the state passes it unchanged.
Tensor pad_time(const Tensor& t, int64_t Tp) {
    if (t.size(2) == Tp) return t;
    Shape shape = t.shape();
    shape[2] = Tp - t.size(2);
    return cat({t, zeros(shape, t.dtype(), t.device())}, 2);
}

// (I + A)⁻¹ for each chunk, A_rs = β_r (k_r·k_s) e^{γ_r − γ_s} for s < r and 0 elsewhere (strictly
// lower triangular, so I + A has ones on its diagonal). By 2 × 2 blocks, from 1 × 1 blocks up:
//   [I + A₁₁, 0; A₂₁, I + A₂₂]⁻¹ = [X₁, 0; −X₂ A₂₁ X₁, X₂],   X_i = (I + A_ii)⁻¹,
// so log₂ C rounds of batched matmuls, where solving row by row takes C − 1 dependent steps.
// Each A₂₁ block is made from the keys when its round needs it: every entry below the diagonal
// lies in exactly one of them, so that costs what A costs.
// k, k_beta = k ⊙ β (B, H, N, C, dk); gamma (B, H, N, C) → (B, H, N, C, C)
Tensor unit_lower_inverse(const Tensor& k, const Tensor& k_beta, const Tensor& gamma) {
    const int64_t B = k.size(0), H = k.size(1), N = k.size(2), C = k.size(3), dk = k.size(4);
    Tensor X = ones({B, H, N, C, 1, 1}, k.dtype(), k.device());  // the 1 × 1 diagonal blocks
    for (int64_t b = 1; b < C; b *= 2) {
        const int64_t n = C / (2 * b);  // blocks of 2b rows per chunk, each two halves of b
        const Tensor k2 = k.view({B, H, N, n, 2, b, dk}), kb2 = k_beta.view({B, H, N, n, 2, b, dk});
        const Tensor g2 = gamma.view({B, H, N, n, 2, b}), X2 = X.view({B, H, N, n, 2, b, b});
        // rows of the second half, columns of the first: every exponent γ_r − γ_s ≤ 0
        const Tensor decay = exp(g2.select(4, 1).unsqueeze(-1) - g2.select(4, 0).unsqueeze(-2));  // (…, n, b, b)
        const Tensor A21 = matmul(kb2.select(4, 1), k2.select(4, 0).transpose(-1, -2)) * decay;
        const Tensor X1 = X2.select(4, 0), X2_ = X2.select(4, 1);
        const Tensor below = -matmul(matmul(X2_, A21), X1);
        X = cat({cat({X1, zeros_like(X1)}, -1), cat({below, X2_}, -1)}, -2);  // (B, H, N, n, 2b, 2b)
    }
    return X.view({B, H, N, C, C});
}

}  // namespace

// Within a chunk, with γ_r = g_1 + … + g_r (so the state at the chunk's start, S₀, has decayed
// by Γ_r = e^{γ_r} at token r) and u_r = β_r (v_r − α_r S_{r−1}ᵀ k_r) the row token r writes:
//   S_r = Γ_r S₀ + Σ_{s≤r} e^{γ_r − γ_s} k_s u_sᵀ
//   u_r + β_r Σ_{s<r} e^{γ_r − γ_s} (k_r·k_s) u_s = β_r v_r − β_r Γ_r S₀ᵀ k_r
// i.e. (I + A) U = βV − (Γ ⊙ βK) S₀, so U = W_v − W_k S₀ with W_v = (I + A)⁻¹ βV and
// W_k = (I + A)⁻¹ (Γ ⊙ βK), both independent of S₀: every chunk's in one batch. Then
//   O = (Γ ⊙ Q) S₀ + (Q Kᵀ ⊙ D) U,   D_rs = e^{γ_r − γ_s} for s ≤ r, 0 above
//   S_C = Γ_C S₀ + (e^{γ_C − γ} ⊙ K)ᵀ U
// and only those three lines run chunk after chunk.
std::pair<Tensor, Tensor> gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v,
                                                   const Tensor& g, const Tensor& beta, const Tensor& S0,
                                                   int64_t chunk_size) {
    check_delta_rule_inputs("gated_delta_rule_chunked", q, k, v, g, beta, S0);
    if (chunk_size < 1 || !std::has_single_bit(uint64_t(chunk_size)))
        throw std::invalid_argument("gated_delta_rule_chunked: chunk size " + std::to_string(chunk_size) +
                                    " is not a power of two");
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), dv = v.size(3);
    const int64_t C = std::min<int64_t>(chunk_size, std::bit_ceil(uint64_t(std::max<int64_t>(T, 1))));
    const int64_t N = (T + C - 1) / C, Tp = N * C;
    const DType dtype = q.dtype();
    const Device dev = q.device();

    // (B, H, N, C, ·) and (B, H, N, C)
    const Tensor Q = to_chunks(pad_time(q, Tp), C), K = to_chunks(pad_time(k, Tp), C), V = to_chunks(pad_time(v, Tp), C);
    const Tensor G = to_chunks(pad_time(g.unsqueeze(-1), Tp), C).squeeze(-1);
    const Tensor Beta = to_chunks(pad_time(beta.unsqueeze(-1), Tp), C);  // (B, H, N, C, 1)
    // γ, the running sum of g within each chunk, as a product with a triangle of ones: γ = G U,
    // U_sr = 1 for s ≤ r.
    const Tensor gamma = matmul(G, triu(ones({C, C}, dtype, dev)));  // (B, H, N, C)
    // D: e^{γ_r − γ_s} on and below the diagonal; above it the exponent is positive and may
    // overflow, so it becomes −∞ before exp (e^{−∞} = 0), not after.
    const Tensor above = triu(ones({C, C}, dtype, dev), 1);
    const Tensor D = exp(masked_fill(gamma.unsqueeze(-1) - gamma.unsqueeze(-2), above, -INFINITY));  // (B, H, N, C, C)

    const Tensor K_beta = K * Beta, Gamma = exp(gamma).unsqueeze(-1);  // (B, H, N, C, dk), (B, H, N, C, 1)
    const Tensor inverse = unit_lower_inverse(K, K_beta, gamma);     // (B, H, N, C, C)
    const Tensor W_v = matmul(inverse, V * Beta);                     // (B, H, N, C, dv)
    const Tensor W_k = matmul(inverse, K_beta * Gamma);               // (B, H, N, C, dk)
    const Tensor P = matmul(Q, K.transpose(-1, -2)) * D;              // (B, H, N, C, C) attention within the chunk
    const Tensor Q_decayed = Q * Gamma;                               // (B, H, N, C, dk)
    const Tensor gamma_end = gamma.narrow(3, C - 1, 1);               // (B, H, N, 1)
    const Tensor K_to_end = (K * exp(gamma_end - gamma).unsqueeze(-1)).transpose(-1, -2);  // (B, H, N, dk, C)
    const Tensor decay_end = exp(gamma_end).unsqueeze(-1);            // (B, H, N, 1, 1)

    // Chunk by chunk (dim 2 dropped), as the loop reads them.
    const std::vector<Tensor> w_v = unbind_steps(W_v), w_k = unbind_steps(W_k), q_decayed = unbind_steps(Q_decayed);
    const std::vector<Tensor> p = unbind_steps(P), k_to_end = unbind_steps(K_to_end), d_end = unbind_steps(decay_end);
    Tensor S = initial_state(S0, q, v);  // (B, H, dk, dv)
    std::vector<Tensor> out;
    for (int64_t n = 0; n < N; ++n) {
        const Tensor U = w_v[n] - matmul(w_k[n], S);                         // (B, H, C, dv)
        out.push_back(matmul(q_decayed[n], S) + matmul(p[n], U));            // (B, H, C, dv)
        S = S * d_end[n] + matmul(k_to_end[n], U);                           // (B, H, dk, dv)
    }
    return {stack(out, 2).view({B, H, Tp, dv}).narrow(2, 0, T), S};
}

// ---------------------------------------------------------------- the layer

namespace {

// softplus⁻¹(y) = y + log(1 − e^{−y}): the bias that makes softplus(0 + dt_bias) = y.
Tensor inverse_softplus(const Tensor& y) { return y + log(1.0 - exp(-y)); }

// The causal depthwise convolution over time, channel by channel:
//   out[b, t, c] = Σ_j w[c, j] · in[b, t + j, c],   j = 0 … K − 1
// where `in` is the T inputs preceded by the K − 1 before them (zeros at a sequence's start,
// the last inputs of the previous call when decoding): K shifted products, each a broadcast
// multiply. in (B, K − 1 + T, channels), weight (channels, K) → (B, T, channels)
Tensor causal_conv(const Tensor& in, const Tensor& weight) {
    const int64_t K = weight.size(1), T = in.size(1) - K + 1;
    Tensor out = in.narrow(1, 0, T) * weight.select(1, 0);
    for (int64_t j = 1; j < K; ++j) out = out + in.narrow(1, j, T) * weight.select(1, j);
    return out;
}

// x / √(Σ x² + 10⁻⁶) · scale over the last dim, as one fused rms_norm: Σ x² = dim · mean x², so
// x / √(Σ x² + ε) = rms_norm(x, weight 1/√dim, ε / dim). The ε is Hugging Face's (and the
// paper's code's) 10⁻⁶.
Tensor l2_normalize(const Tensor& x, double scale) {
    const double dim = double(x.size(-1));
    return rms_norm(x, full({x.size(-1)}, scale / std::sqrt(dim), x.dtype(), x.device()), 1e-6 / dim);
}

}  // namespace

GatedDeltaNet::GatedDeltaNet(const GatedDeltaNetOptions& options) : options_(options) {
    const GatedDeltaNetOptions& o = options;
    const int64_t d = o.d_model, Hk = o.n_k_heads, Hv = o.v_heads();
    if (d <= 0 || Hk <= 0 || Hv % Hk != 0 || o.head_k_dim < 0 || o.head_v_dim < 0 ||
        (o.head_k_dim == 0 && d % Hk != 0) || o.k_dim() <= 0 || o.v_dim() <= 0 || o.conv_kernel < 1 ||
        o.chunk_size < 1 || !std::has_single_bit(uint64_t(o.chunk_size)) || !(o.norm_eps > 0))
        throw std::invalid_argument(
            "GatedDeltaNet: d_model " + std::to_string(d) + ", n_k_heads " + std::to_string(Hk) + ", n_v_heads " +
            std::to_string(o.n_v_heads) + ", head_k_dim " + std::to_string(o.head_k_dim) + ", head_v_dim " +
            std::to_string(o.head_v_dim) + ", conv_kernel " + std::to_string(o.conv_kernel) + ", chunk_size " +
            std::to_string(o.chunk_size) + ", norm_eps " + std::to_string(o.norm_eps) +
            ": need key heads dividing value heads, head sizes > 0 (or key heads dividing d_model), a kernel ≥ 1, "
            "a power-of-two chunk size and a positive eps");
    const int64_t dk = o.k_dim(), dv = o.v_dim(), K = o.conv_kernel;
    w_q = register_module("w_q", std::make_shared<Linear>(d, Hk * dk, false));
    w_k = register_module("w_k", std::make_shared<Linear>(d, Hk * dk, false));
    w_v = register_module("w_v", std::make_shared<Linear>(d, Hv * dv, false));
    w_z = register_module("w_z", std::make_shared<Linear>(d, Hv * dv, false));
    w_beta = register_module("w_beta", std::make_shared<Linear>(d, Hv, false));
    w_alpha = register_module("w_alpha", std::make_shared<Linear>(d, Hv, false));
    // PyTorch's Conv1d init for one input channel per group: U(±1/√K).
    conv_weight = init_uniform({o.conv_channels(), K}, 1.0 / std::sqrt(double(K)));
    register_parameter("conv_weight", conv_weight);
    // The paper's code's init (as Mamba-2's): A ~ U(0, 16), here from 0.01 so that log A stays
    // finite, and a step softplus(dt_bias) = e^{U(log 0.001, log 0.1)}, so that a fresh layer's
    // decay α = e^{−A·step} starts in (0.2, 1): every head remembers for a while. Transformers'
    // init sets dt_bias = 1 instead (most heads then forget within a token or two); a checkpoint
    // overrides both.
    A_log = log(init_uniform({Hv}, 7.995) + 8.005);
    register_parameter("A_log", A_log);
    dt_bias = inverse_softplus(exp(init_uniform({Hv}, std::log(10.0)) + std::log(0.01)));
    register_parameter("dt_bias", dt_bias);
    norm = register_module("norm", std::make_shared<RMSNorm>(dv, o.norm_eps));
    w_o = register_module("w_o", std::make_shared<Linear>(Hv * dv, d, false));
}

Tensor GatedDeltaNet::forward(const Tensor& x, DeltaNetCache* cache, const Tensor& residual,
                              DeltaNetCapture* capture) const {
    check_defined(x, "GatedDeltaNet");
    const GatedDeltaNetOptions& o = options_;
    if (x.dim() != 3 || x.size(2) != o.d_model)
        throw std::invalid_argument("GatedDeltaNet: expected x (B, T, " + std::to_string(o.d_model) + "), got " +
                                    shape_str(x.shape()));
    const int64_t B = x.size(0), T = x.size(1), Hk = o.n_k_heads, Hv = o.v_heads(), dk = o.k_dim(),
                  dv = o.v_dim(), K = o.conv_kernel, channels = o.conv_channels();
    if (cache && cache->state.defined() && cache->state.size(0) != B)
        throw std::invalid_argument("GatedDeltaNet: the cache holds " + std::to_string(cache->state.size(0)) +
                                    " sequences, x " + shape_str(x.shape()) + " has " + std::to_string(B));

    // Every projection of x in one GEMM.
    const std::vector<Tensor> p = fused_linear(x, {w_q.get(), w_k.get(), w_v.get(), w_z.get(), w_beta.get(), w_alpha.get()});

    // The short convolution mixes each channel of q, k and v with its last K − 1 inputs.
    // Zeros of the projections' dtype, which is bfloat16 under autocast whatever x is.
    const Tensor past =
        cache && cache->conv.defined() ? cache->conv : zeros({B, K - 1, channels}, p[0].dtype(), x.device());
    const Tensor conv_in = cat({past, cat({p[0], p[1], p[2]}, 2)}, 1);  // (B, K − 1 + T, channels)
    // Under bfloat16 autocast the delta rule still runs in float32, as Hugging Face's code runs
    // it: its state sums every token of the sequence.
    const Tensor mixed = autocast_float32(silu(causal_conv(conv_in, conv_weight)));
    const std::vector<Tensor> qkv = split(mixed, {Hk * dk, Hk * dk, Hv * dv}, 2);

    // Unit-length keys, queries of length 1/√dk; each key head repeated for its r value heads.
    const int64_t r = Hv / Hk;
    const auto heads = [&](const Tensor& t, int64_t n, int64_t width) { return t.view({B, T, n, width}); };
    const Tensor q = repeat_interleave(l2_normalize(heads(qkv[0], Hk, dk), 1 / std::sqrt(double(dk))), r, 2);
    const Tensor k = repeat_interleave(l2_normalize(heads(qkv[1], Hk, dk), 1.0), r, 2);  // (B, T, Hv, dk)
    const Tensor v = heads(qkv[2], Hv, dv);                                               // (B, T, Hv, dv)
    const Tensor beta = sigmoid(autocast_float32(p[4]));                                  // (B, T, Hv)
    const Tensor g = -exp(autocast_float32(A_log)) *
                     softplus(autocast_float32(p[5]) + autocast_float32(dt_bias));        // (B, T, Hv) log α ≤ 0

    // The delta rule, on (B, Hv, T, ·) heads, with autocast off: its inputs are float32 (above).
    const Tensor S0 = cache ? cache->state : Tensor();
    const auto rule = [&] {
        const Autocast full_precision(DType::f32);
        return T == 1 || o.form == DeltaRuleForm::recurrent
                   ? gated_delta_rule_recurrent(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                g.transpose(1, 2), beta.transpose(1, 2), S0)
                   : gated_delta_rule_chunked(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              g.transpose(1, 2), beta.transpose(1, 2), S0, o.chunk_size);
    }();
    if (cache) {
        NoGradGuard no_grad;
        cache->conv = conv_in.narrow(1, T, K - 1).detach().contiguous();
        cache->state = rule.second.detach();
        cache->seen_ += T;
    }
    if (capture) *capture = {exp(g).detach(), rule.second.detach()};

    // RMSNorm(o) ⊙ SiLU(z) per value head (swiglu is that product, silu(a) ⊙ b, in one pass), then W_o.
    const Tensor o_heads = rule.first.transpose(1, 2);                                // (B, T, Hv, dv)
    const Tensor gated = swiglu(heads(p[3], Hv, dv), norm->forward(o_heads));          // (B, T, Hv, dv)
    return w_o->forward(gated.reshape({B, T, Hv * dv}), residual);                     // (B, T, d)
}

}  // namespace gg::nn

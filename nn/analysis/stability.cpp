// stability.cpp — the statistics of stability.h from one captured forward pass.
#include "nn/analysis/stability.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "autograd/engine.h"
#include "nn/analysis/analysis.h"

namespace gg::nn {

double StabilityStats::largest_attn_logit() const {
    return max_attn_logit.empty() ? NAN : *std::max_element(max_attn_logit.begin(), max_attn_logit.end());
}

double StabilityStats::smallest_attn_entropy() const {
    return min_attn_entropy.empty() ? NAN : *std::min_element(min_attn_entropy.begin(), min_attn_entropy.end());
}

std::string StabilityStats::to_json() const {
    nlohmann::ordered_json j = {{"max_attn_logit", max_attn_logit},     {"mean_attn_logit", mean_attn_logit},
                                {"min_attn_entropy", min_attn_entropy}, {"gate_mean", gate_mean},
                                {"max_abs_hidden", max_abs_hidden},     {"max_output_logit", max_output_logit},
                                {"mean_log_z", mean_log_z}};
    return j.dump();
}

StabilityStats measure_stability(const GatedTransformerLM& model, const Tensor& ids) {
    if (ids.dim() != 2 || ids.size(1) < 2)
        throw std::invalid_argument("measure_stability: need ids (B, T) with T ≥ 2, got " + shape_str(ids.shape()));
    // lse + log max_j p_ij is the largest logit only where p = e^{z − lse} (nn/attention.h: AttentionCapture).
    if (!is_softmax(model.config().attn.score_fn))
        throw std::invalid_argument("measure_stability: the largest attention logit is read from the softmax's "
                                    "log-sum-exp, which score function " +
                                    score_function_name(model.config().attn.score_fn) + " does not have");
    NoGradGuard no_grad;
    LMCapture capture;
    const LMOutput out = model.forward(ids, Tensor(), nullptr, &capture);
    const int64_t T = ids.size(1);
    StabilityStats s;
    for (size_t l = 0; l < capture.attention.size(); ++l) {
        const AttentionCapture& seen = capture.attention[l];
        if (!seen.probs.defined()) continue;  // a linear-attention layer of a hybrid
        const Tensor p = seen.probs.to(DType::f64);                            // (B, H, T, T)
        const Tensor row_max = seen.lse.to(DType::f64) + log(amax(p, {-1}));  // (B, H, T): max_j z_ij
        s.max_attn_logit.push_back(amax(row_max).item());
        s.mean_attn_logit.push_back(mean(row_max).item());
        // Query 0 sees one key: its entropy is always 0, so it says nothing about a head.
        const Tensor head_entropy = mean(attention_row_entropy(p.narrow(2, 1, T - 1)), {0, 2});  // (H)
        s.min_attn_entropy.push_back(amin(head_entropy).item());
        if (seen.gate.defined()) s.gate_mean.push_back(mean(seen.gate.to(DType::f64)).item());
        s.max_abs_hidden = std::max(s.max_abs_hidden, amax(abs(capture.hidden[l].to(DType::f64))).item());
    }
    const Tensor y = out.logits.to(DType::f64);  // (B, T, V)
    s.max_output_logit = amax(y).item();
    s.mean_log_z = mean(logsumexp(y, -1)).item();
    return s;
}

}  // namespace gg::nn

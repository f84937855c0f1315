#include "nn/analysis/analysis.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "autograd/engine.h"

namespace gg::nn {

namespace {
// x log x with 0 log 0 = 0.
Tensor xlogx(const Tensor& x) {
    return where(gt(x, zeros_like(x)), x * log(maximum(x, full({}, 1e-300, x.dtype(), x.device()))), zeros_like(x));
}
}  // namespace

Tensor attention_row_entropy(const Tensor& probs) { return -sum(xlogx(probs), {-1}); }

double attention_entropy(const Tensor& probs) { return mean(attention_row_entropy(probs)).item(); }

double gated_attention_entropy(const Tensor& probs, const Tensor& gate) {
    const Tensor g = gate.unsqueeze(-1);  // (B, H, Tq, 1)
    const Tensor kept = -sum(xlogx(g * probs), {-1});
    const Tensor dropped = -xlogx(1.0 - gate);
    return mean(kept + dropped).item();
}

ModelAnalysis analyze(const GatedTransformerLM& model, const Tensor& ids, double threshold,
                      const std::vector<int64_t>& layers) {
    if (ids.dim() != 2 || ids.size(1) < 2)
        throw std::invalid_argument("analyze: need ids (B, T) with T ≥ 2, got " + shape_str(ids.shape()));
    NoGradGuard no_grad;
    LMCapture capture;
    capture.layers = layers;
    model.forward(ids, Tensor(), nullptr, &capture);
    ModelAnalysis out;
    out.threshold = threshold;
    const int64_t T = ids.size(1);
    const double measured = double(layers.empty() ? model.blocks.size() : layers.size());
    for (size_t l = 0; l < model.blocks.size(); ++l) {
        if (!capture.keeps(l)) continue;
        const GatedAttention& attn = *model.blocks[l]->attn;
        const AttentionCapture& seen = capture.attention[l];
        const Tensor probs = seen.probs.to(DType::f64);  // (B, H, T, T)
        LayerAnalysis layer;
        layer.layer = int64_t(l);
        // α per head: attention on key 0 from queries 1..T−1, averaged over batch and queries.
        const Tensor alpha = mean(probs.narrow(2, 1, T - 1).select(3, 0), {0, 2});  // (H)
        layer.first_token_share = alpha.to_vector<double>();
        layer.mean_first_token_share = mean(alpha).item();
        for (double a : layer.first_token_share) out.sink_heads += a > threshold;
        out.heads += alpha.numel();
        layer.entropy = attention_entropy(probs);
        if (seen.gate.defined()) {
            const Tensor gate = seen.gate.to(DType::f64);
            layer.gate_mean = mean(gate).item();
            layer.gate_below_0_1 = mean(lt(gate, full({}, 0.1, DType::f64, gate.device()))).item();
            if (attn.options().gate == GatePosition::sdpa_output) {
                // (B, heads, T, width) → per-query gate (B, H, T), shared gates broadcast over heads
                const Tensor per_query = mean(gate, {3}).expand({probs.size(0), probs.size(1), T});
                layer.gated_entropy = gated_attention_entropy(probs, per_query);
            }
        }
        const Tensor hidden = abs(capture.hidden[l].to(DType::f64));  // (B, T, d)
        layer.max_abs_hidden = amax(hidden).item();
        layer.max_abs_hidden_first = amax(hidden.select(1, 0)).item();
        out.mean_first_token_share += layer.mean_first_token_share / measured;
        out.mean_max_abs_hidden += layer.max_abs_hidden / measured;
        out.sink_layers += layer.mean_first_token_share > threshold;
        out.layers.push_back(layer);
    }
    return out;
}

std::string ModelAnalysis::to_json() const {
    nlohmann::ordered_json j = {{"threshold", threshold},
                                {"mean_first_token_share", mean_first_token_share},
                                {"sink_layers", sink_layers},
                                {"sink_heads", sink_heads},
                                {"heads", heads},
                                {"mean_max_abs_hidden", mean_max_abs_hidden},
                                {"layers", nlohmann::ordered_json::array()}};
    for (const LayerAnalysis& l : layers)
        j["layers"].push_back({{"layer", l.layer},
                               {"first_token_share", l.first_token_share},
                               {"mean_first_token_share", l.mean_first_token_share},
                               {"entropy", l.entropy},
                               {"gated_entropy", l.gated_entropy},
                               {"gate_mean", l.gate_mean},
                               {"gate_below_0_1", l.gate_below_0_1},
                               {"max_abs_hidden", l.max_abs_hidden},
                               {"max_abs_hidden_first", l.max_abs_hidden_first}});
    return j.dump(2);
}

std::string ModelAnalysis::table() const {
    std::string s = "layer  first-token share  sink  entropy  gated-entropy  gate-mean  gate<0.1  max|h|  max|h@0|\n";
    char line[256];
    auto opt = [](double v, const char* fmt) {
        char b[32];
        if (v < 0) return std::string("-");
        std::snprintf(b, sizeof b, fmt, v);
        return std::string(b);
    };
    for (size_t l = 0; l < layers.size(); ++l) {
        const LayerAnalysis& x = layers[l];
        std::snprintf(line, sizeof line, "%5lld  %17.3f  %4s  %7.3f  %13s  %9s  %8s  %6.1f  %8.1f\n", (long long)x.layer,
                      x.mean_first_token_share, x.mean_first_token_share > threshold ? "yes" : "no", x.entropy,
                      opt(x.gated_entropy, "%.3f").c_str(), opt(x.gate_mean, "%.3f").c_str(),
                      opt(x.gate_below_0_1, "%.3f").c_str(), x.max_abs_hidden, x.max_abs_hidden_first);
        s += line;
    }
    std::snprintf(line, sizeof line,
                  "mean first-token share %.3f; sink layers %lld of %zu; sink heads (alpha > %.2f) %lld of %lld\n",
                  mean_first_token_share, static_cast<long long>(sink_layers), layers.size(), threshold,
                  static_cast<long long>(sink_heads), static_cast<long long>(heads));
    return s + line;
}

}  // namespace gg::nn

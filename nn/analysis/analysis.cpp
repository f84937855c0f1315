#include "nn/analysis/analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "autograd/engine.h"
#include "nn/analysis/activation_cache.h"
#include "cpu/parallel.h"

namespace gg::nn {

namespace {
// x log x with 0 log 0 = 0.
Tensor xlogx(const Tensor& x) {
    return where(gt(x, zeros_like(x)), x * log(maximum(x, full({}, 1e-300, x.dtype(), x.device()))), zeros_like(x));
}

// −Σ_j xlogx(g_r p_rj) of each row r of probs (…, Tk), in float64: (…). g (…) scales each row, or
// is undefined (1). One pass over the probabilities, where the same sum as ops (a product, a
// maximum, a log, a where and the sum, each over B·H·T² float64 values) made about ten: this is
// the sink report's largest cost after its forward. Each term and the key-order sum are the
// ops' own (cpu_reduce adds a row's terms one by one from 0 in float64), so every entropy comes
// out the same to the last bit.
Tensor row_entropy(const Tensor& probs, const Tensor& g) {
    const int64_t Tk = probs.size(-1), rows = probs.numel() / std::max<int64_t>(Tk, 1);
    const std::vector<double> p = probs.to_vector<double>();
    const std::vector<double> scale = g.defined() ? g.to_vector<double>() : std::vector<double>();
    std::vector<double> out(size_t(rows), 0.0);
    parallel_range(rows, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            double sum = 0;
            for (int64_t j = 0; j < Tk; ++j) {
                const double x = scale.empty() ? p[size_t(r * Tk + j)] : scale[size_t(r)] * p[size_t(r * Tk + j)];
                sum = sum + (x > 0 ? x * std::log(std::max(x, 1e-300)) : 0.0);
            }
            out[size_t(r)] = -sum;
        }
    }, Tk);
    Shape shape = probs.shape();
    shape.pop_back();
    return from_vector(out, shape, probs.device());
}
}  // namespace

Tensor attention_row_entropy(const Tensor& probs) { return row_entropy(probs, Tensor()); }

double attention_entropy(const Tensor& probs) { return mean(attention_row_entropy(probs)).item(); }

double gated_attention_entropy(const Tensor& probs, const Tensor& gate) {
    const Tensor kept = row_entropy(probs, gate.expand(Shape(probs.shape().begin(), probs.shape().end() - 1)));
    const Tensor dropped = -xlogx(1.0 - gate);
    return mean(kept + dropped).item();
}

HeadShares head_shares(const Tensor& probs_in, const Tensor& slot, ScoreFunction f) {
    const int64_t H = probs_in.size(1), T = probs_in.size(2);
    const Tensor probs = probs_in.to(DType::f64).narrow(2, 1, T - 1);  // (B, H, T−1, T): queries 1 … T−1
    const Tensor first = probs.select(3, 0), sums = sum(probs, {3});  // (B, H, T−1) each
    HeadShares out;
    out.first_token = mean(first, {0, 2});
    out.row_sum = mean(sums, {0, 2});
    out.slot = slot.defined() ? mean(slot.to(DType::f64).narrow(2, 1, T - 1), {0, 2}) : zeros({H}, DType::f64);
    if (is_softmax(f)) {
        out.normalised_first_token = out.first_token;  // the weights and the slot already sum to 1
        return out;
    }
    const Tensor held = gt(sums, zeros_like(sums));  // rows with some weight
    out.normalised_first_token = mean(where(held, first / where(held, sums, ones_like(sums)), zeros_like(sums)), {0, 2});
    return out;
}

namespace {
// A layer's α, slot share and row sum per head, and what they add to the model's sink counts
// (the rates are counts until analyze divides them).
void set_shares(LayerAnalysis& layer, const HeadShares& shares, ModelAnalysis& out) {
    layer.first_token_share = shares.first_token.to_vector<double>();
    layer.slot_share = shares.slot.to_vector<double>();
    layer.row_sum = shares.row_sum.to_vector<double>();
    layer.normalised_first_token_share = shares.normalised_first_token.to_vector<double>();
    layer.mean_first_token_share = mean(shares.first_token).item();
    layer.mean_slot_share = mean(shares.slot).item();
    layer.mean_row_sum = mean(shares.row_sum).item();
    layer.sink = mean(shares.normalised_first_token).item() > out.threshold || layer.mean_slot_share > out.threshold;
    for (size_t h = 0; h < layer.first_token_share.size(); ++h) {
        const bool first = layer.normalised_first_token_share[h] > out.threshold,
                   slot = layer.slot_share[h] > out.threshold;
        out.sink_heads += first || slot;
        out.first_token_sink_rate += first;
        out.slot_sink_rate += slot;
    }
    out.heads += int64_t(layer.first_token_share.size());
}
}  // namespace

namespace {
LinearLayerAnalysis analyze_linear(const DeltaNetCapture& seen, int64_t index) {
    LinearLayerAnalysis layer;
    layer.layer = index;
    const Tensor S = seen.state.to(DType::f64);  // (B, Hv, dk, dv)
    layer.state_norm = mean(sqrt(sum(S * S, {2, 3})), {0}).to_vector<double>();  // (Hv)
    layer.decay = mean(seen.decay.to(DType::f64), {0, 1}).to_vector<double>();   // (Hv)
    for (size_t h = 0; h < layer.decay.size(); ++h) {
        layer.mean_state_norm += layer.state_norm[h] / double(layer.decay.size());
        layer.mean_decay += layer.decay[h] / double(layer.decay.size());
    }
    return layer;
}
}  // namespace

ModelAnalysis analyze(const GatedTransformerLM& model, const Tensor& ids, double threshold,
                      const std::vector<int64_t>& layers, const Hooks& hooks) {
    if (ids.dim() != 2 || ids.size(1) < 2)
        throw std::invalid_argument("analyze: need ids (B, T) with T ≥ 2, got " + shape_str(ids.shape()));
    NoGradGuard no_grad;
    const DType dtype = model.parameters().front().dtype();  // kept as the pass computed them
    const std::vector<HookPoint> points{HookPoint::probs, HookPoint::slot, HookPoint::gate, HookPoint::resid_post};
    const ActivationCache cache = run_with_cache(model, ids, points, layers, dtype, hooks);
    ModelAnalysis out;
    out.threshold = threshold;
    out.score_fn = model.config().attn.score_fn;
    const int64_t T = ids.size(1);
    // A hybrid's linear layers have no attention to analyse: their state and decay come from a
    // second pass that keeps those layers' DeltaNetCapture (with the same hooks). A feed_forward
    // layer has neither.
    LMCapture linear;
    double measured = 0;  // full-attention layers
    for (int64_t l = 0; l < int64_t(model.blocks.size()); ++l) {
        if (!cache.has(HookPoint::resid_post, l)) continue;  // a layer not asked for
        if (model.blocks[size_t(l)]->linear_attn) linear.layers.push_back(l);
        else measured += model.blocks[size_t(l)]->has_attention();
    }
    if (!linear.layers.empty()) {
        model.forward(ids, Tensor(), nullptr, &linear, &hooks);
        for (const int64_t l : linear.layers) out.linear_layers.push_back(analyze_linear(linear.linear[size_t(l)], l));
    }
    for (int64_t l = 0; l < int64_t(model.blocks.size()); ++l) {
        if (!cache.has(HookPoint::resid_post, l) || !model.blocks[size_t(l)]->has_attention()) continue;
        const Tensor probs = cache.at(HookPoint::probs, l).to(DType::f64);  // (B, H, T, T)
        const Tensor slot = cache.has(HookPoint::slot, l) ? cache.at(HookPoint::slot, l) : Tensor();  // (B, H, T)
        LayerAnalysis layer;
        layer.layer = l;
        set_shares(layer, head_shares(probs, slot, out.score_fn), out);
        layer.entropy = attention_entropy(probs);
        if (cache.has(HookPoint::gate, l)) {
            const Tensor gate = cache.at(HookPoint::gate, l).to(DType::f64);
            layer.gate_mean = mean(gate).item();
            layer.gate_below_0_1 = mean(lt(gate, full({}, 0.1, DType::f64, gate.device()))).item();
            if (model.config().attn.gate == GatePosition::sdpa_output) {
                // (B, heads, T, width) → per-query gate (B, H, T), shared gates broadcast over heads
                const Tensor per_query = mean(gate, {3}).expand({probs.size(0), probs.size(1), T});
                layer.gated_entropy = gated_attention_entropy(probs, per_query);
            }
        }
        const Tensor hidden = abs(cache.at(HookPoint::resid_post, l).to(DType::f64));  // (B, T, d)
        layer.max_abs_hidden = amax(hidden).item();
        layer.max_abs_hidden_first = amax(hidden.select(1, 0)).item();
        out.mean_first_token_share += layer.mean_first_token_share / measured;
        out.mean_slot_share += layer.mean_slot_share / measured;
        out.mean_row_sum += layer.mean_row_sum / measured;
        out.mean_max_abs_hidden += layer.max_abs_hidden / measured;
        out.sink_layers += layer.sink;
        out.layers.push_back(layer);
    }
    if (out.heads > 0) out.first_token_sink_rate /= double(out.heads), out.slot_sink_rate /= double(out.heads);
    return out;
}

std::string ModelAnalysis::to_json() const {
    nlohmann::ordered_json j = {{"threshold", threshold},
                                {"score_fn", score_function_name(score_fn)},
                                {"mean_first_token_share", mean_first_token_share},
                                {"mean_slot_share", mean_slot_share},
                                {"mean_row_sum", mean_row_sum},
                                {"sink_layers", sink_layers},
                                {"sink_heads", sink_heads},
                                {"heads", heads},
                                {"first_token_sink_rate", first_token_sink_rate},
                                {"slot_sink_rate", slot_sink_rate},
                                {"mean_max_abs_hidden", mean_max_abs_hidden},
                                {"layers", nlohmann::ordered_json::array()}};
    for (const LayerAnalysis& l : layers)
        j["layers"].push_back({{"layer", l.layer},
                               {"first_token_share", l.first_token_share},
                               {"slot_share", l.slot_share},
                               {"row_sum", l.row_sum},
                               {"normalised_first_token_share", l.normalised_first_token_share},
                               {"mean_first_token_share", l.mean_first_token_share},
                               {"mean_slot_share", l.mean_slot_share},
                               {"mean_row_sum", l.mean_row_sum},
                               {"sink", l.sink},
                               {"entropy", l.entropy},
                               {"gated_entropy", l.gated_entropy},
                               {"gate_mean", l.gate_mean},
                               {"gate_below_0_1", l.gate_below_0_1},
                               {"max_abs_hidden", l.max_abs_hidden},
                               {"max_abs_hidden_first", l.max_abs_hidden_first}});
    if (!linear_layers.empty()) j["linear_layers"] = nlohmann::ordered_json::array();  // a hybrid's
    for (const LinearLayerAnalysis& l : linear_layers)
        j["linear_layers"].push_back({{"layer", l.layer},
                                      {"state_norm", l.state_norm},
                                      {"decay", l.decay},
                                      {"mean_state_norm", l.mean_state_norm},
                                      {"mean_decay", l.mean_decay}});
    return j.dump(2);
}

// softmax's table is the one of every model before the other score functions, whose sink rate
// is its count of sink heads; softmax1 and sink add the slot's column, sigmoid and softpick the
// row sum's, and both Gu et al.'s rates on a line of their own.
std::string ModelAnalysis::table() const {
    const bool slot = has_slot(score_fn);
    const bool rows = !is_softmax(score_fn);
    std::string s = std::string("layer  first-token share") + (slot ? "   slot" : "") + (rows ? "  row-sum" : "") +
                    "  sink  entropy  gated-entropy  gate-mean  gate<0.1  max|h|  max|h@0|\n";
    char line[256];
    auto opt = [](double v, const char* fmt) {
        char b[32];
        if (v < 0) return std::string("-");
        std::snprintf(b, sizeof b, fmt, v);
        return std::string(b);
    };
    for (size_t l = 0; l < layers.size(); ++l) {
        const LayerAnalysis& x = layers[l];
        std::snprintf(line, sizeof line, "%5lld  %17.3f", (long long)x.layer, x.mean_first_token_share);
        s += line;
        if (slot) std::snprintf(line, sizeof line, "  %5.3f", x.mean_slot_share), s += line;
        if (rows) std::snprintf(line, sizeof line, "  %7.3f", x.mean_row_sum), s += line;
        std::snprintf(line, sizeof line, "  %4s  %7.3f  %13s  %9s  %8s  %6.1f  %8.1f\n", x.sink ? "yes" : "no",
                      x.entropy, opt(x.gated_entropy, "%.3f").c_str(), opt(x.gate_mean, "%.3f").c_str(),
                      opt(x.gate_below_0_1, "%.3f").c_str(), x.max_abs_hidden, x.max_abs_hidden_first);
        s += line;
    }
    std::string means = "mean first-token share ", heads_above = "alpha";
    std::snprintf(line, sizeof line, "%.3f", mean_first_token_share), means += line;
    if (slot) std::snprintf(line, sizeof line, ", slot share %.3f", mean_slot_share), means += line, heads_above += " or slot";
    if (rows) std::snprintf(line, sizeof line, ", row sum %.3f", mean_row_sum), means += line, heads_above = "normalised alpha";
    std::snprintf(line, sizeof line, "; sink layers %lld of %zu; sink heads (%s > %.2f) %lld of %lld\n",
                  static_cast<long long>(sink_layers), layers.size(), heads_above.c_str(), threshold,
                  static_cast<long long>(sink_heads), static_cast<long long>(heads));
    s += means + line;
    if (score_fn != ScoreFunction::softmax) {
        std::snprintf(line, sizeof line, "sink rate (Gu et al. 2024, heads above %.2f): first token %.1f%%", threshold,
                      100 * first_token_sink_rate);
        s += line;
        if (slot) std::snprintf(line, sizeof line, ", slot %.1f%%", 100 * slot_sink_rate), s += line;
        s += "\n";
    }
    if (linear_layers.empty()) return s;
    // A hybrid's linear layers: their state and how fast it decays, per layer (means over heads).
    s += "linear layer  state norm  decay  (Gated DeltaNet: |S| after the last token, mean alpha over tokens)\n";
    for (const LinearLayerAnalysis& x : linear_layers) {
        std::snprintf(line, sizeof line, "%12lld  %10.3f  %5.3f\n", (long long)x.layer, x.mean_state_norm, x.mean_decay);
        s += line;
    }
    return s;
}

}  // namespace gg::nn

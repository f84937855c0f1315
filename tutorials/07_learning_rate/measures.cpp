// measures.cpp — the variants, a run's trainer config, and the two measures of study.h.
#include <algorithm>
#include <cmath>

#include "study.h"

namespace tutorial {

using namespace gg::nn;

const std::vector<Variant>& variants() {
    static const std::vector<Variant> all{
        {"baseline", false, false}, {"QK-norm", true, false}, {"G1", false, true}, {"G1 + QK-norm", true, true}};
    return all;
}

TrainConfig RunSettings::train_config() const {
    TrainConfig c;
    c.model.n_layers = layers, c.model.d_model = d_model, c.model.attn.n_heads = heads;
    c.model.attn.qk_norm = variant.qk_norm;
    c.model.attn.gate = variant.gated ? GatePosition::sdpa_output : GatePosition::none;
    c.model.max_len = c.seq_len = seq_len;
    c.batch_size = batch, c.steps = steps, c.warmup = warmup, c.lr = lr, c.seed = seed;
    c.grad_clip = clip, c.weight_decay = weight_decay, c.independent_weight_decay = independent_wd, c.z_loss = z_loss;
    c.probe_every = probe_every;
    c.precision = precision;
    c.eval_every = 0;  // validate once, at the end
    return c;
}

int64_t count_spikes(const std::vector<double>& loss) {
    constexpr size_t kWindow = 20;
    constexpr double kNats = 1.0;
    int64_t spikes = 0;
    bool in_spike = false;
    for (size_t t = 1; t < loss.size(); ++t) {
        const size_t from = t > kWindow ? t - kWindow : 0;
        const double running_min = *std::min_element(loss.begin() + from, loss.begin() + t);
        const bool over = loss[t] > running_min + kNats;
        spikes += over && !in_spike;
        in_spike = over;
    }
    return spikes;
}

double lr_sensitivity(const std::vector<double>& final_loss, double initial_loss) {
    std::vector<double> capped;  // min(ℓ_η, ℓ_0); a NaN (diverged) run learned nothing: ℓ_0
    for (double l : final_loss) capped.push_back(std::isfinite(l) ? std::min(l, initial_loss) : initial_loss);
    if (capped.empty()) return NAN;
    const double best = *std::min_element(capped.begin(), capped.end());
    double total = 0;
    for (double l : capped) total += l - best;
    return total / double(capped.size());
}

}  // namespace tutorial

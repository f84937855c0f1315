// high_rate.cpp — tutorial 15, part (b): tutorial 07's 8-layer LM on text at a learning rate
// too high for its baseline, as full attention and as the 3:1 hybrid.
//
// Tutorial 07 found the baseline's attention logits q·k/√dk growing by orders of magnitude at
// such rates, and G1 holding the loss lower. The hybrid has two softmax layers of eight (3 and
// 7); its six Gated DeltaNet layers normalise their queries and keys (L2) and have no logits to
// grow. We read the final validation loss, and on the full-attention layers the largest logit
// (from the row statistic, measure_stability, nn/analysis/stability.h) and G1's mean gate.
//
// At this rate the full baseline leans on BOS (tutorial 14, part (d)), so here the sink
// question of part (a) has a control that sinks. On the full-attention layers we read:
//   BOS share  the attention weight on position 0, over the queries of a validation batch
//              (analyze()'s first-token share, nn/analysis/analysis.h), per layer, and for the
//              full models on layers 3 and 7 alone, the ones the hybrid keeps full, so that the
//              two compare layer for layer
//   BOS cost   the loss past a 16-position cache with BOS dropped minus with it kept
//              (common/eviction.h). In a hybrid only the full layers' caches drop anything:
//              the Gated DeltaNet layers carry their whole state, in which BOS was folded
//              at the start and decays like any other token. So the full models are read a
//              second way too, windowed on layers 3 and 7 alone, every other layer keeping the
//              whole text: the hybrid's condition. If that still costs them, a hybrid's zero
//              is its softmax layers' doing, not its linear layers' memory. For a hybrid the
//              second reading is the first (layers 3 and 7 are its full layers): computed
//              anyway, it must give the same digits.
#include <cmath>
#include <memory>

#include "common/results.h"
#include "common/timing.h"
#include "hybrid.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace hybrid {

std::string train_high_rate(const RunSettings& settings, const Eviction& eviction, const Architecture& arch) {
    const auto data = std::make_shared<const TextDataset>(load_documents({kDefaultCorpus}));
    TrainConfig c = settings.train_config();
    c.probe_every = 0;  // measured once, at the end
    arch.apply(c.model);
    const auto start = Clock::now();
    Trainer trainer(c, data);
    const TrainResult r = trainer.run(/*quiet=*/true);
    trainer.model().eval();
    const Tensor ids = data->val_batch(0, settings.batch, settings.seq_len).inputs;  // (B, T)
    const StabilityStats s = measure_stability(trainer.model(), ids);
    const double logit = s.largest_attn_logit();
    const double gate = s.gate_mean.empty() ? NAN : average(s.gate_mean);
    const ModelAnalysis a = analyze(trainer.model(), ids);  // its full-attention layers only
    const std::vector<LayerType> kept_full = hybrid_layer_types(kRatio, c.model.n_layers);
    std::vector<int64_t> layers, hybrid_full;  // the model's full layers; the hybrid's
    std::vector<double> share, share_kept;     // per full layer; on those the hybrid keeps full
    for (int64_t l = 0; l < c.model.n_layers; ++l)
        if (kept_full[size_t(l)] == LayerType::full_attention) hybrid_full.push_back(l);
    for (const LayerAnalysis& layer : a.layers) {
        layers.push_back(layer.layer);
        share.push_back(layer.mean_first_token_share);
        if (kept_full[size_t(layer.layer)] == LayerType::full_attention) share_kept.push_back(layer.mean_first_token_share);
    }
    const auto bos_cost = [](const json& cached) {
        return json_number(cached["loss_past_cache_first_dropped"]) - json_number(cached["loss_past_cache_first_kept"]);
    };
    json cached = eviction_losses(trainer.model(), *data, eviction, /*latent=*/false);
    Eviction on_hybrid_full = eviction;
    on_hybrid_full.windowed = hybrid_full;
    const json cached_hybrid_full = eviction_losses(trainer.model(), *data, on_hybrid_full, /*latent=*/false);
    const double cost = bos_cost(cached), cost_hybrid_full = bos_cost(cached_hybrid_full);
    const double seconds = seconds_since(start);
    std::printf("  %-16s seed %llu: val loss %.4f, largest attention logit %9.3g, gate %s; on BOS %.3f (on the "
                "hybrid's full layers %.3f), dropping it costs %+.4f (from the hybrid's full layers alone %+.4f) "
                "(%.0f s)\n",
                arch.name.c_str(), (unsigned long long)settings.seed, r.final_val_loss, logit,
                format_or_dash("%.3f", gate).c_str(), a.mean_first_token_share, average(share_kept), cost,
                cost_hybrid_full, seconds);
    json result{{"val_loss", r.final_val_loss},
                {"diverged", r.diverged},
                {"largest_attention_logit", logit},
                {"gate", gate},
                {"bos_share", a.mean_first_token_share},
                {"bos_share_hybrid_full_layers", average(share_kept)},
                {"full_layers", layers},
                {"bos_share_per_full_layer", share},
                {"bos_cost", cost},
                {"bos_cost_hybrid_full_layers", cost_hybrid_full},
                {"eviction_hybrid_full_layers", cached_hybrid_full}};
    result.update(cached);
    result["seconds"] = seconds;
    return result.dump();
}

}  // namespace hybrid

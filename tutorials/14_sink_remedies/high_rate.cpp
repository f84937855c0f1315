// high_rate.cpp — tutorial 14, parts (b) and (c): each remedy in tutorial 07's setting, the
// 8-layer LM on text at a learning rate too high for the baseline.
//
// (b) Tutorial 07 found the baseline's attention logits q·k/√dk growing by orders of magnitude
//     at such rates, and QK-norm holding them (Wortsman et al. 2023, arXiv 2309.14322). We read
//     the final validation loss and the largest logit: for softmax's family from the row
//     statistic, as 07 does (measure_stability, nn/analysis/stability.h); for sigmoid and
//     softpick, which have no such statistic, at the scores hook (nn/hooks.h), where the plain
//     attention computes the same q·k/√dk (latent attention has no scores hook).
// (c) The largest activation |h| of any block's output, analyze()'s max |h| (the massive
//     activations of Sun et al. 2024, arXiv 2402.17762, which the paper's gate shrinks from
//     1053 to 94: docs/paper.md), and the report's first-token and slot shares of these models.
// (d) The same models on text through the rolling cache (common/eviction.cpp): 8 layers, where a head
//     that loses its sink passes what it reads instead to the layers above.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "common/results.h"
#include "common/timing.h"
#include "nn/analysis/activation_cache.h"
#include "remedies.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace sink_remedies {

namespace {

// The largest q·k/√dk any query gives a key it sees, over layers, heads and the batch ids (B, T).
double largest_attention_logit(const GatedTransformerLM& model, const Remedy& remedy, const Tensor& ids) {
    NoGradGuard no_grad;
    if (is_softmax(remedy.score_fn)) return measure_stability(model, ids).largest_attn_logit();
    double largest = -INFINITY;
    Hooks hooks;
    hooks.read(HookPoint::scores, [&](const Tensor& scores, int64_t) {  // (B, H, T, T), −∞ where masked
        for (float s : scores.to_vector<float>())
            if (std::isfinite(s)) largest = std::max(largest, double(s));
    });
    run_with_hooks(model, ids, hooks);
    return largest;
}

}  // namespace

std::string train_high_rate(const RunSettings& settings, const Eviction& eviction, const Remedy& remedy) {
    const auto data = std::make_shared<const TextDataset>(load_documents({kDefaultCorpus}));
    TrainConfig c = settings.train_config();
    c.probe_every = 0;  // 07's probes read softmax's row statistic; we measure at the end instead
    remedy.apply(c.model);
    const auto start = Clock::now();
    Trainer trainer(c, data);
    const TrainResult r = trainer.run(/*quiet=*/true);
    trainer.model().eval();
    const Tensor ids = data->val_batch(0, settings.batch, settings.seq_len).inputs;  // (B, T)
    const double logit = largest_attention_logit(trainer.model(), remedy, ids);
    const ModelAnalysis a = analyze(trainer.model(), ids);
    double max_hidden = 0;
    for (const LayerAnalysis& layer : a.layers) max_hidden = std::max(max_hidden, layer.max_abs_hidden);
    const json cached = eviction_losses(trainer.model(), *data, eviction, remedy.latent);
    const double seconds = seconds_since(start);
    std::printf("  %-14s seed %llu: val loss %.4f, largest attention logit %9.3g, max |h| %.1f; past the cache "
                "%.4f with BOS dropped, %.4f kept (%.0f s)\n",
                remedy.name.c_str(), (unsigned long long)settings.seed, r.final_val_loss, logit, max_hidden,
                json_number(cached["loss_past_cache_first_dropped"]), json_number(cached["loss_past_cache_first_kept"]),
                seconds);
    json result{{"val_loss", r.final_val_loss},
                {"diverged", r.diverged},
                {"largest_attention_logit", logit},
                {"max_abs_hidden", max_hidden},
                {"mean_max_abs_hidden", a.mean_max_abs_hidden},
                {"first_token_share", a.mean_first_token_share},
                {"slot_share", a.mean_slot_share},
                {"row_sum", a.mean_row_sum},
                {"sink_heads", a.sink_heads},
                {"heads", a.heads}};
    result.update(cached);
    result["seconds"] = seconds;
    return result.dump();
}

}  // namespace sink_remedies

// idle_queries.cpp — tutorial 14, parts (a) and (d): where a head's idle weight goes under
// each remedy, and what losing the first token costs it.
//
// (a) Bigram-Backcopy (tutorial 06, copy_task.h): only the queries at trigger tokens need to
//     read (one token back, to copy it); every other query is idle. Under softmax an idle
//     query must still spend a weight of 1, and parks it on BOS: α near 1. Each remedy offers
//     another way out, and one number alone misses some of them:
//       α          the weight on BOS (key 0), as the weights stand
//       slot       softmax1 and sink: 1 − Σ_j w_j, the weight the slot took. A sink moved to a
//                  learned slot is still a sink (Gu et al. 2024, arXiv 2410.10781, Table 4)
//       row sum    Σ_j w_j: 1 for softmax, below 1 where a slot or sigmoid/softpick let the
//                  head spend less; with it α/row sum, Gu et al.'s share of an unnormalised row
//       gate       G1's σ(x W_g) at the idle query, near 0 when the head closes instead
// (d) The same models read through a KV cache that drops old positions (rolling_cache_loss,
//     nn/analysis/text_loss.h; StreamingLLM, arXiv 2309.17453): with keep_first 0 BOS leaves
//     the cache after `cache` tokens, with keep_first 1 it stays. The task's best loss is the
//     same at every position, so the loss past the cache minus the loss within it is what the
//     eviction costs.
#include <cmath>
#include <memory>
#include <vector>

#include "common/results.h"
#include "common/timing.h"
#include "remedies.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace sink_remedies {

CopySetup idle_setup(bool quick) {
    CopySetup s = strong_sink();
    // 06's strong sink trains 2000 steps, where its baselines' α passed 0.7 by step 500 on most
    // seeds; 600 here, to fit nine models and five seeds on two cores in about half an hour.
    s.steps = quick ? 300 : 600, s.warmup = quick ? 15 : 30, s.points = 1;
    return s;
}

namespace {

// Mean loss per token within the cache (stream positions 2 … cache − 1) and past it (≥ cache),
// over `sequences` validation sequences of the task read one token at a time. Position 1, the
// first token after BOS, has no token before it to predict from: it is left out.
std::pair<double, double> cached_loss(const GatedTransformerLM& model, const BigramBackcopy& data, const Eviction& e,
                                      int64_t keep_first) {
    double within = 0, past = 0;
    int64_t n_within = 0, n_past = 0;
    for (int64_t i = 0; i < e.sequences; ++i) {
        // the sequence's BOS and tokens, (1, length); its batches are not the ones measured in (a)
        const std::vector<int64_t> ids = data.val_batch(100 + i, 1, e.length).inputs.to_vector<int64_t>();
        const std::vector<double> nll = rolling_cache_loss(model, ids, {.cache = e.cache, .keep_first = keep_first});
        for (size_t k = 1; k < nll.size(); ++k) {  // nll[k] is stream position k + 1
            const bool after = int64_t(k) + 1 >= e.cache;
            (after ? past : within) += nll[k];
            ++(after ? n_past : n_within);
        }
    }
    return {within / double(n_within), past / double(n_past)};
}

}  // namespace

std::string train_idle(const CopySetup& setup, const Eviction& eviction, const Remedy& remedy, int64_t seed) {
    const auto data = std::make_shared<BigramBackcopy>(task_options(setup));
    TrainConfig c = copy_config(setup, {1, 1}, GatePosition::none, seed);
    remedy.apply(c.model);
    const auto start = Clock::now();
    Trainer trainer(c, data);
    trainer.run(/*quiet=*/true);
    const GatedTransformerLM& model = trainer.model();
    trainer.model().eval();
    const CopyReport r = measure_copy(model, *data, 4, c.batch_size, c.seq_len);
    const QueryClass& idle = r.other;
    const auto [within, past_dropped] = cached_loss(model, *data, eviction, 0);
    // A latent attention cache cannot keep its first positions (MultiHeadLatentAttention refuses).
    const double past_kept = remedy.latent ? NAN : cached_loss(model, *data, eviction, 1).second;
    const double seconds = seconds_since(start);
    std::printf("  %-14s seed %lld: alpha %.3f, row sum %.3f at idle queries; copies %.3f (%.0f s)\n",
                remedy.name.c_str(), (long long)seed, idle.mean_all(idle.alpha), idle.mean_all(idle.row_sum),
                r.trigger.hits / r.trigger.count, seconds);
    return json{{"alpha", idle.mean_all(idle.alpha)},
                {"alpha_normalised", idle.mean_all(idle.alpha_normalised)},
                {"row_sum", idle.mean_all(idle.row_sum)},
                {"slot", has_slot(remedy.score_fn) ? 1 - idle.mean_all(idle.row_sum) : 0.0},
                {"gate", r.gated ? idle.mean_all(idle.gate) : NAN},
                {"alpha_times_gate", idle.mean_all(idle.alpha_gated)},
                {"copy_accuracy", r.trigger.hits / r.trigger.count},
                {"idle_excess_loss", (idle.loss - idle.oracle_loss) / idle.count},
                {"loss_within_cache", within},
                {"loss_past_cache_first_dropped", past_dropped},
                {"loss_past_cache_first_kept", past_kept},
                {"seconds", seconds}}
        .dump();
}

}  // namespace sink_remedies

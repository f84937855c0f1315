// idle_queries.cpp — tutorial 14, part (a): where a head's idle weight goes under each remedy.
//
// Bigram-Backcopy (tutorial 06, copy_task.h): only the queries at trigger tokens need to read
// (one token back, to copy it); every other query is idle. Under softmax an idle query must
// still spend a weight of 1, and parks it on BOS: α near 1. Each remedy offers another way out,
// and one number alone misses some of them:
//   α          the weight on BOS (key 0), as the weights stand
//   slot       softmax1 and sink: 1 − Σ_j w_j, the weight the slot took. A sink moved to a
//              learned slot is still a sink (Gu et al. 2024, arXiv 2410.10781, Table 4)
//   row sum    Σ_j w_j: 1 for softmax, below 1 where a slot or sigmoid/softpick let the head
//              spend less; with it α/row sum, Gu et al.'s share of an unnormalised row
//   gate       G1's σ(x W_g) at the idle query, near 0 when the head closes instead
// Then part (d) reads the same model through the rolling cache (common/eviction.cpp).
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

std::string train_idle(const CopySetup& setup, const Eviction& eviction, const Remedy& remedy, int64_t seed) {
    const auto start = Clock::now();
    const TrainedCopy t = train_and_measure(setup, {1, 1}, seed, [&](LMConfig& m) { remedy.apply(m); });
    const CopyReport& r = t.report;
    const QueryClass& idle = r.other;
    const json cached = eviction_losses(t.model(), *t.data, eviction, remedy.latent);
    const double seconds = seconds_since(start);
    std::printf("  %-14s seed %lld: alpha %.3f, row sum %.3f at idle queries; copies %.3f (%.0f s)\n",
                remedy.name.c_str(), (long long)seed, idle.mean_all(idle.alpha), idle.mean_all(idle.row_sum),
                r.trigger.hits / r.trigger.count, seconds);
    json result{{"alpha", idle.mean_all(idle.alpha)},
                {"alpha_normalised", idle.mean_all(idle.alpha_normalised)},
                {"row_sum", idle.mean_all(idle.row_sum)},
                {"slot", has_slot(remedy.score_fn) ? 1 - idle.mean_all(idle.row_sum) : 0.0},
                {"gate", r.gated ? idle.mean_all(idle.gate) : NAN},
                {"alpha_times_gate", idle.mean_all(idle.alpha_gated)},
                {"copy_accuracy", r.trigger.hits / r.trigger.count},
                {"idle_excess_loss", (idle.loss - idle.oracle_loss) / idle.count}};
    result.update(cached);
    result["seconds"] = seconds;
    return result.dump();
}

}  // namespace sink_remedies

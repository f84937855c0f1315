// copy_task.cpp — tutorial 15, part (a): the sink on a hybrid's full-attention layer.
//
// Bigram-Backcopy (tutorial 06, copy_task.h): only the queries at trigger tokens need to read
// (one token back, to copy it); every other query is idle, and a softmax head parks an idle
// query's weight on BOS: α near 1. Four layers of one head: the hybrid has three Gated DeltaNet
// layers and one softmax layer (layer 3). A linear layer has no weights that must sum to 1, so
// it needs no sink; the question is whether the one softmax layer left still makes one, and
// whether G1 still closes instead. The control has its one softmax layer in the same place and
// FFNs alone before it: nothing else can copy, so that layer copies alone and idles everywhere
// else, as a one-layer model does (which sinks, tutorial 14). Four layers of full attention are
// no control here: they spread the copy over layers and none sinks (the README). The depth and
// the softmax layer's place are options (CopyLayout), since whether the control sinks may depend
// on what comes before that layer. Measured at the idle queries of the softmax layer:
//   top-1      the largest weight over the keys, whichever key it is: a query that parks on one
//              key (a sink, on BOS or elsewhere) near 1, one that spreads near 1/(t+1)
//   self, previous  the weight on the query's own key t and on key t − 1: with α, which key
//   α          the weight on BOS (key 0)
//   top ‖v‖    the top key's ‖v‖ over the mean ‖v‖ of the query's other keys: a sink's is small
//   gate       G1's σ(x W_g) at the idle query, near 0 when the head closes instead
//   α · gate   the share of what reaches W_O that comes from BOS
// and at the trigger queries the share the model copies right and the softmax layer's weight
// on key t − 1, the token to copy: near 1 where that layer does the copying, low where another
// layer (a hybrid's Gated DeltaNet, whose convolution sees the previous token) does it instead
// and the softmax layer idles at every query;
// and, over the linear layers, their mean decay α_t = e^{g_t} (analyze(), nn/analysis/analysis.h):
// near 1 a long memory, near 0 one that forgets at once.
#include <cmath>
#include <memory>
#include <vector>

#include "common/results.h"
#include "common/timing.h"
#include "hybrid.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace hybrid {

CopySetup copy_setup(bool quick) {
    CopySetup s = strong_sink();
    s.models = {"4x1"};
    // 06's strong sink trains 2000 steps, where its one-layer baselines' α passed 0.7 by step
    // 500 on most seeds; 600 here, as tutorial 14 trains its one-layer models.
    s.steps = quick ? 100 : 600, s.warmup = quick ? 5 : 30, s.points = 1, s.seeds = quick ? 1 : 2;
    return s;
}

std::string train_copy(const CopySetup& setup, const CopyLayout& layout, const Architecture& arch, int64_t seed) {
    const auto start = Clock::now();
    const TrainedCopy t = train_and_measure(setup, {layout.layers, 1}, seed,
                                            [&](LMConfig& m) { arch.apply(m, layout.softmax_layer); });
    const CopyReport& r = t.report;
    const QueryClass& idle = r.other;
    std::vector<double> alpha_per_layer;  // per full-attention layer, its one head
    for (int64_t l = 0; l < r.L; ++l) alpha_per_layer.push_back(r.layer_mean(idle, idle.alpha, l));
    const ModelAnalysis a = analyze(t.model(), t.data->val_batch(0, t.config.batch_size, t.config.seq_len).inputs);
    double decay = 0;
    for (const LinearLayerAnalysis& layer : a.linear_layers) decay += layer.mean_decay / double(a.linear_layers.size());
    const double seconds = seconds_since(start);
    const double top_value = idle.mean_all(idle.value_top) / idle.mean_all(idle.value_rest);
    std::printf("  %-16s seed %lld: top-1 %.3f (self %.3f, previous %.3f, alpha %.3f), top key's |v| / others' %.2f, "
                "gate %s at idle queries; copies %.3f (t - 1 at triggers %.3f) (%.0f s)\n",
                arch.name.c_str(), (long long)seed, idle.mean_all(idle.top), idle.mean_all(idle.self),
                idle.mean_all(idle.previous), idle.mean_all(idle.alpha), top_value,
                format_or_dash("%.3f", r.gated ? idle.mean_all(idle.gate) : NAN).c_str(), r.trigger.hits / r.trigger.count,
                r.trigger.mean_all(r.trigger.previous), seconds);
    return json{{"top1", idle.mean_all(idle.top)},
                {"self", idle.mean_all(idle.self)},
                {"previous", idle.mean_all(idle.previous)},
                {"top_value_ratio", top_value},
                {"alpha", idle.mean_all(idle.alpha)},
                {"alpha_last_layer", alpha_per_layer.back()},
                {"alpha_per_full_layer", alpha_per_layer},
                {"full_layers", r.layers},
                {"gate", r.gated ? idle.mean_all(idle.gate) : NAN},
                {"alpha_times_gate", idle.mean_all(idle.alpha_gated)},
                {"copy_accuracy", r.trigger.hits / r.trigger.count},
                {"trigger_previous", r.trigger.mean_all(r.trigger.previous)},
                {"idle_excess_loss", (idle.loss - idle.oracle_loss) / idle.count},
                {"linear_decay", a.linear_layers.empty() ? NAN : decay},
                {"seconds", seconds}}
        .dump();
}

}  // namespace hybrid

// high_rate.cpp — tutorial 15, part (b): tutorial 07's 8-layer LM on text at a learning rate
// too high for its baseline, as full attention and as the 3:1 hybrid.
//
// Tutorial 07 found the baseline's attention logits q·k/√dk growing by orders of magnitude at
// such rates, and G1 holding the loss lower. The hybrid has two softmax layers of eight (3 and
// 7); its six Gated DeltaNet layers normalise their queries and keys (L2) and have no logits to
// grow. We read the final validation loss, and on the full-attention layers the largest logit
// (from the row statistic, measure_stability, nn/analysis/stability.h) and G1's mean gate.
#include <cmath>
#include <memory>

#include "common/results.h"
#include "common/timing.h"
#include "hybrid.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace hybrid {

std::string train_high_rate(const RunSettings& settings, const Architecture& arch) {
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
    const double seconds = seconds_since(start);
    std::printf("  %-16s seed %llu: val loss %.4f, largest attention logit %9.3g, gate %s (%.0f s)\n",
                arch.name.c_str(), (unsigned long long)settings.seed, r.final_val_loss, logit,
                format_or_dash("%.3f", gate).c_str(), seconds);
    return json{{"val_loss", r.final_val_loss},
                {"diverged", r.diverged},
                {"largest_attention_logit", logit},
                {"gate", gate},
                {"seconds", seconds}}
        .dump();
}

}  // namespace hybrid

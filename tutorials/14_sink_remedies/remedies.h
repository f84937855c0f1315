// remedies.h — what the files of tutorial 14 share: the nine models (one per answer the field
// gives to the attention sink, docs/paper.md "The remedies for the sink, side by side"), and
// what the two trainings of each model give back.
//   idle_queries.cpp  part (a): Bigram-Backcopy (tutorial 06), where the idle weight goes
//   high_rate.cpp     parts (b) and (c): tutorial 07's LM at a too-high rate, its final loss,
//                     largest attention logit and largest activation
//   common/eviction.cpp  part (d): both models read through a rolling KV cache, with and
//                     without the first token (shared with tutorial 15)
//   table.cpp         the means over seeds, the one table beside the literature, the files
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "06_attention_sink/copy_task.h"
#include "07_learning_rate/study.h"
#include "common/eviction.h"
#include "gatedgrad.h"

namespace sink_remedies {

// One model: the attention's settings that differ from the baseline's; all else is the part's.
struct Remedy {
    std::string name;
    gg::nn::GatePosition gate = gg::nn::GatePosition::none;
    bool qk_norm = false;
    gg::ScoreFunction score_fn = gg::ScoreFunction::softmax;
    bool latent = false;  // multi-head latent attention (nn/mla.h), a latent of a quarter of the width

    // Which weights sum to 1 and which leave part to a slot: is_softmax and has_slot of
    // score_fn (tensor/score_functions.h).
    void apply(gg::nn::LMConfig& model) const;
};
const std::vector<Remedy>& remedies();

// Part (a)'s setup: 06's strong sink (a3: lr 1e-2, weight decay 0.1, one layer of one head),
// shorter.
CopySetup idle_setup(bool quick);

// Part (d): each trained model, (a)'s and (b)'s, read through a rolling KV cache
// (common/eviction.h).
using tutorial::Eviction;

// Parts (a) and (d), one model, in a child process: trains it, then returns as JSON where its
// idle (non-trigger) queries put their weight, what its trigger queries copy, and its loss
// within and past the rolling cache with keep_first 0 and 1.
std::string train_idle(const CopySetup& setup, const Eviction& eviction, const Remedy& remedy, int64_t seed);

// Parts (b), (c) and (d), one model, in a child process: 07's LM (study.h's RunSettings) trained
// at `settings.lr`; returns as JSON its final validation loss, its largest attention logit
// q·k/√dk and its largest activation |h| (analyze()'s report) on validation batches, and its
// loss through the rolling cache with and without BOS.
std::string train_high_rate(const tutorial::RunSettings& settings, const Eviction& eviction, const Remedy& remedy);

// The report: every part's means over seeds, the table beside the literature, and (unless `out`
// is empty) results.json there. idle[r][s], high[r][s]: remedy r, seed s + 1, as the children
// returned them (high may be empty: part (a) only).
struct Runs {
    CopySetup setup;
    Eviction eviction;
    tutorial::RunSettings high_rate;
    std::vector<std::vector<std::string>> idle, high;
};
void report(const Runs& runs, const std::string& out);

}  // namespace sink_remedies

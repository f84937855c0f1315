// hybrid.h — what the files of tutorial 15 share: the models (full attention, and the 3:1
// hybrid of Qwen3-Next and Qwen3.5, with and without the G1 gate on its full layers), and what
// each part gives back.
//   copy_task.cpp   part (a): Bigram-Backcopy (tutorial 06), the sink and the gate on the
//                   full-attention layers
//   high_rate.cpp   part (b): tutorial 07's LM at a too-high rate, its loss, largest logit,
//                   sink on BOS and what dropping BOS from the caches costs
//   throughput.cpp  part (c): tokens/s and decoding memory against the sequence length
//   table.cpp       the means over seeds, the one table, the files
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "06_attention_sink/copy_task.h"
#include "07_learning_rate/study.h"
#include "common/eviction.h"
#include "gatedgrad.h"

namespace hybrid {

// Qwen3-Next's and Qwen3.5's ratio: three linear layers before each full one.
inline constexpr const char* kRatio = "3:1";

// One model: which layers mix tokens how, and whether the full-attention layers have G1. The
// linear layers are Gated DeltaNet (nn/gated_deltanet.h), whose own output gate, RMSNorm(o) ⊙
// SiLU(x W_z), every hybrid keeps: "no G1" removes only the full-attention layers' gate.
struct Architecture {
    std::string name;
    // The three layers before each full one (n_layers a multiple of 4): full attention too
    // (every layer full), linear_attention (the 3:1 hybrid), or feed_forward, the FFN alone
    // (part (a)'s control: one softmax layer where the hybrid has it, and nothing else that
    // can copy).
    gg::nn::LayerType others = gg::nn::LayerType::full_attention;
    bool gated = false;  // G1, σ(x W_g) on each head's output, on the full-attention layers
    void apply(gg::nn::LMConfig& model) const;
    // Part (a)'s form: one softmax layer, at `softmax_layer`, and `others` at every other layer.
    void apply(gg::nn::LMConfig& model, int64_t softmax_layer) const;
};
// Parts (b) and (c): the full-attention baseline (no G1), full attention with G1 (the paper's
// setting), the hybrid with G1 and the hybrid without it.
const std::vector<Architecture>& architectures();
// Part (a): the control, FFN-only layers around the hybrid's one softmax layer (no G1: the
// sink the harness must see), the control with G1 (the known fix), and the two hybrids.
const std::vector<Architecture>& copy_architectures();

// Part (a)'s depth and where its one softmax layer sits: by default four layers, the softmax
// one last, as in the hybrid (--copy-layers, --softmax-layer: the control's sink may depend
// on what comes before and after that layer).
struct CopyLayout {
    int64_t layers = 4;
    int64_t softmax_layer = 3;
    std::string text(const Architecture& a) const;  // e.g. "[full, feed_forward, feed_forward]"
};

// Part (a)'s setup: 06's strong sink (a3: lr 1e-2, weight decay 0.1, one head) on four layers,
// shorter.
CopySetup copy_setup(bool quick);

// Part (a), one model, in a child process: trains it, then returns as JSON where the idle
// (non-trigger) queries of its full-attention layers put their weight, their gate, what the
// trigger queries copy, and the linear layers' mean decay (analyze()).
std::string train_copy(const CopySetup& setup, const CopyLayout& layout, const Architecture& arch, int64_t seed);

// Part (b), one model, in a child process: 07's LM at `settings.lr`; returns as JSON its final
// validation loss, its full-attention layers' largest logit q·k/√dk, mean gate and share of
// attention on BOS (on the layers the hybrid keeps full too), and what dropping BOS from those
// layers' KV caches costs it (tutorial 14's part (d), common/eviction.h).
std::string train_high_rate(const tutorial::RunSettings& settings, const tutorial::Eviction& eviction,
                            const Architecture& arch);

// Part (c), in a child process, alone: (b)'s full-attention and hybrid models (untrained: the
// work does not depend on the weights) timed on one sequence of T tokens, T = 256 … max_t,
// and their decoding caches measured after reading it. Returns the rows as JSON.
struct Throughput {
    int64_t max_t = 4096;
    int64_t max_backward_t = 2048;  // forward and backward up to here (full attention keeps B·H·T² weights per layer)
    int64_t reps = 3;
};
std::string measure_throughput(const tutorial::RunSettings& settings, const Throughput& options);

// The report: every part's means over seeds, the tables, and (unless `out` is empty)
// results.json there. copy[m][s]: copy_architectures()[m] (all of them, or the two controls
// alone), high[m][s]: architectures()[m], seed s + 1, as the children returned them (either
// empty where its part did not run); throughput: (c)'s JSON or empty.
struct Runs {
    CopySetup setup;
    CopyLayout layout;
    tutorial::RunSettings high_rate;
    tutorial::Eviction eviction;
    std::vector<std::vector<std::string>> copy, high;
    std::string throughput;
};
void report(const Runs& runs, const std::string& out);

}  // namespace hybrid

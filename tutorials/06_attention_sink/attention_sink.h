// attention_sink.h — what the files of tutorial 06 share: how a next-token prediction is
// scored, part (a)'s training setups, and the two parts' trainings and reports.
//
// Every training runs in a child process (two at a time, common/processes.h) and leaves its
// model in a checkpoint; the parent then loads each model, measures it and prints the tables.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gatedgrad.h"

// Cross-entropy and argmax hit of every position: logits (B, T, V), targets (B, T).
struct TokenScores {
    std::vector<double> loss;  // (B·T) nats
    std::vector<bool> hit;     // (B·T)
};
TokenScores score_tokens(const gg::Tensor& logits, const gg::Tensor& targets);

// One training, run in a child process: it trains, saves the model to `checkpoint`, and
// returns what it measured along the way as JSON text.
struct TrainingJob {
    std::string checkpoint;
    std::function<std::string()> run;
};

// Part (a)'s training setup. The task first (nn/train/synthetic.h), then the models and
// their training. The full run trains two setups: (a1) the ordinary causal mask on the task's
// common form, and (a2), the contrast, each query's own key hidden on the 4-successor task.
struct CopySetup {
    std::string name;  // "a1" or "a2": the files' prefix
    // the task: concentration > 0 draws each row of the chain from Dirichlet(concentration)
    // over all 64 tokens; 0 gives each token `successors` likely successors
    double concentration = 0.3;
    int64_t successors = 4, triggers = 4;
    // the models: layers x heads, e.g. "1x1"; width; SwiGLU FFN or attention only; init
    std::vector<std::string> models{"1x1"};
    int64_t d_model = 64;
    bool ffn = true;
    gg::nn::LMInit init = gg::nn::LMInit::gpt2;
    gg::nn::PositionEncoding positions = gg::nn::PositionEncoding::rope;
    bool exclude_self = false;  // hide each query's own key
    // the training: seeds 1 … seeds, each a baseline and a G1 model on the same batches
    int64_t seeds = 2, steps = 2000, batch = 64, seq_len = 64, warmup = 100;
    double lr = 3e-3, weight_decay = 0;
    int64_t points = 20;  // measurements along the way
};

// The settings the command line may change in every setup that runs (--a-steps, ...), one row
// each, as the library describes its own (nn/config_fields.h): copy_task.cpp.
const gg::nn::Fields<CopySetup>& copy_setup_fields();

// (a1): the common form of the task under the ordinary causal mask.
inline CopySetup ordinary_mask() { return {.name = "a1"}; }
// (a2): the contrast — own key hidden, 4 successors, 3 triggers, attention only, 16 tokens.
inline CopySetup own_key_hidden() {
    return {.name = "a2", .concentration = 0, .triggers = 3, .models = {"1x1", "1x4"}, .ffn = false,
            .exclude_self = true, .seeds = 1, .seq_len = 16, .warmup = 30};
}
// (a3): (a1) with a larger rate and weight decay, which make sinks form sooner and stronger
// (Gu et al. 2024, arXiv 2410.10781): the strong sink of the main demo, on five seeds.
inline CopySetup strong_sink() { return {.name = "a3", .seeds = 5, .lr = 1e-2, .weight_decay = 0.1}; }

// Part (a), copy_task*.cpp (copy_task.h): the trainings of a setup (a baseline and a G1 model
// per shape and seed), then, once they have run, the tables and (unless `out` is empty) the files.
// `demo` prints only the main table, the α curve and one attention map of each model as text.
std::vector<TrainingJob> copy_task_jobs(const CopySetup& setup, const std::string& scratch);
void copy_task_report(const CopySetup& setup, const std::vector<std::string>& results, bool demo,
                      const std::string& out);

// Part (b), natural_text.cpp: the tiny preset on natural text, baseline and G1 at two
// learning rates; then analyze()'s report and the sliding-window test. `quick`: a few steps.
std::vector<TrainingJob> natural_text_jobs(bool quick, const std::string& scratch);
void natural_text_report(bool quick, const std::vector<std::string>& results, const std::string& out);

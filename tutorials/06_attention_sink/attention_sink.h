// attention_sink.h — what the files of tutorial 06 share: how a next-token prediction is
// scored, part (a)'s training setups, and the entry points of its two parts.
#pragma once
#include <string>
#include <vector>

#include "gatedgrad.h"

// Cross-entropy and argmax hit of every position: logits (B, T, V), targets (B, T).
struct TokenScores {
    std::vector<double> loss;  // (B·T) nats
    std::vector<bool> hit;     // (B·T)
};
TokenScores score_tokens(const gg::Tensor& logits, const gg::Tensor& targets);

// Part (a)'s training setup. The full run trains two: (a1) with the standard causal mask,
// and (a2) with each query's own key hidden (SdpaOptions::exclude_self), on shorter
// sequences and without weight decay — the setup in which the baseline does sink on BOS.
struct CopySetup {
    std::string name;                                      // "a1" or "a2": the files' prefix
    std::vector<std::string> models{"1x4", "2x4", "1x1"};  // layers x heads
    int64_t steps = 1000, batch = 16, seq_len = 64, points = 10;  // points: measurements along the way
    double lr = 3e-3, weight_decay = 0.1;
    bool ffn = false;
    bool exclude_self = false;
    std::string positions = "rope";  // or "learned"
};

inline CopySetup own_token_visible() { return {.name = "a1"}; }
inline CopySetup own_token_hidden() {
    return {.name = "a2", .steps = 2000, .batch = 64, .seq_len = 16, .weight_decay = 0.0, .exclude_self = true};
}

// Part (a), copy_task.cpp: a baseline and a G1 model of every shape in `setup`, trained on
// Bigram-Backcopy and measured query by query. `demo` prints only the main table; `out`
// (unless empty) receives the JSON, CSV, charts and heat maps.
void copy_task(const CopySetup& setup, bool demo, const std::string& out);

// Part (b), natural_text.cpp: the tiny preset on natural text, baseline and G1 at two
// learning rates, analyze()'s report, and the sliding-window test. `quick`: a few steps.
void natural_text(bool quick, const std::string& out);

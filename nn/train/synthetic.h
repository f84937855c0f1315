// synthetic.h — Bigram-Backcopy (Guo et al. 2024, arXiv 2410.13835), the smallest task on
// which a transformer grows an attention sink.
//
// Tokens 0 … V−1 and BOS = V (so the model's vocab_size is V + 1). A fixed, seeded Markov
// chain: every token has `successors` likely next tokens with random weights (or, with a
// Dirichlet concentration, a random distribution over all tokens). A few tokens are triggers. A sequence is
//     BOS, s_1, s_2, …        s_1 drawn uniformly from the non-trigger tokens,
//     s_{t+1} ~ P(· | s_t)    when s_t is not a trigger (the bigram part),
//     s_{t+1} = s_{t−1}        when s_t is a trigger     (the back-copy part).
// So the query at a trigger's position must look one token back and copy it; every other
// query needs only its own token (the bigram) and has nothing useful to attend to. Two
// triggers are never adjacent (a trigger follows a non-trigger, and what it copies is the
// non-trigger before it), so every copy has a real token to copy.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/train/data.h"

namespace gg::nn {

struct BigramBackcopyOptions {
    int64_t vocab = 64;       // V ordinary tokens; BOS = V
    int64_t successors = 4;   // likely next tokens of each token (when concentration is 0)
    // > 0: each row of the chain is drawn from a Dirichlet(concentration) over all V tokens,
    // the common form of the task (0.3 gives rows of about 3.1 nats at V = 64); 0: each row
    // has `successors` likely tokens with Dirichlet(1) weights (about 1.1 nats at 4).
    double concentration = 0;
    int64_t triggers = 3;
    uint64_t seed = 1234;     // the chain and the triggers
    int64_t val_count = 16;   // distinct validation batches
};

class BigramBackcopy : public BatchSource {
public:
    explicit BigramBackcopy(const BigramBackcopyOptions& options = {});

    Batch train_batch(int64_t B, int64_t T, Generator& gen) const override;
    Batch val_batch(int64_t i, int64_t B, int64_t T) const override;  // from a generator seeded by (seed, i)
    int64_t val_batches(int64_t, int64_t) const override { return options_.val_count; }

    int64_t bos() const { return options_.vocab; }
    int64_t vocab_size() const { return options_.vocab + 1; }  // for LMConfig::vocab_size
    bool is_trigger(int64_t token) const;
    const std::vector<int64_t>& trigger_tokens() const { return triggers_; }
    // The chain's probability P(next | token), token < V.
    double transition(int64_t token, int64_t next) const { return P_[token * options_.vocab + next]; }

private:
    Batch sample(int64_t B, int64_t T, Generator& gen) const;
    BigramBackcopyOptions options_;
    std::vector<double> P_;          // (V, V) row-stochastic
    std::vector<int64_t> triggers_;
};

}  // namespace gg::nn

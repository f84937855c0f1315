// text_loss.h — a model's loss over every token of a text, scored as Hugging Face's perplexity
// guide scores a text longer than the model's context ("Perplexity of fixed-length models",
// transformers' documentation), so that a number printed here can be compared with one
// computed there.
//
// The text's ids x_0 … x_{N−1} are read in windows of `window` tokens (BOS first, when one
// is given, then window − 1 tokens of text) that start every `stride` tokens of text:
//
//   text     x0 x1 x2 x3 x4 x5 x6 x7 x8 x9          window 6, stride 3, no BOS
//   window 1 [x0 x1 x2 x3 x4 x5]                    scores x1 … x5 (x0 has no left context)
//   window 2          [x3 x4 x5 x6 x7 x8]           scores x6 x7 x8
//   window 3                   [x6 x7 x8 x9]        scores x9: it ends at the text's end
//
// The first window scores each of its tokens that has left context (all of them after a BOS),
// every later one only the tokens past the previous window's end, so each token is scored once,
// with at least window − stride tokens of context where the text has them: stride = window
// gives windows side by side (the fastest, each window's first token unscored), a small stride
// the most context (one forward pass per `stride` tokens). A window's last token is only ever a
// target, so the model reads window − 1 positions of it, as the guide's model does (its last
// logit is never used). The loss is the mean negative log-likelihood of the scored tokens,
// nats per token; an MoE model's balancing loss is not part of it.
//
// rolling_cache_loss scores a text as a model deployed with a bounded KV cache reads it: one
// token at a time, every full-attention layer's cache holding at most `cache` positions, the
// first `keep_first` of the text always among them (KVCache's keep, keep_first: StreamingLLM,
// arXiv 2309.17453; a hybrid's linear layers keep their whole state, with no positions to drop). Past the cache, a model whose heads park their idle weight on the first
// token loses its sink unless keep_first keeps it (the seed article's §1.1); a model with
// another place for that weight — the gate, a sink slot — should not care.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "nn/transformer.h"

namespace gg::nn {

struct TextLossOptions {
    int64_t window = 0;            // tokens per window, BOS included; ≥ 2
    int64_t stride = 0;            // tokens of text from one window's start to the next; 0: half the text of a window
    std::optional<int64_t> bos{};  // put before every window: the model then reads each as a sequence of its own
    int64_t batch = 1;             // windows per forward pass
};

struct TextLoss {
    double loss = 0;       // mean nats per scored token
    int64_t tokens = 0;    // N, the text's tokens
    int64_t scored = 0;    // how many were scored: N, or N − 1 without a BOS, when windows overlap
    int64_t windows = 0;
    int64_t stride = 0;    // the stride used
};

// Throws std::invalid_argument naming the option for a window too short for one scored token,
// a stride outside [1, window's text], or a text too short to score (fewer than 2 tokens, 1
// with a BOS).
TextLoss text_loss(const GatedTransformerLM& model, const std::vector<int64_t>& ids, const TextLossOptions& options);

struct RollingCacheOptions {
    int64_t cache = 0;             // positions each layer's KV cache holds; ≥ 2
    int64_t keep_first = 0;        // of them, the stream's first, never dropped; < cache
    std::optional<int64_t> bos{};  // put before the text (it is then the first position)
    // The full-attention layers whose caches drop positions; every other layer keeps them all.
    // Unset: every full-attention layer. A full model windowed on a hybrid's full layers alone
    // reads as the hybrid does, its other layers seeing the whole text.
    std::optional<std::vector<int64_t>> windowed{};
};

// Each token's negative log-likelihood in nats, in the text's order: tokens 1 … N − 1 (0 … N − 1
// after a BOS). The stream position of nll[i] is i + 1: positions ≥ cache are read after drops.
// Throws std::invalid_argument naming the option for a cache under 2, keep_first outside
// [0, cache), a windowed layer that is not one of the model's full-attention layers, a text too
// short to score, or (learned positions) a text longer than the model's.
std::vector<double> rolling_cache_loss(const GatedTransformerLM& model, const std::vector<int64_t>& ids,
                                       const RollingCacheOptions& options);

}  // namespace gg::nn

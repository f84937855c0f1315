// text_loss.cpp — the strided whole-text loss and the rolling-cache loss of text_loss.h.
#include "nn/analysis/text_loss.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/engine.h"

namespace gg::nn {

namespace {

constexpr int64_t kIgnore = -100;  // cross_entropy's ignore_index: a position that is not scored

// [begin, end) of the text, and how many of its last tokens the window scores.
struct Window {
    int64_t begin, end, scored;
};

std::vector<Window> plan_windows(int64_t N, int64_t text_per_window, int64_t stride, bool bos) {
    std::vector<Window> out;
    int64_t previous_end = 0;
    for (int64_t begin = 0;; begin += stride) {
        const int64_t end = std::min(begin + text_per_window, N);
        // Past the previous window's end; the window's first token only after a BOS.
        out.push_back({begin, end, end - std::max(previous_end, begin + (bos ? 0 : 1))});
        previous_end = end;
        if (end == N) return out;
    }
}

}  // namespace

TextLoss text_loss(const GatedTransformerLM& model, const std::vector<int64_t>& ids, const TextLossOptions& o) {
    const int64_t N = int64_t(ids.size()), first = o.bos ? 1 : 0, text_per_window = o.window - first;
    if (o.window < 2)
        throw std::invalid_argument("text_loss: a window of " + std::to_string(o.window) +
                                    " tokens holds no token with left context to score (at least 2)");
    const int64_t stride = o.stride > 0 ? o.stride : std::max<int64_t>(1, text_per_window / 2);
    if (stride > text_per_window)
        throw std::invalid_argument("text_loss: stride " + std::to_string(stride) + " is longer than the " +
                                    std::to_string(text_per_window) + " tokens of text in a window: tokens between "
                                    "windows would never be scored");
    if (N < 2 - first)
        throw std::invalid_argument("text_loss: the text has " + std::to_string(N) + " tokens, none of them with left "
                                    "context to score");
    if (o.batch < 1) throw std::invalid_argument("text_loss: batch " + std::to_string(o.batch) + " must be at least 1");
    const std::vector<Window> windows = plan_windows(N, text_per_window, stride, o.bos.has_value());
    const Device device = model.parameters().front().device();
    NoGradGuard no_grad;
    TextLoss out{0, N, 0, int64_t(windows.size()), stride};
    double total = 0;  // nats
    // Windows of one length go through together, `batch` at a time: all but the last are full.
    for (size_t i = 0; i < windows.size();) {
        const int64_t length = windows[i].end - windows[i].begin;
        size_t j = i;
        std::vector<int64_t> inputs, targets;
        int64_t scored = 0;
        for (; j < windows.size() && j < i + size_t(o.batch) && windows[j].end - windows[j].begin == length; ++j) {
            const Window& w = windows[j];
            std::vector<int64_t> row;  // BOS, then the window's text: (first + length)
            if (o.bos) row.push_back(*o.bos);
            row.insert(row.end(), ids.begin() + w.begin, ids.begin() + w.end);
            inputs.insert(inputs.end(), row.begin(), row.end() - 1);
            for (size_t p = 1; p < row.size(); ++p)  // position p − 1 predicts row[p]
                targets.push_back(int64_t(row.size() - p) <= w.scored ? row[p] : kIgnore);
            scored += w.scored;
        }
        const int64_t B = int64_t(j - i), T = first + length - 1;
        const Tensor logits = model.forward(from_vector(inputs, {B, T}).to(device)).logits;  // (B, T, V)
        const Tensor mean = cross_entropy(logits, from_vector(targets, {B, T}).to(device), kIgnore);
        total += mean.to(DType::f64).item() * double(scored);
        out.scored += scored;
        i = j;
    }
    out.loss = total / double(out.scored);
    return out;
}

std::vector<double> rolling_cache_loss(const GatedTransformerLM& model, const std::vector<int64_t>& ids,
                                       const RollingCacheOptions& o) {
    std::vector<int64_t> stream;  // what the model reads: BOS, then the text
    if (o.bos) stream.push_back(*o.bos);
    stream.insert(stream.end(), ids.begin(), ids.end());
    const int64_t N = int64_t(stream.size());
    const LMConfig& c = model.config();
    if (o.cache < 2 || o.keep_first < 0 || o.keep_first >= o.cache)
        throw std::invalid_argument("rolling_cache_loss: a cache of " + std::to_string(o.cache) + " keeping the first " +
                                    std::to_string(o.keep_first) + ": need a cache of at least 2 and 0 ≤ keep_first < cache");
    const int64_t L = int64_t(model.blocks.size());
    std::vector<bool> windowed(size_t(L), !o.windowed);  // unset: every full-attention layer
    for (const int64_t layer : o.windowed.value_or(std::vector<int64_t>{})) {
        if (layer < 0 || layer >= L || c.layer_type(layer) != LayerType::full_attention)
            throw std::invalid_argument("rolling_cache_loss: windowed layer " + std::to_string(layer) + " is not a "
                                        "full-attention layer of the model's " + std::to_string(L) +
                                        " (a linear layer has no positions to drop)");
        windowed[size_t(layer)] = true;
    }
    if (N < 2)
        throw std::invalid_argument("rolling_cache_loss: the text has " + std::to_string(ids.size()) +
                                    " tokens, none of them with left context to score");
    if (c.positions == PositionEncoding::learned && N - 1 > c.max_len)
        throw std::invalid_argument("rolling_cache_loss: the text reads " + std::to_string(N - 1) +
                                    " positions, more than the " + std::to_string(c.max_len) +
                                    " learned ones of this model (a rolling cache moves RoPE keys only)");
    bool any_whole = false;  // a full-attention layer left whole holds the whole stream
    for (int64_t l = 0; l < L; ++l) any_whole |= c.layer_type(l) == LayerType::full_attention && !windowed[size_t(l)];
    check_memory(c, Workload::inference, 1, any_whole ? std::max(o.cache, N) : o.cache);
    const Device device = model.parameters().front().device();
    NoGradGuard no_grad;
    std::vector<LayerCache> caches(model.blocks.size());  // the window bounds the windowed full layers' keys
    for (int64_t l = 0; l < L; ++l)
        if (windowed[size_t(l)]) caches[size_t(l)].kv.keep = o.cache, caches[size_t(l)].kv.keep_first = o.keep_first;
    std::vector<double> nll;
    nll.reserve(size_t(N - 1));
    for (int64_t i = 0; i + 1 < N; ++i) {
        const Tensor id = from_vector(std::vector<int64_t>{stream[size_t(i)]}, {1, 1}).to(device);
        const std::vector<double> row = model.forward(id, Tensor(), &caches).logits.reshape({-1}).to_vector<double>();
        const double top = *std::max_element(row.begin(), row.end());
        double sum = 0;  // log Σ e^{z} as top + log Σ e^{z − top}: no overflow
        for (const double z : row) sum += std::exp(z - top);
        nll.push_back(top + std::log(sum) - row[size_t(stream[size_t(i + 1)])]);
    }
    return nll;
}

}  // namespace gg::nn

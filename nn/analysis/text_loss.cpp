// text_loss.cpp — the strided whole-text loss of text_loss.h.
#include "nn/analysis/text_loss.h"

#include <algorithm>
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

}  // namespace gg::nn

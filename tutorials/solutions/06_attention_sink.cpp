// Reference solutions of tutorial 06's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include "tutorials/06_attention_sink/exercises/exercises.h"

namespace exercises {

SinkReport first_token_report(const gg::nn::GatedTransformerLM& model, const gg::Tensor& ids, double threshold) {
    gg::NoGradGuard no_grad;
    gg::nn::LMCapture capture;
    model.forward(ids, gg::Tensor(), nullptr, &capture);
    const int64_t T = ids.size(1);
    SinkReport report;
    for (const gg::nn::AttentionCapture& layer : capture.attention) {
        const gg::Tensor probs = layer.probs.to(gg::DType::f64);          // (B, H, T, T)
        const gg::Tensor on_first = probs.narrow(2, 1, T - 1).select(3, 0);  // (B, H, T−1): queries 1.., key 0
        const std::vector<double> alpha = gg::mean(on_first, {0, 2}).to_vector<double>();  // (H)
        for (double a : alpha) report.sink_heads += a > threshold;
        report.alpha.push_back(alpha);
    }
    return report;
}

gg::Tensor streaming_mask(int64_t T, int64_t window, int64_t sinks) {
    std::vector<float> hidden(size_t(T * T));  // (T, T): row i is query i, column j key j
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
            const bool future = j > i;
            const bool left_the_window = i - j >= window && j >= sinks;  // sinks never leave
            hidden[size_t(i * T + j)] = future || left_the_window ? 1.0f : 0.0f;
        }
    return gg::from_vector(hidden, {T, T});
}

}  // namespace exercises

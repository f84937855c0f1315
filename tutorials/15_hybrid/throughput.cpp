// throughput.cpp — tutorial 15, part (c): what the hybrid buys, tokens/s and decoding memory
// against the sequence length T.
//
// A full-attention layer's work grows as T² (every query against every key) and its KV cache as
// T (a key and a value per token and head); a Gated DeltaNet layer's work grows as T (chunks of
// 64 tokens, a dk × dv state passed between them) and its cache is that state, the same size at
// every T. The hybrid keeps two full layers of eight, so its cache still grows, at a quarter of
// the rate, and its T² term is a quarter of the full model's. Both models are measured in the
// same process, one sequence at a time, alternating, so that noise on a shared machine hits both:
//   forward        tokens/s of a forward pass without gradients (a prompt's prefill)
//   train          tokens/s of a forward and backward with the loss (T ≤ max_backward_t)
//   cache          bytes the layers' caches hold after reading the T tokens (LayerCache,
//                  nn/transformer.h): the full layers' keys and values, the linear layers'
//                  convolution inputs and state; beside it kv_cache_bytes_per_token · T, the
//                  library's count, which leaves the fixed state out
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/results.h"
#include "common/timing.h"
#include "hybrid.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace hybrid {

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int64_t bytes(const Tensor& t) { return t.defined() ? t.numel() * int64_t(dtype_size(t.dtype())) : 0; }

// Seconds of one forward pass over ids (1, T), without gradients, or with the loss and its backward.
double time_pass(GatedTransformerLM& model, const Tensor& ids, const Tensor& targets, bool backward) {
    model.zero_grad();
    const auto start = Clock::now();
    if (backward) {
        model.forward(ids, targets).loss.backward();
    } else {
        NoGradGuard no_grad;
        model.forward(ids);
    }
    return seconds_since(start);
}

// The bytes each kind of layer's cache holds after a forward pass over ids (1, T) with caches.
std::pair<int64_t, int64_t> cache_bytes(const GatedTransformerLM& model, const Tensor& ids) {
    NoGradGuard no_grad;
    std::vector<LayerCache> caches(model.blocks.size());
    model.forward(ids, Tensor(), &caches);
    int64_t kv = 0, linear = 0;
    for (const LayerCache& c : caches) {
        kv += bytes(c.kv.k) + bytes(c.kv.v);
        linear += bytes(c.linear.conv) + bytes(c.linear.state);
    }
    return {kv, linear};
}

}  // namespace

std::string measure_throughput(const RunSettings& settings, const Throughput& options) {
    std::vector<Architecture> archs;  // the G1 models: the full one and the hybrid
    for (const Architecture& a : architectures())
        if (a.gated) archs.push_back(a);
    std::vector<std::unique_ptr<GatedTransformerLM>> models;
    for (const Architecture& a : archs) {
        LMConfig config = settings.train_config().model;
        config.max_len = options.max_t;
        a.apply(config);
        models.push_back(std::make_unique<GatedTransformerLM>(config));
    }
    const int64_t V = models.front()->config().vocab_size;
    std::printf("  %6s %-16s %14s %14s %14s %14s %16s\n", "T", "model", "forward tok/s", "train tok/s",
                "KV cache", "linear state", "library's KV");
    json rows = json::array();
    Generator gen(1);
    for (int64_t T = 256; T <= options.max_t; T *= 2) {
        const Tensor ids = randint(0, V, {1, T}, gen), targets = randint(0, V, {1, T}, gen);  // (1, T) each
        const bool backward = T <= options.max_backward_t;
        std::vector<std::vector<double>> forward(archs.size()), train(archs.size());
        for (auto& m : models) time_pass(*m, ids, targets, false);  // warm-up
        for (int64_t r = 0; r < options.reps; ++r)
            for (size_t i = 0; i < archs.size(); ++i) {
                forward[i].push_back(time_pass(*models[i], ids, targets, false));
                if (backward) train[i].push_back(time_pass(*models[i], ids, targets, true));
            }
        for (size_t i = 0; i < archs.size(); ++i) {
            const auto [kv, linear] = cache_bytes(*models[i], ids);
            const int64_t library_kv = kv_cache_bytes_per_token(models[i]->config(), DType::f32) * T;
            const double forward_rate = double(T) / median(forward[i]);
            const double train_rate = backward ? double(T) / median(train[i]) : NAN;
            std::printf("  %6lld %-16s %14.0f %14s %14lld %14lld %16lld\n", (long long)T, archs[i].name.c_str(),
                        forward_rate, format_or_dash("%.0f", train_rate).c_str(), (long long)kv, (long long)linear,
                        (long long)library_kv);
            rows.push_back({{"T", T},
                            {"model", archs[i].name},
                            {"forward_tokens_per_s", forward_rate},
                            {"train_tokens_per_s", train_rate},
                            {"kv_cache_bytes", kv},
                            {"linear_state_bytes", linear},
                            {"library_kv_cache_bytes", library_kv}});
        }
    }
    return rows.dump();
}

}  // namespace hybrid

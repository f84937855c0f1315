// decode.cpp — how fast a Hugging Face checkpoint writes text with its KV cache, as
// `gatedgrad sample --hf` runs it: the time to the first token of a long prompt, then tokens/s.
//
//   ./build/bench/decode DIR [--runs 1] [--prompt 512] [--tokens 128] [--seed 0]
//     → one JSON line: the load time; per run the time to the first token (the prompt's one
//       forward pass through the caches and the first greedy token) and the tokens/s of the
//       next `--tokens` ones (each a forward pass of one token), and their medians; the
//       process's peak RSS, the weights' bytes, the KV cache's bytes at the end, and the
//       first generated ids, to compare with the peer's
//
// Both numbers come from nn::generate, the function `gatedgrad sample` calls, with its options
// (greedy, the model's max_len as context, all under Autocast(bf16) for a bfloat16 checkpoint):
// a user's speed, less sample's own work around it (encoding the prompt, decoding the tokens
// once at the end; the drawable-id mask it adds costs one pass over the vocabulary per token).
// generate calls SampleOptions::on_token as each token is drawn; the clock is read there, so
// one call per run gives both numbers, and with one run the peak RSS is that of a `sample`. The prompt is
// random ids (bench/hf_bench.h), the same as the peer's.
// Threads: OMP_NUM_THREADS.
//
// bench/decode_torch.py is the PyTorch peer; bench/decode.sh writes a random checkpoint of
// Qwen3-0.6B's shape and runs both.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "hf_bench.h"
#include "nn/io/hf.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::bench;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: decode DIR [--runs N] [--prompt T] [--tokens N] [--seed S]\n");
        return 2;
    }
    try {
        const std::string dir = argv[1];
        int64_t runs = 1, P = 512, N = 128, seed = 0;
        const std::pair<const char*, int64_t*> number_flags[] = {
            {"--runs", &runs}, {"--prompt", &P}, {"--tokens", &N}, {"--seed", &seed}};
        for (int i = 2; i < argc; ++i)
            if (!read_count_flag(i, argc, argv, number_flags))
                throw std::invalid_argument(std::string("decode: unknown argument '") + argv[i] + "'");
        if (runs < 1 || P < 1 || N < 1) throw std::invalid_argument("decode: --runs, --prompt and --tokens ≥ 1");

        const auto load_start = std::chrono::steady_clock::now();
        const std::shared_ptr<GatedTransformerLM> model = hf::load_folder(dir);
        const double load_s = seconds_since(load_start);
        const double load_peak = status_bytes("VmHWM:");
        reset_peak();
        const LMConfig& config = model->config();
        double weight_bytes = 0;
        for (const Tensor& p : model->parameters()) weight_bytes += bytes_of(p);
        const DType weight_dtype = model->parameters().front().dtype();
        std::optional<Autocast> autocast;  // as `gatedgrad sample` runs a checkpoint: Autocast(its precision)
        if (weight_dtype == DType::bf16) autocast.emplace(DType::bf16);

        const std::vector<int64_t> prompt = random_ids(1, P, config.vocab_size, uint64_t(seed));
        SampleOptions options;
        options.temperature = 0;
        options.context = config.max_len;
        // One call per run, as `sample` makes it: the clock reads when each token is drawn.
        std::vector<double> ttfts, rates;
        std::vector<int64_t> tokens;
        std::chrono::steady_clock::time_point start, first_drawn, last_drawn;
        options.max_new_tokens = 1 + N;
        options.on_token = [&](int64_t) {
            last_drawn = std::chrono::steady_clock::now();
            if (first_drawn < start) first_drawn = last_drawn;
        };
        for (int64_t r = 0; r < runs; ++r) {
            start = std::chrono::steady_clock::now();
            first_drawn = {};
            tokens = generate(*model, prompt, options);
            ttfts.push_back(std::chrono::duration<double>(first_drawn - start).count());
            rates.push_back(double(N) / std::chrono::duration<double>(last_drawn - first_drawn).count());
        }
        const auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        const auto list = [](const auto& v, const char* format) {
            std::string text;
            char item[32];
            for (const auto x : v) {
                std::snprintf(item, sizeof item, format, x);
                text += (text.empty() ? "" : ", ") + std::string(item);
            }
            return text;
        };
        // The caches at the end: the prompt and every new token but the last, which is never fed back.
        const double cache_bytes = double(kv_cache_bytes_per_token(config, weight_dtype)) * double(P + N);
        std::vector<long long> first_ids(tokens.begin(), tokens.begin() + std::min<ptrdiff_t>(16, ptrdiff_t(tokens.size())));
        std::printf("{\"impl\": \"gatedgrad\", \"weights\": \"%s\", \"compute\": \"%s\", \"threads\": %d, "
                    "\"openblas_core\": \"%s\", \"prompt\": %lld, \"tokens\": %lld, \"runs\": %lld, "
                    "\"ttft_s\": [%s], \"median_ttft_s\": %.3f, \"tok_s\": [%s], \"median_tok_s\": %.3f, "
                    "\"load_s\": %.2f, \"peak_rss_gb\": %.3f, \"load_peak_rss_gb\": %.3f, \"decode_peak_rss_gb\": %.3f, "
                    "\"weights_gb\": %.3f, \"cache_gb\": %.3f, \"first_ids\": [%s]}\n",
                    dtype_name(weight_dtype), autocast ? "autocast bf16" : "f32", omp_get_max_threads(),
                    openblas_get_corename(), (long long)P, (long long)N, (long long)runs, list(ttfts, "%.3f").c_str(),
                    median(ttfts), list(rates, "%.3f").c_str(), median(rates), load_s, peak_rss_bytes() / 1e9,
                    load_peak / 1e9, status_bytes("VmHWM:") / 1e9, weight_bytes / 1e9, cache_bytes / 1e9,
                    list(first_ids, "%lld").c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "decode: %s\n", e.what());
        return 1;
    }
}

// Tutorial 13 — a real model's attention sink: open Hugging Face Qwen3 checkpoints (with and
// without the paper's gate) and measure where their attention goes.
//
// Build and run from the repository root (README.md says how to get the real checkpoints):
//   tools/build tutorial_13_real_model_sink
//   ./build/tutorials/tutorial_13_real_model_sink [--text FILE] [--seq-len T] [--sequences N] DIR...
// Each DIR is a model folder: config.json, model.safetensors (or a sharded index), and
// tokenizer.json for --text (a checkpoint file of ours works too). Without --text, or for a folder without a tokenizer, the
// sequences are uniformly random ids: Gu et al. 2024 (arXiv 2410.10781) found that sinks
// form on them too, so a sink there belongs to the model, not to the text.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct Measured {
    std::string name, gate, input;
    ModelAnalysis analysis;
    double max_activation = 0;  // the largest |h| of any block's output ...
    int64_t at_layer = 0, at_position = 0;  // ... and where it sits
};

// One forward over ids (B, T): the sink report, and where the largest activation lies.
Measured measure(const GatedTransformerLM& model, const Tensor& ids, double threshold) {
    Measured m;
    m.analysis = analyze(model, ids, threshold);
    LMCapture capture;
    {
        NoGradGuard no_grad;
        model.forward(ids, Tensor(), nullptr, &capture);
    }
    for (size_t l = 0; l < capture.hidden.size(); ++l) {
        // (B, T, d) → the largest |h| at each position, over sequences and channels: (T)
        const Tensor per_position = amax(amax(abs(capture.hidden[l].to(DType::f32)), {2}), {0});
        const std::vector<float> values = per_position.to_vector<float>();
        for (size_t t = 0; t < values.size(); ++t)
            if (values[t] > m.max_activation) m.max_activation = values[t], m.at_layer = int64_t(l), m.at_position = int64_t(t);
    }
    return m;
}

std::string gate_name(const AttentionOptions& a) {
    return a.gated() ? "G1 " + gate_sharing_name(a.sharing) : "none";
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"tutorial 13: the attention sink of real Qwen3 checkpoints, with and without the output gate"};
    std::vector<std::string> dirs;
    std::string text_file;
    int64_t T = 256, N = 8;
    double threshold = 0.3;
    uint64_t seed = 1;
    app.add_option("DIR", dirs, "Hugging Face model folders")->required();
    app.add_option("--text", text_file, "a text to run the models on (needs each folder's tokenizer.json)");
    app.add_option("--seq-len", T, "tokens per sequence")->capture_default_str()->check(CLI::Range(2, 1 << 16));
    app.add_option("--sequences", N, "sequences per model")->capture_default_str()->check(CLI::Range(1, 1 << 12));
    app.add_option("--threshold", threshold, "a head is a sink head when its first-token share is above this")
        ->capture_default_str();
    app.add_option("--seed", seed, "the random ids' seed")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    std::vector<Measured> rows;
    for (const std::string& dir : dirs) {
        // 1. Open the folder through the library's one door for models (nn/io/model.h): the
        //    model (config.json says Qwen3 and, in the authors' checkpoints, which gate), its
        //    tokenizer, and the precision it runs in. A checkpoint of ours opens the same way.
        const OpenedModel opened = open_model(dir);
        const GatedTransformerLM& model = *opened.model;
        const LMConfig& c = model.config();
        const std::string name = std::filesystem::path(dir).filename().string();
        std::printf("%s: %lld layers, %lld query heads of %lld, %lld KV heads, d_model %lld, vocab %lld, gate %s, "
                    "%s weights\n",
                    name.c_str(), (long long)c.n_layers, (long long)c.attn.n_heads, (long long)c.attn.head_dim(),
                    (long long)c.attn.kv_heads(), (long long)c.d_model, (long long)c.vocab_size,
                    gate_name(c.attn).c_str(), dtype_name(model.parameters().front().dtype()));
        const Autocast precision(opened.precision);  // bfloat16 weights multiply in bfloat16, sum in float32

        // 2. The inputs: the text in the model's own tokens, N windows of T (Qwen3 puts no BOS
        //    first, so the first token is whatever the text's is), and N sequences of random ids
        //    of the tokenizer's (a real checkpoint's embedding has padding rows past them).
        std::vector<std::pair<std::string, Tensor>> inputs;
        if (!text_file.empty() && opened.tokenizer) {
            std::string text;
            for (const std::string& doc : load_documents({text_file})) text += doc + "\n";
            std::vector<int64_t> stream = opened.tokenizer->encode(text);
            const int64_t n = std::min<int64_t>(N, int64_t(stream.size()) / T);
            if (n > 0) {
                stream.resize(size_t(n * T));
                inputs.emplace_back("text", from_vector(stream, {n, T}));
            }
        }
        Generator gen(seed);
        const int64_t known = opened.tokenizer ? opened.tokenizer->vocab_size() : c.vocab_size;
        inputs.emplace_back("random ids", randint(0, known, {N, T}, gen));

        // 3. The report, per layer, for each input.
        for (const auto& [input, ids] : inputs) {
            Measured m = measure(model, ids, threshold);
            m.name = name, m.gate = gate_name(c.attn), m.input = input;
            std::printf("-- on %s, %lld sequences of %lld tokens\n%s", input.c_str(), (long long)ids.size(0),
                        (long long)ids.size(1), m.analysis.table().c_str());
            rows.push_back(std::move(m));
        }
        std::printf("\n");
    }

    // 4. Side by side, as the paper's Table 4 compares its baseline and gated models.
    std::printf("model            gate            input       first-token share  sink heads   gate mean  max|h| (layer, position)\n");
    for (const Measured& m : rows) {
        double gate_mean = 0;
        for (const LayerAnalysis& l : m.analysis.layers) gate_mean += l.gate_mean / double(m.analysis.layers.size());
        char gate[16] = "-";
        if (m.gate != "none") std::snprintf(gate, sizeof gate, "%.3f", gate_mean);
        std::printf("%-16s %-15s %-11s %17.3f  %4lld of %-4lld %9s  %.1f (%lld, %lld)\n", m.name.c_str(), m.gate.c_str(),
                    m.input.c_str(), m.analysis.mean_first_token_share, (long long)m.analysis.sink_heads,
                    (long long)m.analysis.heads, gate, m.max_activation, (long long)m.at_layer, (long long)m.at_position);
    }
    return 0;
}

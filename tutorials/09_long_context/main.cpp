// Tutorial 09 — long context (article 4.2): how far past its training length does a RoPE
// model keep working, with and without the G1 gate, under the three RoPE rescalings?
//
// Train a baseline and a G1 model (tiny preset, T = 64, RoPE) on the same batches; then
// evaluate both at 1×, 2×, 4×, 8× the training length with each scaling of nn/rope.h,
// factor s = eval length / train length (YaRN's original length = the training length).
// Every evaluation reads the same validation text: batches of B·T = 8192 tokens.
//
// Run from the repository root:
//   ./build/tutorials/tutorial_09_long_context           full run, writes results/
//   ./build/tutorials/tutorial_09_long_context --quick   shortened (no files unless --out)
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gatedgrad.h"

namespace fs = std::filesystem;
using namespace gg;
using namespace gg::nn;
using json = nlohmann::ordered_json;

namespace {

constexpr int64_t kTokensPerBatch = 8192;  // B·T of every evaluation batch, so all lengths read the same text

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Mean cross-entropy at each position t of `batches` validation batches of length T:
// logits (B, T, V) → loss per t, averaged over the batch.
std::vector<double> loss_per_position(const GatedTransformerLM& model, const TextDataset& data, int64_t T,
                                      int64_t batches) {
    NoGradGuard no_grad;
    const int64_t B = kTokensPerBatch / T;
    std::vector<double> loss(T, 0.0);
    for (int64_t i = 0; i < batches; ++i) {
        const Batch batch = data.val_batch(i, B, T);
        const Tensor logits = model.forward(batch.inputs).logits;  // (B, T, V)
        // −log p(target) = logsumexp(z) − z_target, per position
        const Tensor nll = -gather(log_softmax(logits, -1), 2, batch.targets.unsqueeze(2)).squeeze(2);  // (B, T)
        const std::vector<double> v = mean(nll, {0}).to_vector<double>();                             // (T)
        for (int64_t t = 0; t < T; ++t) loss[t] += v[t] / double(batches);
    }
    return loss;
}

// Colour i of a few dark/light pairs: G1 dark, baseline light, so the legend tells them apart.
std::string pair_color(size_t i, bool light) {
    static const char* dark[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"};
    static const char* pale[] = {"#9ecae1", "#f4a582", "#a1d99b", "#fdd0a2"};
    return light ? pale[i % 4] : dark[i % 4];
}

double mean_range(const std::vector<double>& v, int64_t from, int64_t to) {
    double s = 0;
    for (int64_t t = from; t < to; ++t) s += v[t];
    return s / double(to - from);
}

struct Eval {
    std::string model, method;
    int64_t length = 0;
    double loss_all = 0, loss_beyond = NAN;  // all positions; positions ≥ the training length
    std::vector<double> per_position;
};

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    std::string out;
    CLI::App app{"Tutorial 09: long context, baseline vs G1, RoPE with no scaling, PI, NTK and YaRN"};
    app.add_flag("--quick", quick, "shortened training and evaluation (a smoke test)");
    app.add_option("--out", out, "results folder (default for the full run: tutorials/09_long_context/results)");
    CLI11_PARSE(app, argc, argv);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, even in a pipe
    if (out.empty() && !quick) out = "tutorials/09_long_context/results";
    const auto t0 = std::chrono::steady_clock::now();

    TrainConfig config = TrainConfig::preset("tiny");
    if (quick) config.steps = 60;
    config.eval_every = 0;
    const int64_t L = config.seq_len;
    auto data = std::make_shared<TextDataset>(load_documents(config.data));
    const int64_t eval_batches = quick ? 1 : std::min<int64_t>(4, data->val_batches(1, kTokensPerBatch));
    std::printf("training at T = %d: tiny preset (d_model %d, %d layers, %d heads, RoPE base %.0f), %lld steps, "
                "lr %.0e\n",
                int(L), int(config.model.d_model), int(config.model.n_layers), int(config.model.attn.n_heads),
                config.model.attn.rope_options.base, (long long)config.steps, config.lr);

    const std::vector<int64_t> multiples{1, 2, 4, 8};
    const std::vector<RopeScaling> methods{RopeScaling::none, RopeScaling::interpolation, RopeScaling::ntk,
                                           RopeScaling::yarn};
    std::vector<Eval> evals;
    json train_json = json::array();
    for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output}) {
        TrainConfig c = config;
        c.model.attn.gate = gate;
        const std::string name = gate_position_name(gate);
        Trainer trainer(c, data);
        const TrainResult result = trainer.run(true);
        GatedTransformerLM& model = trainer.model();
        model.eval();
        const ModelAnalysis analysis = analyze(model, data->val_batch(0, 16, L).inputs);
        std::printf("  %-8s trained in %.0f s, validation loss at T = %d: %.4f; mean first-token share %.3f\n",
                    name.c_str(), result.seconds, int(L), result.final_val_loss, analysis.mean_first_token_share);
        train_json.push_back({{"model", name},
                              {"seconds", result.seconds},
                              {"val_loss", result.final_val_loss},
                              {"mean_first_token_share", analysis.mean_first_token_share},
                              {"sink_heads", analysis.sink_heads}});
        for (RopeScaling method : methods)
            for (int64_t m : multiples) {
                const int64_t T = m * L;
                RopeOptions rope = c.model.attn.rope_options;
                rope.scaling = method;
                rope.factor = double(m);
                rope.original_length = L;
                model.set_rope_options(rope);
                Eval e;
                e.model = name, e.method = rope_scaling_name(method), e.length = T;
                e.per_position = loss_per_position(model, *data, T, eval_batches);
                e.loss_all = mean_range(e.per_position, 0, T);
                if (T > L) e.loss_beyond = mean_range(e.per_position, L, T);
                evals.push_back(e);
            }
        model.set_rope_options(c.model.attn.rope_options);
    }

    std::printf("\nvalidation loss (nats/byte) over all positions; in brackets: positions past the training length "
                "%d\n(%lld batches of %lld tokens at every length; scaling factor = length / %d)\n",
                int(L), (long long)eval_batches, (long long)kTokensPerBatch, int(L));
    std::printf("  %-8s %-6s", "model", "method");
    for (int64_t m : multiples) std::printf("  %-17s", ("T=" + std::to_string(m * L)).c_str());
    std::printf("\n");
    for (size_t i = 0; i < evals.size(); i += multiples.size()) {
        std::printf("  %-8s %-6s", evals[i].model.c_str(), evals[i].method.c_str());
        for (size_t k = 0; k < multiples.size(); ++k) {
            const Eval& e = evals[i + k];
            if (std::isnan(e.loss_beyond)) std::printf("  %8.4f         ", e.loss_all);
            else std::printf("  %8.4f (%6.3f)", e.loss_all, e.loss_beyond);
        }
        std::printf("\n");
    }
    std::printf("\ntotal time %.0f s\n", seconds_since(t0));
    if (out.empty()) return 0;

    const fs::path dir(out);
    fs::create_directories(dir);
    json j = {{"train", json::parse(config.to_json())},
              {"tokens_per_eval_batch", kTokensPerBatch},
              {"eval_batches", eval_batches},
              {"models", train_json},
              {"evals", json::array()}};
    std::vector<std::vector<double>> rows;
    for (const Eval& e : evals) {
        j["evals"].push_back({{"model", e.model},
                              {"method", e.method},
                              {"length", e.length},
                              {"loss_all", e.loss_all},
                              {"loss_beyond_train_length", std::isnan(e.loss_beyond) ? json() : json(e.loss_beyond)},
                              {"loss_per_position", e.per_position}});
        double method_index = 0;
        for (size_t k = 0; k < methods.size(); ++k)
            if (e.method == rope_scaling_name(methods[k])) method_index = double(k);
        rows.push_back({double(e.model != "baseline"), method_index, double(e.length), e.loss_all, e.loss_beyond});
    }
    write_text_file((dir / "long_context.json").string(), j.dump(2) + "\n");
    write_text_file((dir / "long_context.csv").string(),
                    csv_table({"g1", "method", "length", "loss_all", "loss_beyond_train_length"}, rows));

    // Loss against eval length: one colour per method, G1 dark, baseline light.
    std::vector<Series> lines;
    for (size_t i = 0; i < evals.size(); i += multiples.size()) {
        Series s;
        const bool g1 = evals[i].model != "baseline";
        s.label = std::string(g1 ? "G1" : "baseline") + ", " + evals[i].method;
        for (size_t k = 0; k < multiples.size(); ++k)
            s.x.push_back(double(evals[i + k].length)), s.y.push_back(evals[i + k].loss_all);
        size_t method_index = 0;
        for (size_t k = 0; k < methods.size(); ++k)
            if (evals[i].method == rope_scaling_name(methods[k])) method_index = k;
        s.color = pair_color(method_index, !g1);
        lines.push_back(s);
    }
    ChartOptions chart;
    chart.title = "validation loss at longer contexts (trained at T = " + std::to_string(L) + ")";
    chart.x_label = "evaluation length T (log scale)";
    chart.y_label = "validation loss (nats/byte)";
    chart.log_x = true;
    write_text_file((dir / "long_context.svg").string(), svg_line_chart(lines, chart));

    // Loss per position at 8×: where each method breaks down.
    std::vector<Series> positions;
    for (const Eval& e : evals) {
        if (e.length != multiples.back() * L) continue;
        Series s;
        const bool g1 = e.model != "baseline";
        s.label = std::string(g1 ? "G1" : "baseline") + ", " + e.method;
        for (int64_t t = 0; t < e.length; ++t) s.x.push_back(double(t));
        s.y = smooth(e.per_position, 0.95);
        size_t method_index = 0;
        for (size_t k = 0; k < methods.size(); ++k)
            if (e.method == rope_scaling_name(methods[k])) method_index = k;
        s.color = pair_color(method_index, !g1);
        positions.push_back(s);
    }
    chart.title = "loss per position at T = " + std::to_string(multiples.back() * L) + " (trained at " +
                  std::to_string(L) + ")";
    chart.x_label = "position t";
    chart.y_label = "validation loss (nats/byte, smoothed over t)";
    chart.log_x = false;
    chart.reference_y = NAN;
    write_text_file((dir / "loss_per_position.svg").string(), svg_line_chart(positions, chart));
    std::printf("wrote %s/long_context.{json,csv,svg}, loss_per_position.svg\n", out.c_str());
    return 0;
}

// Tutorial 09 — long context (docs/paper.md, "Long context"): how far past its training
// length does a RoPE model keep working, with and without the G1 gate, under the three RoPE
// rescalings?
//
// Train a baseline and a G1 model (tiny preset, T = 64, RoPE) on the same batches; then
// evaluate both at 1×, 2×, 4×, 8× the training length with each scaling of nn/rope.h,
// factor s = eval length / train length (YaRN's original length = the training length).
// Every evaluation reads the same validation text: batches of B·T = 8192 tokens.
//
// Run from the repository root (one process, one thread):
//   OMP_NUM_THREADS=1 ./build/tutorials/tutorial_09_long_context           the full run, about 6 minutes
//   OMP_NUM_THREADS=1 ./build/tutorials/tutorial_09_long_context --quick   shortened (a smoke test)
// --out DIR writes the results there (the committed ones: --out tutorials/09_long_context/results);
// --replot DIR draws DIR's pictures again from its long_context.json, without training.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/results.h"
#include "common/timing.h"
#include "gatedgrad.h"
#include "long_context.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace {

constexpr int64_t kTokensPerBatch = 8192;  // B·T of every evaluation batch, so all lengths read the same text

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

// Trains one model at length L, then runs it at every length with every scaling: the same
// weights, only the rotary angles change.
std::vector<Eval> train_and_stretch(const TrainConfig& config, const std::shared_ptr<TextDataset>& data,
                                    int64_t eval_batches, json& trained) {
    const int64_t L = config.seq_len;
    const std::string name = gate_position_name(config.model.attn.gate);
    Trainer trainer(config, data);
    const TrainResult result = trainer.run(true);
    GatedTransformerLM& model = trainer.model();
    model.eval();
    const ModelAnalysis analysis = analyze(model, data->val_batch(0, 16, L).inputs);
    std::printf("  %-8s trained in %.0f s, validation loss at T = %d: %.4f; mean first-token share %.3f\n",
                name.c_str(), result.seconds, int(L), result.final_val_loss, analysis.mean_first_token_share);
    trained.push_back({{"model", name},
                       {"seconds", result.seconds},
                       {"val_loss", result.final_val_loss},
                       {"mean_first_token_share", analysis.mean_first_token_share},
                       {"sink_heads", analysis.sink_heads}});
    std::vector<Eval> evals;
    for (size_t k = 0; k < kMethods.size(); ++k)
        for (int64_t m : kMultiples) {
            const int64_t T = m * L;
            RopeOptions rope = config.model.attn.rope_options;
            rope.scaling = kMethods[k];
            rope.factor = double(m);
            rope.original_length = L;
            model.set_rope_options(rope);
            Eval e;
            e.model = name, e.method = k, e.length = T;
            e.per_position = loss_per_position(model, *data, T, eval_batches);
            e.loss_all = mean_range(e.per_position, 0, T);
            if (T > L) e.loss_beyond = mean_range(e.per_position, L, T);
            evals.push_back(e);
        }
    return evals;
}

void print_table(const std::vector<Eval>& evals, int64_t L, int64_t eval_batches) {
    std::printf("\nvalidation loss (nats/byte) over all positions; in brackets: positions past the training length "
                "%d\n(%lld batches of %lld tokens at every length; scaling factor = length / %d)\n",
                int(L), (long long)eval_batches, (long long)kTokensPerBatch, int(L));
    std::printf("  %-8s %-6s", "model", "method");
    for (int64_t m : kMultiples) std::printf("  %-17s", ("T=" + std::to_string(m * L)).c_str());
    std::printf("\n");
    for (size_t i = 0; i < evals.size(); i += kMultiples.size()) {
        std::printf("  %-8s %-6s", evals[i].model.c_str(), rope_scaling_name(kMethods[evals[i].method]));
        for (size_t k = 0; k < kMultiples.size(); ++k) {
            const Eval& e = evals[i + k];
            if (std::isnan(e.loss_beyond)) std::printf("  %8.4f         ", e.loss_all);
            else std::printf("  %8.4f (%6.3f)", e.loss_all, e.loss_beyond);
        }
        std::printf("\n");
    }
    std::printf("\nloss increase over the model's own loss at T=%d (nats/byte):\n  %-8s %-6s", int(L), "model", "method");
    for (size_t k = 1; k < kMultiples.size(); ++k) std::printf("  %-8s", ("T=" + std::to_string(kMultiples[k] * L)).c_str());
    std::printf("\n");
    for (size_t i = 0; i < evals.size(); i += kMultiples.size()) {
        std::printf("  %-8s %-6s", evals[i].model.c_str(), rope_scaling_name(kMethods[evals[i].method]));
        for (size_t k = 1; k < kMultiples.size(); ++k) std::printf("  %+8.3f", evals[i + k].loss_all - evals[i].loss_all);
        std::printf("\n");
    }
}

void write_results(const std::string& out, const TrainConfig& config, int64_t eval_batches, const json& trained,
                   const std::vector<Eval>& evals) {
    const std::filesystem::path dir(out);
    std::filesystem::create_directories(dir);
    const int64_t L = config.seq_len;
    json j = {{"train", json::parse(config.to_json())},
              {"tokens_per_eval_batch", kTokensPerBatch},
              {"eval_batches", eval_batches},
              {"models", trained},
              {"evals", json::array()}};
    std::vector<std::vector<double>> rows;
    for (const Eval& e : evals) {
        j["evals"].push_back({{"model", e.model},
                              {"method", rope_scaling_name(kMethods[e.method])},
                              {"length", e.length},
                              {"loss_all", e.loss_all},
                              {"loss_beyond_train_length", std::isnan(e.loss_beyond) ? json() : json(e.loss_beyond)},
                              {"loss_per_position", e.per_position}});
        rows.push_back({double(e.model != "baseline"), double(e.method), double(e.length), e.loss_all, e.loss_beyond});
    }
    write_json(dir / "long_context.json", j);
    write_file_atomically((dir / "long_context.csv").string(),
                    csv_table({"g1", "method", "length", "loss_all", "loss_beyond_train_length"}, rows));

    plot_results(dir, L, evals);
    std::printf("wrote %s/long_context.{json,csv,svg}, loss_per_position.svg\n", out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    ExperimentOptions options;
    CLI::App app{"Tutorial 09: long context, baseline vs G1, RoPE with no scaling, PI, NTK and YaRN"};
    add_quick_and_out(app, options, "shortened training and evaluation (a smoke test)", "tutorials/09_long_context/results");
    add_replot(app, options);
    CLI11_PARSE(app, argc, argv);
    line_buffered_stdout();
    if (!options.replot.empty()) {
        int64_t L = 0;
        const std::vector<Eval> evals = read_evals(options.replot, L);
        plot_results(options.replot, L, evals);
        std::printf("redrew %s/long_context.svg, loss_per_position.svg from long_context.json\n", options.replot.c_str());
        return 0;
    }
    const auto start = Clock::now();

    // 1. The training setup: the tiny preset at T = 64, validated only at the end.
    TrainConfig config = TrainConfig::preset("tiny");
    if (options.quick) config.steps = 60;
    config.eval_every = 0;
    const int64_t L = config.seq_len;
    auto data = std::make_shared<TextDataset>(load_documents(config.data));
    const int64_t eval_batches = options.quick ? 1 : std::min<int64_t>(4, data->val_batches(1, kTokensPerBatch));
    std::printf("training at T = %d: tiny preset (d_model %d, %d layers, %d heads, RoPE base %.0f), %lld steps, "
                "lr %.0e\n",
                int(L), int(config.model.d_model), int(config.model.n_layers), int(config.model.attn.n_heads),
                config.model.attn.rope_options.base, (long long)config.steps, config.lr);

    // 2. Baseline and G1, each trained at L and then stretched to 8 L.
    std::vector<Eval> evals;
    json trained = json::array();
    for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output}) {
        TrainConfig c = config;
        c.model.attn.gate = gate;
        for (Eval& e : train_and_stretch(c, data, eval_batches, trained)) evals.push_back(std::move(e));
    }

    // 3. The table: loss over all positions, and over the positions past L.
    print_table(evals, L, eval_batches);
    if (options.quick)
        std::printf("(--quick: 60 steps and one evaluation batch per length, too short and too few to tell the "
                    "models or the scalings apart: differences of a few hundredths, negative ones included, are "
                    "within the noise of one batch; the full run's numbers are in README.md)\n");
    std::printf("\ntotal time %.0f s\n", seconds_since(start));
    if (!options.out.empty()) write_results(options.out, config, eval_batches, trained, evals);
    return 0;
}

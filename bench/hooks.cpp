// hooks.cpp — what the hook points of nn/hooks.h cost a forward pass.
//
//   ./build/bench/hooks [tiny|small|medium] [--rounds 9]
//     → one line per way of running the forward (its median ms, and its time over the plain
//       forward's: the median over rounds, the middle half of them (quartiles) and the lowest
//       and highest), then one JSON line
//
// Four ways, each once per round, in an order that turns by one every round, so that a load that
// comes and goes on a shared machine falls on each of them alike; each round's ratio is taken
// within the round:
//   plain        model.forward(ids) with no hooks: each point is one null check
//   read-fused   a reader that does nothing at every point but scores: the fused attention
//                stays, and writes its weights out for the probs reader
//   read-all     the same with scores too: reading scores runs every layer's attention as
//                plain ops (scores, weights, weights × V), O(T²) memory per head
//   sink-cache   run_with_cache of the points the sink report reads (probs, slot, gate,
//                resid_post: nn/analysis/analysis.cpp), in float32
// All under NoGradGuard, on random ids, the preset's model (with its G1 gate) at its batch and
// sequence length. Threads: OMP_NUM_THREADS.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

namespace {

struct Way {
    const char* name;
    std::function<void()> run;
    std::vector<double> ms, ratio;  // per round
};

// The value at quantile q of v (0.5: the median), the nearest rank.
double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[size_t(q * double(v.size() - 1) + 0.5)];
}

double time_ms(const std::function<void()>& run) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string preset = "small";
        int rounds = 9;
        for (int i = 1; i < argc; ++i) {
            if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
                rounds = std::atoi(argv[++i]);
                if (rounds < 1) throw std::invalid_argument("--rounds: a positive count");
            } else {
                preset = argv[i];
            }
        }
        const TrainConfig config = TrainConfig::preset(preset);
        manual_seed(0);
        GatedTransformerLM model(config.model);
        model.eval();
        Generator gen(0);
        const Tensor ids = randint(0, config.model.vocab_size, {config.batch_size, config.seq_len}, gen);  // (B, T)
        NoGradGuard no_grad;

        Hooks fused, all;
        for (HookPoint p : all_hook_points()) {
            const ReadHook nothing = [](const Tensor&, int64_t) {};
            all.read(p, nothing);
            if (p != HookPoint::scores) fused.read(p, nothing);
        }
        const std::vector<HookPoint> sink_points{HookPoint::probs, HookPoint::slot, HookPoint::gate,
                                                 HookPoint::resid_post};
        std::vector<Way> ways{
            {"plain", [&] { model.forward(ids); }, {}, {}},
            {"read-fused", [&] { run_with_hooks(model, ids, fused); }, {}, {}},
            {"read-all", [&] { run_with_hooks(model, ids, all); }, {}, {}},
            {"sink-cache", [&] { run_with_cache(model, ids, sink_points); }, {}, {}},
        };
        for (Way& way : ways) way.run();  // warm caches and the allocator once
        for (int r = 0; r < rounds; ++r) {
            std::vector<double> round(ways.size());
            for (size_t k = 0; k < ways.size(); ++k) {
                const size_t w = (k + size_t(r)) % ways.size();
                round[w] = time_ms(ways[w].run);
            }
            for (size_t w = 0; w < ways.size(); ++w) {
                ways[w].ms.push_back(round[w]);
                ways[w].ratio.push_back(round[w] / round[0]);
            }
        }
        std::printf("hooks: preset %s (%lld layers, d_model %lld, %lld heads), forward of %lld x %lld tokens, %d rounds\n",
                    preset.c_str(), (long long)config.model.n_layers, (long long)config.model.d_model,
                    (long long)config.model.attn.n_heads, (long long)config.batch_size, (long long)config.seq_len, rounds);
        std::printf("%-11s %10s %13s %16s %16s\n", "way", "median ms", "median ratio", "ratio quartiles", "lowest-highest");
        std::string json = "{\"bench\": \"hooks\", \"preset\": \"" + preset + "\", \"rounds\": " + std::to_string(rounds);
        for (const Way& way : ways) {
            const double ms = quantile(way.ms, 0.5), ratio = quantile(way.ratio, 0.5);
            const double q1 = quantile(way.ratio, 0.25), q3 = quantile(way.ratio, 0.75);
            const double lo = quantile(way.ratio, 0), hi = quantile(way.ratio, 1);
            std::printf("%-11s %10.2f %13.2f %11.2f-%.2f %11.2f-%.2f\n", way.name, ms, ratio, q1, q3, lo, hi);
            char cell[200];
            std::snprintf(cell, sizeof cell,
                          ", \"%s\": {\"median_ms\": %.2f, \"ratio\": %.3f, \"ratio_q1\": %.3f, \"ratio_q3\": %.3f, "
                          "\"ratio_lo\": %.3f, \"ratio_hi\": %.3f}",
                          way.name, ms, ratio, q1, q3, lo, hi);
            json += cell;
        }
        std::printf("%s}\n", json.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hooks: %s\n", e.what());
        return 1;
    }
}

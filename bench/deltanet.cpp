// deltanet.cpp — one training pass (forward and backward) of the Gated DeltaNet layer
// (nn/gated_deltanet.h, the chunked form) against the full-attention layer of the same width and
// heads (nn/attention.h: the G1 gate, QK-norm and RoPE, as the full-attention layers of the hybrid
// models have them), as the sequence grows. Attention's work grows as T², the chunked delta
// rule's as T (C × C blocks within each chunk, a dk × dv state between chunks), so past some
// length the linear layer must win; how long it takes to get there is what this measures.
//
//   ./build/bench/deltanet [--max-t N] [--reps N] [--d-model N] [--heads N] [--chunk N] [--batch N]
//
// One line per T: the median milliseconds of each layer over --reps runs, the two runs
// alternating after a warm-up of each (so that noise on a shared machine hits both), and their
// ratio. The defaults: d_model 256, 4 heads of 64 (Hk = Hv = 4, dk = dv = 64 for the delta
// rule), chunks of 64, one sequence, T = 128 … 4096.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Milliseconds of one forward and backward of `forward` on x, the module's gradients cleared
// first so that every run does the same work.
double time_pass(Module& m, const Tensor& x, const std::function<Tensor(const Tensor&)>& forward) {
    m.zero_grad();
    const auto start = std::chrono::steady_clock::now();
    const Tensor y = forward(x);  // (B, T, d)
    y.backward(ones_like(y));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    int64_t max_t = 4096, reps = 5, d_model = 256, heads = 4, chunk = 64, batch = 1;
    const std::pair<const char*, int64_t*> flags[] = {{"--max-t", &max_t}, {"--reps", &reps},     {"--d-model", &d_model},
                                                      {"--heads", &heads}, {"--chunk", &chunk}, {"--batch", &batch}};
    try {
        for (int i = 1; i < argc; ++i) {
            const auto flag = std::ranges::find_if(flags, [&](const auto& f) { return std::strcmp(argv[i], f.first) == 0; });
            if (flag == std::end(flags) || i + 1 == argc || (*flag->second = std::atoll(argv[++i])) <= 0)
                throw std::invalid_argument(std::string("deltanet: bad argument '") + argv[i] +
                                            "' (--max-t, --reps, --d-model, --heads, --chunk, --batch, each a positive count)");
        }
        AttentionOptions a;
        a.d_model = d_model, a.n_heads = heads, a.qk_norm = true, a.rope = true;  // the G1 gate by default
        GatedDeltaNetOptions g;
        g.d_model = d_model, g.n_k_heads = heads, g.chunk_size = chunk;
        GatedAttention attention(a);
        GatedDeltaNet deltanet(g);

        std::printf("d_model %ld, %ld heads of %ld, chunks of %ld, batch %ld, %d threads; median of %ld runs, ms\n",
                    long(d_model), long(heads), long(d_model / heads), long(chunk), long(batch), omp_get_max_threads(),
                    long(reps));
        std::printf("%6s %12s %12s %18s\n", "T", "attention", "deltanet", "deltanet/attention");
        Generator gen(0);
        for (int64_t T = 128; T <= max_t; T *= 2) {
            const Tensor x = randn({batch, T, d_model}, gen).requires_grad_();
            const auto attend = [&](const Tensor& in) { return attention.forward(in); };
            const auto delta = [&](const Tensor& in) { return deltanet.forward(in); };
            time_pass(attention, x, attend);
            time_pass(deltanet, x, delta);
            std::vector<double> t_attention, t_deltanet;
            for (int64_t r = 0; r < reps; ++r) {
                t_attention.push_back(time_pass(attention, x, attend));
                t_deltanet.push_back(time_pass(deltanet, x, delta));
            }
            const double ms_a = median(t_attention), ms_d = median(t_deltanet);
            std::printf("%6ld %12.1f %12.1f %18.2f\n", long(T), ms_a, ms_d, ms_d / ms_a);
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}

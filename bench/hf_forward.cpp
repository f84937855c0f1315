// hf_forward.cpp — time the forward of a Hugging Face checkpoint as the analysis runs it, and
// the memory it takes.
//
//   ./build/bench/hf_forward DIR [--mode analysis|inference|report|paired] [--runs 3] [--batch 16]
//                                [--seq-len 256] [--seed 0]
//     → one JSON line: the load time, every run's wall time and their median, every run's CPU
//       time (user + system, all threads) and their median, the process's peak RSS, what the
//       weights and the captured probabilities take, and the loss on the first sequence
//       (next-token cross-entropy), to compare with the peer's
//
// analysis: model.forward(ids, {}, nullptr, &capture), as `gatedgrad sink --hf` runs it
// (analyze() in nn/analysis/analysis.cpp): every layer's attention probabilities (B, H, T, T)
// and hidden states (B, T, d) are kept. inference: the same forward with nothing kept. report:
// the whole of `gatedgrad sink`'s report, analyze() itself: its forward (run_with_cache, which
// copies what it keeps) and the statistics it takes from the probabilities in float64 (the
// JSON's captured sizes and loss then stay 0). All under NoGradGuard and, while the weights are
// bfloat16 (hf::load_folder keeps a BF16 file's dtype), under Autocast(bf16). ru_maxrss is a
// high-water mark of the whole process, so each mode needs a process of its own to be measured.
// paired: each run is an analysis forward and an inference one in the same process, their order
// swapped from run to run, and the line adds the inference runs' times and each pair's ratio
// (analysis / inference): what one process's placement in memory and on the cores does to both
// cancels there, which a ratio between processes carries (its peak RSS is the analysis's).
// The CPU time is what a shared machine's load moves least: the wall time of a run stretches with
// every other process on the cores, its CPU time only through caches and memory bandwidth.
// Threads: OMP_NUM_THREADS. The line names the
// OpenBLAS kernels in use: 0.3.21 does not know every CPU and then falls back to its slowest
// x86-64 ones (Prescott: SSE3) unless OPENBLAS_CORETYPE names a core.
//
// bench/hf_forward_torch.py is the PyTorch peer (the same ids: bench/hf_bench.h); bench/hf_forward.sh
// writes a random checkpoint of Qwen3-1.7B's shape and runs both.
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

namespace {

using namespace gg::bench;

// ids (B, T) from random_ids; targets (B, T): the next token, and ignore_index −100 at the last
// position.
std::pair<Tensor, Tensor> ids_and_targets(int64_t B, int64_t T, int64_t V, uint64_t seed) {
    const std::vector<int64_t> ids = random_ids(B, T, V, seed);
    std::vector<int64_t> targets(size_t(B * T), -100);
    for (int64_t i = 0; i < B * T; ++i)
        if ((i + 1) % T != 0) targets[size_t(i)] = ids[size_t(i + 1)];
    return {from_vector(ids, {B, T}), from_vector(targets, {B, T})};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: hf_forward DIR [--mode analysis|inference|report] [--runs N] [--batch B] [--seq-len T]"
                             " [--seed S]\n");
        return 2;
    }
    try {
        const std::string dir = argv[1];
        std::string mode = "analysis";
        int64_t runs = 3, B = 16, T = 256, seed = 0;
        const std::pair<const char*, int64_t*> number_flags[] = {
            {"--runs", &runs}, {"--batch", &B}, {"--seq-len", &T}, {"--seed", &seed}};
        for (int i = 2; i < argc; ++i) {
            if (read_count_flag(i, argc, argv, number_flags)) continue;
            if (std::strcmp(argv[i], "--mode") == 0 && i + 1 < argc) mode = argv[++i];
            else throw std::invalid_argument(std::string("unknown argument '") + argv[i] + "'");
        }
        if (mode != "analysis" && mode != "inference" && mode != "report" && mode != "paired")
            throw std::invalid_argument("--mode " + mode + ": analysis, inference, report or paired");
        if (runs < 1 || B < 1 || T < 2) throw std::invalid_argument("--runs ≥ 1, --batch ≥ 1 and --seq-len ≥ 2");

        const auto load_start = std::chrono::steady_clock::now();
        const std::shared_ptr<GatedTransformerLM> model = hf::load_folder(dir);
        const double load_s = seconds_since(load_start);
        const double load_peak = status_bytes("VmHWM:"), loaded_rss = status_bytes("VmRSS:");
        reset_peak();
        const LMConfig& config = model->config();
        double weight_bytes = 0;
        for (const Tensor& p : model->parameters()) weight_bytes += bytes_of(p);
        const DType weight_dtype = model->parameters().front().dtype();
        std::optional<Autocast> autocast;
        if (weight_dtype == DType::bf16) autocast.emplace(DType::bf16);
        const NoGradGuard no_grad;

        const int64_t H = config.attn.n_heads, L = config.n_layers;
        const auto [ids, targets] = ids_and_targets(B, T, config.vocab_size, uint64_t(seed));
        std::vector<double> times, cpu_times, plain_times, plain_cpu_times;  // plain: paired's inference runs
        double captured_probs_bytes = 0, captured_bytes = 0, logits_bytes = 0, loss = 0;
        const auto plain_forward = [&] {
            const auto t0 = std::chrono::steady_clock::now();
            const double cpu0 = cpu_seconds();
            model->forward(ids, Tensor(), nullptr, nullptr);
            plain_times.push_back(seconds_since(t0));
            plain_cpu_times.push_back(cpu_seconds() - cpu0);
        };
        // One run of the mode; what it kept is freed on return, before a paired inference run.
        const auto measured_run = [&](int64_t r) {
            LMCapture capture;
            const auto t0 = std::chrono::steady_clock::now();
            const double cpu0 = cpu_seconds();
            if (mode == "report") {
                analyze(*model, ids);
                times.push_back(seconds_since(t0));
                cpu_times.push_back(cpu_seconds() - cpu0);
                return;
            }
            const bool keep = mode == "analysis" || mode == "paired";
            const Tensor logits = model->forward(ids, Tensor(), nullptr, keep ? &capture : nullptr).logits;
            times.push_back(seconds_since(t0));
            cpu_times.push_back(cpu_seconds() - cpu0);
            // Measured from what the pass kept, next to the 4·L·H·B·T² bytes that float32
            // probabilities would take.
            captured_probs_bytes = captured_bytes = 0;
            for (const AttentionCapture& a : capture.attention) {
                captured_probs_bytes += bytes_of(a.probs);
                captured_bytes += bytes_of(a.probs) + bytes_of(a.lse) + bytes_of(a.gate);
            }
            for (const Tensor& h : capture.hidden) captured_bytes += bytes_of(h);
            logits_bytes = bytes_of(logits);
            // After the clock, and on one sequence, so that it adds nothing to the peak: whether
            // this forward computes the same model as the peer's.
            if (r == 0) loss = cross_entropy(logits.select(0, 0).to(DType::f32), targets.select(0, 0)).item();
        };
        for (int64_t r = 0; r < runs; ++r) {
            if (mode == "paired" && r % 2 == 0) plain_forward();
            measured_run(r);
            if (mode == "paired" && r % 2 == 1) plain_forward();
        }
        const auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        const auto list = [](const std::vector<double>& v) {
            std::string text;
            for (double t : v) text += (text.empty() ? "" : ", ") + std::to_string(t);
            return text;
        };
        std::string paired;  // the paired mode's own fields
        if (mode == "paired") {
            std::vector<double> ratios, cpu_ratios;
            for (size_t r = 0; r < times.size(); ++r) {
                ratios.push_back(times[r] / plain_times[r]);
                cpu_ratios.push_back(cpu_times[r] / plain_cpu_times[r]);
            }
            paired = "\"inference_times_s\": [" + list(plain_times) + "], \"inference_cpu_times_s\": [" +
                     list(plain_cpu_times) + "], \"ratios\": [" + list(ratios) + "], \"median_ratio\": " +
                     std::to_string(median(ratios)) + ", \"cpu_ratios\": [" + list(cpu_ratios) +
                     "], \"median_cpu_ratio\": " + std::to_string(median(cpu_ratios)) + ", ";
        }
        const double probs_f32_bytes = 4.0 * double(L) * double(H) * double(B) * double(T) * double(T);
        std::printf("{\"impl\": \"gatedgrad\", \"mode\": \"%s\", \"weights\": \"%s\", \"compute\": \"%s\", "
                    "\"threads\": %d, \"openblas_core\": \"%s\", \"batch\": %lld, \"seq_len\": %lld, \"runs\": %lld, \"times_s\": [%s], "
                    "\"median_s\": %.3f, \"cpu_times_s\": [%s], \"median_cpu_s\": %.3f, %s\"load_s\": %.2f, \"peak_rss_gb\": %.3f, \"weights_gb\": %.3f, "
                    "\"probs_f32_gb\": %.3f, \"captured_probs_gb\": %.3f, \"captured_gb\": %.3f, "
                    "\"logits_gb\": %.3f, \"load_peak_rss_gb\": %.3f, \"loaded_rss_gb\": %.3f, "
                    "\"forward_peak_rss_gb\": %.3f, \"loss\": %.4f}\n",
                    mode.c_str(), dtype_name(weight_dtype), autocast ? "autocast bf16" : "f32",
                    omp_get_max_threads(), openblas_get_corename(), (long long)B, (long long)T, (long long)runs, list(times).c_str(),
                    median(times), list(cpu_times).c_str(), median(cpu_times), paired.c_str(), load_s, peak_rss_bytes() / 1e9, weight_bytes / 1e9,
                    probs_f32_bytes / 1e9, captured_probs_bytes / 1e9, captured_bytes / 1e9, logits_bytes / 1e9,
                    load_peak / 1e9, loaded_rss / 1e9, status_bytes("VmHWM:") / 1e9, loss);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hf_forward: %s\n", e.what());
        return 1;
    }
}

// core_bench.cpp — how fast the core is, measured against what it is built on:
//   1. matmul through gg::matmul vs the same cblas_sgemm called directly, and the bfloat16
//      matmul (float32 sums) vs the float32 one on the same values,
//   2. element-wise add and mul bandwidth,
//   3. what the autograd graph costs per op, on tensors too small for the maths to matter,
//   4. sampling: time per token and peak memory as the KV cache grows,
//   5. parsing untrusted JSON (nn/untrusted.h) against nlohmann's plain parse, as a safetensors
//      header grows,
//   6. fused attention, forward and backward, with each score function,
//   7. the bfloat16 attention forward of a real model's layer with its probabilities kept, as
//      `gatedgrad sink --hf` runs it, against the same forward without them.
// Every figure is the median of several runs after a warm-up; where two things are
// compared their runs alternate, so that noise (frequency changes, neighbours) hits both.
#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>

#include <cstring>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "gatedgrad.h"
#include "cpu/gemm.h"

namespace {

template <class F>
double time_once(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Runs `ours` and `reference` once each to warm up, then `reps` times alternately;
// returns the median seconds of each.
template <class A, class B>
std::pair<double, double> time_pair(int reps, A&& ours, B&& reference) {
    ours();
    reference();
    std::vector<double> t_ours, t_reference;
    for (int r = 0; r < reps; ++r) {
        t_ours.push_back(time_once(ours));
        t_reference.push_back(time_once(reference));
    }
    return {median(t_ours), median(t_reference)};
}

void bench_matmul() {
    std::printf("\n1. matmul, float32 square (n, n) @ (n, n): GFLOP/s = 2n³ / time\n");
    std::printf("%6s %14s %14s %10s\n", "n", "gg::matmul", "cblas_sgemm", "gg/direct");
    gg::Generator gen(0);
    for (int64_t n : {256, 512, 1024}) {
        const gg::Tensor a = gg::randn({n, n}, gen), b = gg::randn({n, n}, gen);
        gg::Tensor c = gg::Tensor::empty({n, n});
        // Each timed sample makes (1024/n)³ calls, the same work at every n, so that a
        // sub-millisecond call is not lost in timer and scheduler noise.
        const int64_t calls = (1024 / n) * (1024 / n) * (1024 / n);
        // gg keeps OpenBLAS on its caller's thread and splits a GEMM over OpenMP's threads
        // (cpu/backend.cpp); the direct call gets as many OpenBLAS threads instead.
        const auto [t_gg, t_blas] = time_pair(
            9, [&] { for (int64_t i = 0; i < calls; ++i) gg::matmul(a, b); },
            [&] {
                openblas_set_num_threads(omp_get_max_threads());
                for (int64_t i = 0; i < calls; ++i)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                                b.data<float>(), n, 0.0f, c.data<float>(), n);
                openblas_set_num_threads(1);
            });
        const double flops = 2.0 * n * n * n * calls;
        std::printf("%6ld %14.1f %14.1f %10.3f\n", long(n), flops / t_gg / 1e9, flops / t_blas / 1e9,
                    (flops / t_gg) / (flops / t_blas));
    }
}

// The bfloat16 GEMM runs on the CPU's bfloat16 dot products where it has them (oneDNN,
// cpu/gemm_dnnl.cpp) and otherwise widens its operands and calls sgemm (cpu/gemm_bf16.cpp),
// which can only be slower than float32: the row says by how much the widening and the
// rounding of C cost, and where the instructions exist, what they gain over both.
void bench_matmul_bf16() {
    const bool hardware = gg::bf16_gemm_on_hardware();
    std::printf("\n1b. matmul, bfloat16 vs float32 on the same values, square (n, n) @ (n, n): GFLOP/s\n");
    std::printf("    bfloat16 instructions: %s\n", hardware ? "yes (oneDNN)" : "no: the widened path only");
    std::printf("%6s %14s %14s %14s %10s %10s\n", "n", "bf16 hardware", "bf16 widened", "f32 matmul", "hw/f32",
                "widened/f32");
    gg::Generator gen(0);
    for (int64_t n : {256, 512, 1024, 2048}) {
        const gg::Tensor a = gg::randn({n, n}, gen, gg::DType::bf16), b = gg::randn({n, n}, gen, gg::DType::bf16);
        const gg::Tensor a32 = a.to(gg::DType::f32), b32 = b.to(gg::DType::f32);
        const int64_t calls = std::max<int64_t>((1024 / n) * (1024 / n) * (1024 / n), 1);
        const auto widened = [&] {
            const bool was = gg::allow_bf16_hardware(false);
            for (int64_t i = 0; i < calls; ++i) gg::matmul(a, b);
            gg::allow_bf16_hardware(was);
        };
        const auto [t_widened, t_single] =
            time_pair(9, widened, [&] { for (int64_t i = 0; i < calls; ++i) gg::matmul(a32, b32); });
        const double t_hardware =
            hardware ? time_pair(9, [&] { for (int64_t i = 0; i < calls; ++i) gg::matmul(a, b); }, widened).first : 0;
        const double flops = 2.0 * n * n * n * calls;
        std::printf("%6ld %14.1f %14.1f %14.1f %10.3f %10.3f\n", long(n), hardware ? flops / t_hardware / 1e9 : 0.0,
                    flops / t_widened / 1e9, flops / t_single / 1e9, hardware ? t_single / t_hardware : 0.0,
                    t_single / t_widened);
    }
}

// A real model's language-model head, x (4096 tokens, 2048) times Wᵀ (V, 2048)ᵀ in bfloat16,
// with V cut to 32768 words to keep the row short: in panels of 32 MiB float32 copies (the
// library's way) against one whole copy of each operand (what it did before, 4× the memory of
// the result). The ratio is the panels' price in time.
void bench_matmul_bf16_panels() {
    constexpr int64_t M = 4096, K = 2048, V = 32768;
    std::printf("\n1c. bfloat16 LM head (%ld, %ld) @ (%ld, %ld)^T, panels vs whole copies: GFLOP/s\n", long(M), long(K),
                long(V), long(K));
    gg::Generator gen(0);
    const gg::Tensor x = gg::randn({M, K}, gen, gg::DType::bf16), w = gg::randn({V, K}, gen, gg::DType::bf16);
    gg::Tensor out = gg::Tensor::empty({M, V}, gg::DType::bf16);
    const auto run = [&](int64_t panel) {
        gg::cpu_gemm_bf16(1, false, true, M, V, K, 1.0, x.data<gg::bfloat16>(), K, 0, w.data<gg::bfloat16>(), K, 0,
                          0.0, out.data<gg::bfloat16>(), V, 0, panel);
    };
    const bool was = gg::allow_bf16_hardware(false);  // panels are the widened path's
    const auto [t_panels, t_whole] = time_pair(3, [&] { run(gg::kBf16GemmPanel); }, [&] { run(int64_t(1) << 40); });
    gg::allow_bf16_hardware(was);
    const double flops = 2.0 * M * K * V;
    std::printf("%14s %14s %10s\n", "panels", "whole", "whole/panels");
    std::printf("%14.1f %14.1f %10.3f\n", flops / t_panels / 1e9, flops / t_whole / 1e9, t_whole / t_panels);
}

// gg::add and gg::mul allocate their output on every call; the reference loop writes into
// a buffer it already has. The gap is the price of fresh memory: 64 MiB comes straight
// from mmap, and the kernel zeroes it page by page as the op first writes it.
void bench_elementwise() {
    constexpr int64_t N = 16 << 20;
    std::printf("\n2. element-wise on %ld floats: GB/s = 3 x 4 bytes x N / time (two reads, one write)\n", long(N));
    std::printf("%6s %14s %22s\n", "op", "gg (GB/s)", "loop into buffer (GB/s)");
    gg::Generator gen(0);
    const gg::Tensor a = gg::randn({N}, gen), b = gg::randn({N}, gen);
    gg::Tensor out = gg::Tensor::empty({N});
    const float *x = a.data<float>(), *y = b.data<float>();
    float* o = out.data<float>();
    const double bytes = 3.0 * 4 * N;
    auto run = [&](const char* name, auto gg_op, auto f) {
        const auto [t_gg, t_loop] = time_pair(
            9, [&] { gg_op(a, b); },
            [&] {
#pragma omp parallel for
                for (int64_t i = 0; i < N; ++i) o[i] = f(x[i], y[i]);
            });
        std::printf("%6s %14.1f %22.1f\n", name, bytes / t_gg / 1e9, bytes / t_loop / 1e9);
    };
    run("add", gg::add, std::plus<float>());
    run("mul", gg::mul, std::multiplies<float>());
}

// x = x + c, `ops` times, on 16-element tensors, then backward and freeing the graph.
void bench_autograd() {
    constexpr int64_t ops = 10000;
    std::printf("\n3. autograd overhead: x = x + c, %ld times on 16 floats, then backward\n", long(ops));
    const gg::Tensor c = gg::ones({16});
    std::vector<double> forward, backward, release;
    for (int run = 0; run < 8; ++run) {  // run 0 warms up
        gg::Tensor x0 = gg::zeros({16});
        x0.requires_grad_();
        gg::Tensor x = x0;
        const double t_forward = time_once([&] {
            for (int64_t i = 0; i < ops; ++i) x = x + c;
        });
        const double t_backward = time_once([&] { x.backward(gg::ones({16})); });
        const double t_release = time_once([&] { x = gg::Tensor(); });  // the last reference to the 10,000 nodes
        if (run == 0) continue;
        forward.push_back(t_forward);
        backward.push_back(t_backward);
        release.push_back(t_release);
    }
    const double us = 1e6 / ops;
    std::printf("   forward %.2f µs/op, backward %.2f µs/op, freeing the graph %.2f µs/op: total %.2f µs/op\n",
                median(forward) * us, median(backward) * us, median(release) * us,
                (median(forward) + median(backward) + median(release)) * us);
}

// generate() with the tiny preset's model (random weights: speed does not depend on them),
// attending to its 64-token training window (what `gatedgrad sample` does) and then to
// every token. The process's peak resident memory only grows, so each row gives how far it
// rose above its value before the first row. Windowed, time and memory per token stay
// flat; with every token kept they grow with the context, by a few MB at 2000 tokens
// (concatenating the cache each token made it about 1.5 GB).
void bench_sampling() {
    std::printf("\n4. sampling, tiny preset's model (2 layers, d_model 64, RoPE, max_len 64), one sequence\n");
    std::printf("%8s %8s %12s %26s\n", "context", "tokens", "ms/token", "peak RSS rise so far (MB)");
    const auto peak_mb = [] {
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        return double(usage.ru_maxrss) / 1024;
    };
    gg::manual_seed(0);
    const gg::nn::LMConfig config = gg::nn::TrainConfig::preset("tiny").model;
    const gg::nn::GatedTransformerLM model(config);
    const double before = peak_mb();
    for (int64_t context : {config.max_len, int64_t(0)})
        for (int64_t tokens : {200, 2000, 5000}) {
            gg::nn::SampleOptions options;
            options.max_new_tokens = tokens;
            options.context = context;
            gg::Generator gen(1);
            const double t = time_once([&] { gg::nn::generate(model, {gg::nn::kBOS}, options, gen); });
            std::printf("%8s %8ld %12.3f %26.1f\n", context ? std::to_string(context).c_str() : "all", long(tokens),
                        t / double(tokens) * 1e3, peak_mb() - before);
        }
}

// A header of n tensors, as the checks of nn/untrusted.h parse it and as nlohmann's plain parse
// (no limits, a repeated key kept silently) does. Linear when µs per tensor stays flat as n
// grows; with a per-value callback it grew with n (46 s at 30k tensors).
void bench_json() {
    std::printf("\n5. JSON of a safetensors header with n tensors: parse_untrusted_json vs nlohmann::json::parse\n");
    std::printf("%8s %8s %14s %14s %10s\n", "n", "MB", "ours us/tensor", "plain us/tensor", "ours/plain");
    for (int64_t n : {10'000, 100'000, 400'000}) {
        std::string text = "{";
        for (int64_t i = 0; i < n; ++i)
            text.append(i ? ",\"model.layers." : "\"model.layers.")
                .append(std::to_string(i) + ".weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[" +
                        std::to_string(64 * i) + "," + std::to_string(64 * i + 64) + "]}");
        text += "}";
        const auto [ours, plain] = time_pair(
            3, [&] { gg::nn::parse_untrusted_json(text); }, [&] { return nlohmann::json::parse(text); });
        std::printf("%8ld %8.1f %14.3f %14.3f %10.2f\n", long(n), double(text.size()) / 1e6, ours / double(n) * 1e6,
                    plain / double(n) * 1e6, ours / plain);
    }
}

// scaled_dot_product_attention forward and backward on float32, causal, the sizes of a small
// model's layer (B 4, H 8, T 512, D 64), with each score function (tensor/score_functions.h):
// milliseconds for each, the backward recomputing the weights (at T 512 they are past the CPU's
// attention_keep_bytes) and, for sink, summing the sink logit's gradient. The functions take
// turns within each run, so that noise hits them all.
void bench_attention() {
    constexpr int64_t B = 4, H = 8, T = 512, D = 64;
    std::printf("\n6. fused attention, float32, causal, B %ld, H %ld, T %ld, D %ld: ms\n", long(B), long(H), long(T),
                long(D));
    std::printf("%10s %10s %10s\n", "scores", "forward", "backward");
    gg::Generator gen(0);
    const gg::Tensor q = gg::randn({B, H, T, D}, gen).requires_grad_(), k = gg::randn({B, H, T, D}, gen),
                     v = gg::randn({B, H, T, D}, gen), g = gg::randn({B, H, T, D}, gen);
    const gg::ScoreFunction functions[] = {gg::ScoreFunction::softmax, gg::ScoreFunction::softmax1,
                                           gg::ScoreFunction::sink, gg::ScoreFunction::sigmoid,
                                           gg::ScoreFunction::softpick};
    constexpr size_t n = std::size(functions);
    std::vector<double> forward[n], backward[n];
    for (int run = 0; run < 10; ++run)  // run 0 warms up
        for (size_t i = 0; i < n; ++i) {
            const gg::nn::SdpaOptions options{
                .score_fn = functions[i],
                .sink = functions[i] == gg::ScoreFunction::sink ? gg::zeros({H}).requires_grad_() : gg::Tensor()};
            gg::Tensor out;
            const double t_forward = time_once([&] { out = gg::nn::scaled_dot_product_attention(q, k, v, options); });
            const double t_backward = time_once([&] { out.backward(g); });
            if (run == 0) continue;
            forward[i].push_back(t_forward);
            backward[i].push_back(t_backward);
        }
    for (size_t i = 0; i < n; ++i)
        std::printf("%10s %10.2f %10.2f\n", gg::nn::score_function_name(functions[i]).c_str(), median(forward[i]) * 1e3,
                    median(backward[i]) * 1e3);
}

// The bfloat16 causal attention of one layer of Qwen3-1.7B at 16 × 256 tokens (B 16, 16 query
// heads and 8 KV heads of D 128), forward only, as inference runs it and as the analysis does
// (every probability kept, in bfloat16): milliseconds, the two alternating, medians of 10 after
// a warm-up. Their difference is what keeping P costs a layer, outside the memory it takes.
void bench_attention_kept() {
    constexpr int64_t B = 16, H = 16, Hkv = 8, T = 256, D = 128;
    std::printf("\n7. bfloat16 attention forward, causal, B %ld, H %ld, Hkv %ld, T %ld, D %ld: ms\n", long(B), long(H),
                long(Hkv), long(T), long(D));
    gg::Generator gen(0);
    const gg::NoGradGuard no_grad;
    const auto input = [&](int64_t heads) { return gg::randn({B, heads, T, D}, gen).to(gg::DType::bf16); };
    const gg::Tensor q = input(H), k = input(Hkv), v = input(Hkv);
    const gg::nn::SdpaOptions options{};
    const auto [t_kept, t_plain] = time_pair(
        10,
        [&] {
            gg::Tensor probs, lse;
            gg::nn::scaled_dot_product_attention(q, k, v, options, &probs, &lse);
        },
        [&] { gg::nn::scaled_dot_product_attention(q, k, v, options); });
    std::printf("%16s %10s %14s\n", "probabilities", "forward", "kept / plain");
    std::printf("%16s %10.2f\n%16s %10.2f %14.3f\n", "not kept", t_plain * 1e3, "kept (bfloat16)", t_kept * 1e3,
                t_kept / t_plain);
}

}  // namespace

// ./core_bench runs every section; ./core_bench NAME… only those named (matmul, matmul_bf16,
// matmul_bf16_panels, elementwise, autograd, sampling, json, attention, attention_kept).
int main(int argc, char** argv) {
    const std::pair<const char*, void (*)()> sections[] = {
        {"matmul", bench_matmul},   {"matmul_bf16", bench_matmul_bf16}, {"matmul_bf16_panels", bench_matmul_bf16_panels},
        {"elementwise", bench_elementwise}, {"autograd", bench_autograd}, {"sampling", bench_sampling},
        {"json", bench_json},       {"attention", bench_attention}, {"attention_kept", bench_attention_kept}};
    for (int i = 1; i < argc; ++i)
        if (std::ranges::none_of(sections, [&](const auto& s) { return std::strcmp(s.first, argv[i]) == 0; })) {
            std::fprintf(stderr, "core_bench: no section '%s'\n", argv[i]);
            return 2;
        }
    std::printf("gatedgrad core benchmark: OpenMP threads %d (direct cblas_sgemm: as many OpenBLAS threads)\n",
                omp_get_max_threads());
    for (const auto& [name, run] : sections)
        if (argc == 1 || std::any_of(argv + 1, argv + argc, [&](const char* a) { return std::strcmp(a, name) == 0; }))
            run();
}

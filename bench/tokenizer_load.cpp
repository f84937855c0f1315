// tokenizer_load.cpp — how long BpeTokenizer::from_file takes on one tokenizer.json: the
// median of RUNS loads, in wall and in CPU seconds, as one JSON line. bench/tokenizer_load.sh
// runs it beside Hugging Face's tokenizers on the same files.
//   tokenizer_load FILE [RUNS]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "gatedgrad.h"

namespace {

double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr, "usage: tokenizer_load FILE [RUNS]\n");
        return 2;
    }
    const int runs = argc == 3 ? std::max(1, std::atoi(argv[2])) : 5;
    std::vector<double> wall, cpu;
    int64_t vocab = 0;
    try {
        for (int i = 0; i < runs; ++i) {
            const auto start = std::chrono::steady_clock::now();
            const double cpu_start = cpu_seconds();
            vocab = gg::nn::BpeTokenizer::from_file(argv[1]).vocab_size();
            cpu.push_back(cpu_seconds() - cpu_start);
            wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenizer_load: %s\n", e.what());
        return 1;
    }
    std::printf("{\"runs\": %d, \"vocab_size\": %lld, \"wall_s\": %.4f, \"cpu_s\": %.4f}\n", runs, (long long)vocab,
                median(wall), median(cpu));
    return 0;
}

// long_context.h — what tutorial 09's files share: one evaluation of a trained model at one
// length with one RoPE scaling, and its pictures (plots.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gatedgrad.h"

namespace tutorial {

const std::vector<int64_t> kMultiples{1, 2, 4, 8};  // evaluation length / training length
const std::vector<gg::nn::RopeScaling> kMethods{gg::nn::RopeScaling::none, gg::nn::RopeScaling::interpolation,
                                                gg::nn::RopeScaling::ntk, gg::nn::RopeScaling::yarn};

struct Eval {
    std::string model;  // "baseline" or "g1"
    size_t method = 0;  // index into kMethods
    int64_t length = 0;
    double loss_all = 0, loss_beyond = NAN;  // all positions; positions ≥ the training length
    std::vector<double> per_position;
};

// long_context.svg (loss against the evaluation length, one line per model and method) and
// loss_per_position.svg (at 8 L) in dir; L is the training length. The run draws them from
// its evaluations, --replot from those read back from long_context.json.
void plot_results(const std::filesystem::path& dir, int64_t L, const std::vector<Eval>& evals);
// The evaluations and the training length in dir/long_context.json.
std::vector<Eval> read_evals(const std::filesystem::path& dir, int64_t& L);

}  // namespace tutorial

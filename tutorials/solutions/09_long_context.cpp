// Reference solutions of tutorial 09's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include "tutorials/09_long_context/exercises/exercises.h"

#include <algorithm>
#include <cmath>

namespace exercises {

std::vector<double> rope_frequencies(int64_t head_dim, const gg::nn::RopeOptions& options) {
    const double D = double(head_dim), s = options.factor;
    using gg::nn::RopeScaling;
    // NTK-aware: a larger base slows the low frequencies by up to s and keeps the high ones.
    const double base = options.scaling == RopeScaling::ntk ? options.base * std::pow(s, D / (D - 2)) : options.base;
    std::vector<double> theta(size_t(head_dim / 2));
    for (size_t c = 0; c < theta.size(); ++c) {
        const double plain = std::pow(base, -2.0 * double(c) / D);
        theta[c] = plain;
        if (options.scaling == RopeScaling::interpolation) theta[c] = plain / s;
        if (options.scaling == RopeScaling::yarn) {
            const double turns = double(options.original_length) * plain / (2 * M_PI);
            const double keep = std::clamp((turns - options.yarn_beta_slow) /
                                               (options.yarn_beta_fast - options.yarn_beta_slow), 0.0, 1.0);
            theta[c] = keep * plain + (1 - keep) * plain / s;
        }
    }
    return theta;
}

}  // namespace exercises

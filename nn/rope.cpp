#include "nn/rope.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

namespace gg::nn {

RopeScaling parse_rope_scaling(const std::string& given) {
    std::string name = given;  // case-insensitive: "YaRN", "NTK" as the papers write them
    std::ranges::transform(name, name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (name == "none") return RopeScaling::none;
    if (name == "pi" || name == "interpolation") return RopeScaling::interpolation;
    if (name == "ntk") return RopeScaling::ntk;
    if (name == "yarn") return RopeScaling::yarn;
    throw std::invalid_argument("rope scaling '" + given + "' is not one of none, pi, ntk, yarn");
}

const char* rope_scaling_name(RopeScaling scaling) {
    switch (scaling) {
        case RopeScaling::none: return "none";
        case RopeScaling::interpolation: return "pi";
        case RopeScaling::ntk: return "ntk";
        case RopeScaling::yarn: return "yarn";
    }
    return "?";
}

RoPE::RoPE(int64_t head_dim, RopeOptions options) : head_dim_(head_dim) {
    if (head_dim % 2 != 0) throw std::invalid_argument("RoPE: head dim " + std::to_string(head_dim) + " is odd");
    set_options(options);
}

void RoPE::set_options(const RopeOptions& options) {
    if (options.factor < 1 || options.base <= 1)
        throw std::invalid_argument("RoPE: need factor ≥ 1 and base > 1, got factor " + std::to_string(options.factor) +
                                    " base " + std::to_string(options.base));
    if (options.scaling == RopeScaling::yarn && options.original_length <= 0)
        throw std::invalid_argument("RoPE: YaRN needs the original (training) length");
    const int64_t R = int64_t(double(head_dim_) * options.partial);
    if (!(options.partial > 0 && options.partial <= 1) || R < 2 || R % 2 != 0)
        throw std::invalid_argument("RoPE: partial " + std::to_string(options.partial) + " of head dim " +
                                    std::to_string(head_dim_) + " turns " + std::to_string(R) +
                                    " channels; need an even number ≥ 2");
    options_ = options;
}

int64_t RoPE::rotary_dim() const { return int64_t(double(head_dim_) * options_.partial); }

std::vector<double> RoPE::frequencies() const {
    const int64_t D = rotary_dim();
    const double s = options_.factor;
    double base = options_.base;
    if (options_.scaling == RopeScaling::ntk) base *= std::pow(s, double(D) / (D - 2));
    std::vector<double> theta(D / 2);
    for (int64_t c = 0; c < D / 2; ++c) {
        theta[c] = std::pow(base, -2.0 * c / D);
        if (options_.scaling == RopeScaling::interpolation) theta[c] /= s;
        if (options_.scaling == RopeScaling::yarn) {
            // turns the channel makes over the training length: L θ_c / 2π
            const double turns = options_.original_length * theta[c] / (2 * M_PI);
            const double keep = std::clamp((turns - options_.yarn_beta_slow) /
                                               (options_.yarn_beta_fast - options_.yarn_beta_slow), 0.0, 1.0);
            theta[c] = keep * theta[c] + (1 - keep) * theta[c] / s;
        }
    }
    return theta;
}

std::pair<Tensor, Tensor> RoPE::tables(int64_t T, int64_t offset, DType dtype, Device device) const {
    const int64_t D = rotary_dim();
    const std::vector<double> theta = frequencies();
    const double mscale = options_.scaling == RopeScaling::yarn ? 0.1 * std::log(options_.factor) + 1 : 1.0;
    std::vector<double> cos_v(T * D), sin_v(T * D);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < D; ++c) {
            const double angle = double(offset + t) * theta[c % (D / 2)];
            cos_v[t * D + c] = std::cos(angle) * mscale;
            sin_v[t * D + c] = std::sin(angle) * mscale;
        }
    // Computed on the host in double, then moved to where x is.
    return {from_vector(cos_v, {T, D}).to(dtype).to(device), from_vector(sin_v, {T, D}).to(dtype).to(device)};
}

Tensor RoPE::forward(const Tensor& x, int64_t offset) const {
    check_defined(x, "RoPE");
    if (x.dim() != 4 || x.size(-1) != head_dim_)
        throw std::invalid_argument("RoPE: expected (B, H, T, " + std::to_string(head_dim_) + "), got " +
                                    shape_str(x.shape()));
    const auto [cos, sin] = tables(x.size(2), offset, x.dtype(), x.device());
    // (x1, x2) ↦ (x1 cos − x2 sin, x2 cos + x1 sin), one fused kernel each way
    const int64_t R = rotary_dim();
    if (R == head_dim_) return rope(x, cos, sin);
    return cat({rope(x.narrow(-1, 0, R), cos, sin), x.narrow(-1, R, head_dim_ - R)}, -1);  // the rest passes
}

}  // namespace gg::nn

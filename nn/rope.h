// rope.h — rotary position embeddings (Su et al. 2021) and their long-context scalings.
//
// Channel pair (c, c + D/2) of a head vector at position m is rotated by the angle
// m·θ_c, θ_c = base^(−2c/D). Then q_m·k_n depends only on m − n. To run past the
// training length L there are three rescalings (tutorial 09 compares them; the paper's long-
// context result used YaRN, docs/paper.md), for a factor s:
//   position interpolation: m → m / s (every frequency slowed down by s);
//   NTK-aware:              base → base · s^(D/(D−2)) (high frequencies kept, low slowed);
//   YaRN:                   per channel, blend θ_c and θ_c/s by how many turns the channel
//                           makes within L (ramp between β_slow and β_fast turns), and scale
//                           the logits by (0.1 ln s + 1)² via cos/sin.
// Partial rotary (GPT-NeoX; Qwen3-Next and Qwen3.5 rotate a quarter): only the first
// R = ⌊partial · D⌋ channels of a head turn, as a RoPE of size R (pairs (c, c + R/2), θ_c =
// base^(−2c/R)); the other D − R carry no position.
#pragma once
#include <cstdint>
#include <string>

#include "autograd/ops.h"

namespace gg::nn {

enum class RopeScaling { none, interpolation, ntk, yarn };
RopeScaling parse_rope_scaling(const std::string& name);  // "none", "pi", "ntk", "yarn", any case
const char* rope_scaling_name(RopeScaling scaling);

struct RopeOptions {
    double base = 10000;
    RopeScaling scaling = RopeScaling::none;
    double factor = 1;             // s: how many times longer than the training length
    int64_t original_length = 0;   // L, used by YaRN
    double yarn_beta_fast = 32;    // channels turning more than this within L keep θ_c
    double yarn_beta_slow = 1;     // channels turning less than this use θ_c / s
    double partial = 1;            // the share of each head's channels that turn, in (0, 1]
};

class RoPE {
public:
    RoPE(int64_t head_dim, RopeOptions options = {});
    // x (B, H, T, D) at positions [offset, offset + T) → rotated (B, H, T, D)
    Tensor forward(const Tensor& x, int64_t offset = 0) const;
    const RopeOptions& options() const { return options_; }
    void set_options(const RopeOptions& options);  // e.g. switch scaling for evaluation
    std::vector<double> frequencies() const;      // θ_c after scaling, c < R/2
    int64_t rotary_dim() const;                    // R: the channels that turn

private:
    // cos and sin of every angle, (T, R) with each frequency written twice, on `device`.
    std::pair<Tensor, Tensor> tables(int64_t T, int64_t offset, DType dtype, Device device) const;
    int64_t head_dim_;
    RopeOptions options_;
};

}  // namespace gg::nn

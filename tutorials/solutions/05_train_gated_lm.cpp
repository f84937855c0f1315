// Reference solutions of tutorial 05's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include <array>
#include <cmath>
#include <numbers>

#include "tutorials/05_train_gated_lm/exercises/exercises.h"

namespace exercises {

double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double max_lr, double min_lr) {
    if (step < warmup) return max_lr * double(step + 1) / double(warmup);
    if (step >= total) return min_lr;
    const double progress = double(step - warmup) / double(total - warmup);  // 0 → 1 over the decay
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

double unigram_entropy(const std::vector<int64_t>& bytes) {
    std::array<double, 256> counts{};
    for (int64_t b : bytes) counts[size_t(b)] += 1;
    double h = 0;
    for (double c : counts)
        if (c > 0) h -= c / double(bytes.size()) * std::log(c / double(bytes.size()));
    return h;
}

void adamw_step(const gg::Tensor& p, const gg::Tensor& grad, const gg::Tensor& m, const gg::Tensor& v, int64_t t,
                const AdamWSettings& s) {
    gg::NoGradGuard no_grad;
    p.copy_(p * (1 - s.lr * s.weight_decay));
    m.copy_(m * s.beta1 + grad * (1 - s.beta1));
    v.copy_(v * s.beta2 + grad * grad * (1 - s.beta2));
    const gg::Tensor m_hat = m / (1 - std::pow(s.beta1, double(t))), v_hat = v / (1 - std::pow(s.beta2, double(t)));
    p.copy_(p - m_hat / (gg::sqrt(v_hat) + s.eps) * s.lr);
}

}  // namespace exercises

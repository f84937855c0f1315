#include "nn/train/synthetic.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gg::nn {

namespace {
// Gamma(α, 1) by Marsaglia and Tsang (2000): for α ≥ 1 a squeezed rejection from a cubed
// normal; for α < 1, Gamma(α + 1) · U^(1/α).
double gamma_draw(double alpha, Generator& gen) {
    if (alpha < 1) return gamma_draw(alpha + 1, gen) * std::pow(1.0 - gen.uniform(), 1.0 / alpha);
    const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    while (true) {
        const double z = gen.normal(), v = std::pow(1.0 + c * z, 3.0);
        if (v <= 0) continue;
        const double u = 1.0 - gen.uniform();  // (0, 1]
        if (std::log(u) < 0.5 * z * z + d - d * v + d * std::log(v)) return d * v;
    }
}
}  // namespace

BigramBackcopy::BigramBackcopy(const BigramBackcopyOptions& options) : options_(options) {
    const int64_t V = options.vocab;
    if (V < 4 || options.successors < 1 || options.successors > V || options.triggers < 1 ||
        options.triggers >= V / 2 || options.val_count < 1 || !(options.concentration >= 0) ||
        !std::isfinite(options.concentration))
        throw std::invalid_argument("BigramBackcopy: vocab " + std::to_string(V) + ", successors " +
                                    std::to_string(options.successors) + ", triggers " +
                                    std::to_string(options.triggers) + ", concentration " +
                                    std::to_string(options.concentration) +
                                    ": need vocab ≥ 4, 1 ≤ successors ≤ vocab, 1 ≤ triggers < vocab/2, "
                                    "a finite concentration ≥ 0");
    Generator gen(options.seed);
    // A Dirichlet(α, …, α) draw is a vector of Gamma(α) draws, normalised.
    P_.assign(V * V, 0.0);
    std::vector<int64_t> order(V);
    for (int64_t a = 0; a < V; ++a) {
        double total = 0;
        if (options.concentration > 0) {
            for (int64_t b = 0; b < V; ++b) total += P_[a * V + b] = gamma_draw(options.concentration, gen);
        } else {
            // `successors` distinct tokens (a partial Fisher–Yates shuffle) with Dirichlet(1)
            // weights (Gamma(1) is the exponential distribution).
            for (int64_t j = 0; j < V; ++j) order[j] = j;
            for (int64_t j = 0; j < options.successors; ++j) {
                std::swap(order[j], order[gen.randint(j, V)]);
                const double w = -std::log(1.0 - gen.uniform());
                P_[a * V + order[j]] = w;
                total += w;
            }
        }
        for (int64_t b = 0; b < V; ++b) P_[a * V + b] /= total;
    }
    for (int64_t j = 0; j < V; ++j) order[j] = j;
    for (int64_t j = 0; j < options.triggers; ++j) {
        std::swap(order[j], order[gen.randint(j, V)]);
        triggers_.push_back(order[j]);
    }
    std::sort(triggers_.begin(), triggers_.end());
}

bool BigramBackcopy::is_trigger(int64_t token) const {
    return std::find(triggers_.begin(), triggers_.end(), token) != triggers_.end();
}

Batch BigramBackcopy::sample(int64_t B, int64_t T, Generator& gen) const {
    const int64_t V = options_.vocab;
    std::vector<int64_t> x(B * T), y(B * T);
    std::vector<int64_t> s(T + 1);  // BOS s_1 … s_T
    for (int64_t b = 0; b < B; ++b) {
        s[0] = bos();
        do s[1] = gen.randint(0, V);
        while (is_trigger(s[1]));
        for (int64_t t = 1; t < T; ++t) {
            if (is_trigger(s[t])) {
                s[t + 1] = s[t - 1];  // the back-copy
                continue;
            }
            double u = gen.uniform();  // inverse CDF of the row P(· | s_t)
            int64_t next = 0;
            while (next < V - 1 && (u -= P_[s[t] * V + next]) >= 0) ++next;
            // rounding can leave u ≥ 0 at the end: take the row's last successor
            while (P_[s[t] * V + next] == 0) --next;
            s[t + 1] = next;
        }
        for (int64_t t = 0; t < T; ++t) x[b * T + t] = s[t], y[b * T + t] = s[t + 1];
    }
    return {from_vector(x, {B, T}), from_vector(y, {B, T})};
}

Batch BigramBackcopy::train_batch(int64_t B, int64_t T, Generator& gen) const { return sample(B, T, gen); }

Batch BigramBackcopy::val_batch(int64_t i, int64_t B, int64_t T) const {
    // Far from any training stream: the training sampler is seeded with small numbers.
    Generator gen(options_.seed * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull * uint64_t(i % options_.val_count + 1));
    return sample(B, T, gen);
}

}  // namespace gg::nn

#include "nn/analysis/logit_lens.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/engine.h"
#include "nn/analysis/activation_cache.h"

namespace gg::nn {

std::vector<LensLayer> logit_lens(const GatedTransformerLM& model, const std::vector<int64_t>& ids, int64_t top_k,
                                  std::optional<int64_t> target) {
    const int64_t V = model.config().vocab_size, T = int64_t(ids.size());
    if (T == 0 || top_k < 1 || top_k > V || (target && (*target < 0 || *target >= V)))
        throw std::invalid_argument("logit_lens: " + std::to_string(T) + " prompt tokens, top_k " + std::to_string(top_k) +
                                    ", target " + (target ? std::to_string(*target) : std::string("none")) +
                                    ": need a prompt, top_k in [1, " + std::to_string(V) + "] and a target in [0, " +
                                    std::to_string(V) + ")");
    NoGradGuard no_grad;
    const Device device = model.parameters().front().device();
    const DType dtype = model.parameters().front().dtype();  // as the pass computed it: the last layer is the output
    const ActivationCache cache =
        run_with_cache(model, from_vector(ids, {1, T}).to(device), {HookPoint::resid_post}, {}, dtype);
    std::vector<LensLayer> out;
    for (int64_t l = 0; l < int64_t(model.blocks.size()); ++l) {
        const Tensor last = cache.at(HookPoint::resid_post, l).narrow(1, T - 1, 1);  // (1, 1, d)
        LensLayer row;
        row.layer = l;
        row.logits = model.unembed(last).reshape({V}).to(DType::f64);              // (V)
        const std::vector<double> p = softmax(row.logits, -1).to_vector<double>();
        std::vector<int64_t> order(static_cast<size_t>(V));
        std::iota(order.begin(), order.end(), 0);
        // Ties go to the smaller id, so the ranks do not depend on the sort.
        const auto before = [&p](int64_t a, int64_t b) {
            return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
        };
        std::partial_sort(order.begin(), order.begin() + top_k, order.end(), before);
        for (int64_t i = 0; i < top_k; ++i) {
            row.top_ids.push_back(order[size_t(i)]);
            row.top_probs.push_back(p[size_t(order[size_t(i)])]);
        }
        if (target) {
            row.target_prob = p[size_t(*target)];
            row.target_rank = std::count_if(order.begin(), order.end(), [&](int64_t id) { return before(id, *target); });
        }
        out.push_back(row);
    }
    return out;
}

}  // namespace gg::nn

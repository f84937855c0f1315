#include "nn/moe.h"

#include <stdexcept>
#include <string>

namespace gg::nn {

MoE::MoE(int64_t dim, int64_t n_experts, int64_t k, int64_t hidden)
    : router(register_module("router", std::make_shared<Linear>(dim, n_experts, false))), top_k(k) {
    if (k < 1 || k > n_experts)
        throw std::invalid_argument("MoE: top_k " + std::to_string(k) + " must be in [1, " + std::to_string(n_experts) +
                                    "]");
    for (int64_t e = 0; e < n_experts; ++e)
        experts.push_back(register_module("experts." + std::to_string(e), std::make_shared<SwiGLU>(dim, hidden)));
}

Tensor MoE::forward(const Tensor& x, Tensor* aux_loss) const {
    const int64_t D = x.size(-1), N = x.numel() / D, E = static_cast<int64_t>(experts.size());
    const Tensor tokens = x.reshape({N, D});                              // (N, D)
    const Tensor probs = softmax(router->forward(tokens), -1);            // (N, E)
    auto [top_p, top_e] = topk(probs, top_k, -1);                         // (N, k) each
    const Tensor weights = top_p / sum(top_p, {-1}, true);                // renormalised, (N, k)

    // Group routing slots by expert on the host: which tokens, and which slot (token·k + j).
    const std::vector<int64_t> chosen = top_e.to_vector<int64_t>();
    std::vector<std::vector<int64_t>> token_ids(E), slot_ids(E);
    for (int64_t slot = 0; slot < N * top_k; ++slot) {
        token_ids[chosen[slot]].push_back(slot / top_k);
        slot_ids[chosen[slot]].push_back(slot);
    }
    const Tensor slot_weights = weights.reshape({N * top_k, 1});
    Tensor out = zeros({N, D}, x.dtype(), x.device());
    std::vector<double> load(E);
    for (int64_t e = 0; e < E; ++e) {
        const auto M = static_cast<int64_t>(token_ids[e].size());
        load[e] = double(M) / double(N * top_k);  // f_e
        if (M == 0) continue;
        const Tensor ids = from_vector(token_ids[e], {M}).to(x.device());
        const Tensor w = index_select(slot_weights, from_vector(slot_ids[e], {M}).to(x.device()));  // (M, 1)
        out = index_add(out, ids, experts[e]->forward(index_select(tokens, ids)) * w);
    }
    if (aux_loss) {
        const Tensor f = from_vector(load, {E}).to(x.dtype()).to(x.device());
        *aux_loss = sum(f * mean(probs, {0})) * double(E);
    }
    return out.reshape(x.shape());
}

}  // namespace gg::nn

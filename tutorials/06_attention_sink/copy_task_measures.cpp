// copy_task_measures.cpp — tutorial 06, part (a): what is measured for each kind of query
// (copy_task.h): where its attention goes (BOS, its own key, the previous one, and whichever
// key holds its largest weight), its loss against the best possible, G1's gate, and the size of
// the value vectors at BOS, elsewhere and at each query's top key.
#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/attention_maps.h"
#include "copy_task.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

// Both parts (and tutorial 14) score a prediction the same way: its cross-entropy in nats, and
// whether the most likely token is the right one. In double precision, from the logits of one row.
TokenScores score_tokens(const Tensor& logits, const Tensor& targets) {
    const int64_t V = logits.size(2), N = logits.size(0) * logits.size(1);
    const std::vector<float> z = logits.to_vector<float>();
    const std::vector<int64_t> y = targets.to_vector<int64_t>();
    TokenScores s{std::vector<double>(N), std::vector<bool>(N)};
    for (int64_t n = 0; n < N; ++n) {
        const float* row = z.data() + n * V;
        const int64_t best = std::max_element(row, row + V) - row;
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - row[best]);
        s.loss[n] = std::log(sum) + row[best] - row[y[n]];  // log Σ e^z − z_target
        s.hit[n] = best == y[n];
    }
    return s;
}

namespace {

// The value vectors of layer l, (B, T, H, dk) as floats: the layer's input is the embedding for
// l = 0 and the previous block's output after that. Empty for a latent attention layer.
std::vector<float> layer_values(const GatedTransformerLM& model, const Tensor& ids, const LMCapture& capture,
                                int64_t l) {
    Tensor x = l == 0 ? model.tok_emb->forward(ids) : capture.hidden[l - 1];  // (B, T, d)
    if (l == 0 && model.pos_emb) x = x + model.pos_emb->forward(ids.size(1));
    const TransformerBlock& block = *model.blocks[l];
    if (!block.attn) return {};
    return block.attn->w_v->forward(block.norm1->forward(x)).to_vector<float>();  // (B, T, H·dk)
}

}  // namespace

void QueryClass::add(size_t i, std::span<const float> row, double g, std::span<const double> value_norms) {
    const size_t t = row.size() - 1;
    if (t < 1 || (!value_norms.empty() && value_norms.size() != row.size()))
        throw std::invalid_argument("QueryClass::add: a query at t >= 1 over keys 0..t, got " +
                                    std::to_string(row.size()) + " weights and " + std::to_string(value_norms.size()) +
                                    " value norms");
    double sum = 0;
    for (float w : row) sum += w;
    const size_t best = std::max_element(row.begin(), row.end()) - row.begin();  // the first, on a tie
    alpha[i] += row[0];
    alpha_gated[i] += row[0] * g;
    self[i] += row[t];
    previous[i] += row[t - 1];
    gate[i] += g;
    row_sum[i] += sum;
    alpha_normalised[i] += sum > 0 ? row[0] / sum : 0.0;
    top[i] += row[best];
    if (value_norms.empty()) {
        value_top[i] = value_rest[i] = NAN;
        return;
    }
    double rest = 0;
    for (size_t j = 0; j <= t; ++j)
        if (j != best) rest += value_norms[j];
    value_top[i] += value_norms[best];
    value_rest[i] += rest / double(t);
}

CopyReport measure_copy(const GatedTransformerLM& model, const BigramBackcopy& data, int64_t batches, int64_t B,
                        int64_t T) {
    NoGradGuard no_grad;
    CopyReport r;
    for (int64_t l = 0; l < model.config().n_layers; ++l)
        if (model.config().layer_type(l) == LayerType::full_attention) r.layers.push_back(l);
    r.L = std::ssize(r.layers), r.H = model.config().attn.n_heads, r.gated = model.config().attn.gated();
    const int64_t L = r.L, H = r.H, dk = model.config().d_model / H;
    r.trigger.resize(L * H), r.other.resize(L * H);
    r.value_bos.assign(L * H, 0), r.value_other.assign(L * H, 0);
    for (int64_t i = 0; i < batches; ++i) {
        const Batch batch = data.val_batch(i, B, T);
        LMCapture capture;
        const TokenScores scores = score_tokens(model.forward(batch.inputs, Tensor(), nullptr, &capture).logits, batch.targets);
        const std::vector<int64_t> x = batch.inputs.to_vector<int64_t>(), y = batch.targets.to_vector<int64_t>();
        std::vector<std::vector<float>> probs(L), gates(L);
        std::vector<std::vector<double>> value_norms(L);  // per layer, (B, H, T) ‖v‖; empty where unknown
        for (int64_t l = 0; l < L; ++l) {
            const AttentionCapture& c = capture.attention[r.layers[l]];
            probs[l] = c.probs.to_vector<float>();                               // (B, H, T, T)
            if (r.gated) gates[l] = per_query_gate(c.gate).to_vector<float>();  // (B, H, T)
            const std::vector<float> v = layer_values(model, batch.inputs, capture, r.layers[l]);  // (B, T, H, dk)
            if (v.empty()) {
                for (int64_t h = 0; h < H; ++h) r.value_bos[l * H + h] = r.value_other[l * H + h] = NAN;
                continue;
            }
            value_norms[l].resize(B * H * T);
            for (int64_t b = 0; b < B; ++b)
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t h = 0; h < H; ++h) {
                        const float* row = v.data() + ((b * T + t) * H + h) * dk;
                        double sq = 0;
                        for (int64_t e = 0; e < dk; ++e) sq += double(row[e]) * row[e];
                        const double norm = value_norms[l][(b * H + h) * T + t] = std::sqrt(sq);
                        (t == 0 ? r.value_bos : r.value_other)[l * H + h] +=
                            norm / double(t == 0 ? B * batches : B * (T - 1) * batches);
                    }
        }
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 1; t < T; ++t) {
                const int64_t n = b * T + t;
                const bool trig = data.is_trigger(x[n]);
                QueryClass& q = trig ? r.trigger : r.other;
                q.count += 1;
                q.loss += scores.loss[n];
                q.hits += scores.hit[n];
                // the best possible loss: 0 for a copy, −log P(next | token) for the chain
                q.oracle_loss += trig ? 0.0 : -std::log(data.transition(x[n], y[n]));
                for (int64_t l = 0; l < L; ++l)
                    for (int64_t h = 0; h < H; ++h) {
                        const std::span<const float> row(probs[l].data() + ((b * H + h) * T + t) * T, t + 1);  // keys 0 … t
                        const std::span<const double> norms =
                            value_norms[l].empty() ? std::span<const double>()
                                                   : std::span<const double>(value_norms[l].data() + (b * H + h) * T, t + 1);
                        q.add(l * H + h, row, r.gated ? gates[l][(b * H + h) * T + t] : 1.0, norms);
                    }
            }
    }
    return r;
}

int64_t top_head(const CopyReport& r, const std::vector<double>& v, int64_t l) {
    int64_t best = 0;
    for (int64_t h = 1; h < r.H; ++h)
        if (v[l * r.H + h] > v[l * r.H + best]) best = h;
    return best;
}

// eviction.cpp — a trained model read through a KV cache that drops old positions, the first
// token with them or not (eviction.h).
//
// Each of `sequences` validation sequences (BOS, then length − 1 tokens) is read one token at a
// time by rolling_cache_loss (nn/analysis/text_loss.h): every full-attention layer's cache
// holds `cache` positions (a linear layer's state has no positions to drop); with keep_first 0
// BOS leaves it after `cache` tokens, with keep_first 1 it stays (StreamingLLM's fix). Positions past the cache and past the training length need no care: RoPE
// reads only the distance between a query and a key, the newest keys keep their true distances,
// and a kept BOS is moved up to sit just before them (KVCache, nn/attention.h), so no query ever
// sees a distance longer than the cache, as StreamingLLM numbers positions within the cache.
//
// The same tokens are scored both ways, so the loss past the cache with BOS dropped minus the
// loss with it kept is what losing BOS costs, whatever the text. Within the cache (positions
// 2 … cache − 1; position 1 has no token before it to predict from) nothing has been dropped:
// the reference for what the window costs. On Bigram-Backcopy the best loss is the same at
// every position; on text a token past the cache has more context than one within it.
#include <cmath>
#include <vector>

#include "common/eviction.h"

using namespace gg;
using namespace gg::nn;

namespace tutorial {

namespace {

struct CacheLoss {
    double within, past;  // mean nats per token, within the cache and past it
};

CacheLoss cache_loss(const GatedTransformerLM& model, const BatchSource& data, const Eviction& e, int64_t keep_first) {
    double within = 0, past = 0;
    int64_t n_within = 0, n_past = 0;
    for (int64_t i = 0; i < e.sequences; ++i) {
        // the sequence's BOS and tokens, (1, length); not the validation batches the tutorials measure
        const std::vector<int64_t> ids = data.val_batch(100 + i, 1, e.length).inputs.to_vector<int64_t>();
        const std::vector<double> nll =
            rolling_cache_loss(model, ids, {.cache = e.cache, .keep_first = keep_first, .windowed = e.windowed});
        for (size_t k = 1; k < nll.size(); ++k) {  // nll[k] is stream position k + 1
            const bool after = int64_t(k) + 1 >= e.cache;
            (after ? past : within) += nll[k];
            ++(after ? n_past : n_within);
        }
    }
    return {within / double(n_within), past / double(n_past)};
}

}  // namespace

json eviction_losses(const GatedTransformerLM& model, const BatchSource& data, const Eviction& eviction, bool latent) {
    const CacheLoss dropped = cache_loss(model, data, eviction, 0);
    // A latent attention cache cannot keep its first positions (MultiHeadLatentAttention refuses).
    const double kept = latent ? NAN : cache_loss(model, data, eviction, 1).past;
    return json{{"loss_within_cache", dropped.within},
                {"loss_past_cache_first_dropped", dropped.past},
                {"loss_past_cache_first_kept", kept}};
}

}  // namespace tutorial

// attention.cpp — part 3 of tutorial 10: the fused attention kernels (cuda/attention_forward.cu,
// cuda/attention_backward.cu, FlashAttention style) against attention written out in
// gatedgrad ops, softmax(Q Kᵀ · scale + mask) V with its T×T matrix of probabilities. The
// kernels run in the emulator; the ops run on the CPU, and autograd gives their gradients.
// Then what makes the fused kernel possible (the online softmax) and what it buys (memory,
// and the key tiles a causal query tile never loads), computed from the kernels' own tile
// size and masking rule (cuda/attention_tiles.cuh).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "autograd/ops.h"
#include "cuda/attention_tiles.cuh"
#include "cuda/kernels.h"
#include "tutorials/10_cuda_kernels/parts.h"

namespace tutorial {

namespace {

using gg::Tensor;
namespace tiles = gg::cuda::emulated::attention;

double max_abs_difference(const Tensor& a, const Tensor& b) {
    return gg::amax(gg::abs(a.to(gg::DType::f64) - b.to(gg::DType::f64))).item();
}

// The online softmax of one row of scores, walked key tile by key tile as the forward kernel
// walks it: printed step by step, returning the row's log-sum-exp m + log l.
double online_softmax(const std::vector<float>& scores) {
    double m = -INFINITY, l = 0;  // running maximum; running Σ exp(s − m)
    for (size_t j0 = 0; j0 < scores.size(); j0 += tiles::kTile) {
        const size_t j_end = std::min(j0 + tiles::kTile, scores.size());
        const double tile_max = *std::max_element(scores.begin() + j0, scores.begin() + j_end);
        const double m_new = std::max(m, tile_max);
        const double rescale = std::exp(m - m_new);  // 0 on the first tile, where m = −∞
        l *= rescale;
        for (size_t j = j0; j < j_end; ++j) l += std::exp(scores[j] - m_new);
        std::printf("  keys %3zu..%3zu: tile max %6.3f, running max %6.3f, old sum x %.4f, running sum %8.4f\n", j0,
                    j_end - 1, tile_max, m_new, rescale, l);
        m = m_new;
    }
    return m + std::log(l);
}

// Causal key tiles a query tile visits, over all pairs of tiles, by the kernels' own test
// (classify): a tile wholly in the future is skipped, a tile wholly in the past is visited
// without any mask, and only the tiles on the diagonal work out which pairs are visible.
void print_tiles_visited(int64_t T) {
    const gg::AttentionShape s{1, 1, 1, T, T, 64, /*causal=*/true, /*window=*/0, 0.125};
    const int64_t tiles_per_side = (T + tiles::kTile - 1) / tiles::kTile;
    int64_t skipped = 0, unmasked = 0, masked = 0;
    for (int64_t i0 = 0; i0 < T; i0 += tiles::kTile)
        for (int64_t j0 = 0; j0 < T; j0 += tiles::kTile) {
            const tiles::TileMask m = tiles::classify(s, i0, std::min(i0 + tiles::kTile, T), j0,
                                                      std::min(j0 + tiles::kTile, T));
            (m == tiles::TileMask::empty ? skipped : m == tiles::TileMask::full ? unmasked : masked) += 1;
        }
    const int64_t pairs = tiles_per_side * tiles_per_side;
    std::printf("  T = %5lld: %4lld x %4lld tile pairs, %7lld skipped (%.1f%%), %7lld without a mask, %5lld masked\n",
                (long long)T, (long long)tiles_per_side, (long long)tiles_per_side, (long long)skipped,
                100.0 * double(skipped) / double(pairs), (long long)unmasked, (long long)masked);
}

}  // namespace

bool part_attention() {
    const int64_t B = 1, H = 2, T = 100, D = 16;
    const double scale = 1 / std::sqrt(double(D));
    std::printf("\n== 5. fused attention: B %lld, H %lld, T %lld, D %lld, causal, in the emulator\n", (long long)B,
                (long long)H, (long long)T, (long long)D);
    gg::Generator gen(30);
    Tensor q = gg::randn({B, H, T, D}, gen), k = gg::randn({B, H, T, D}, gen), v = gg::randn({B, H, T, D}, gen);
    const Tensor dO = gg::randn({B, H, T, D}, gen);  // the gradient arriving at the output

    // The kernels, on the tensors' memory: the emulator's device memory is host memory.
    const gg::AttentionShape s{B, H, H, T, T, D, /*causal=*/true, /*window=*/0, scale};
    const Tensor O = Tensor::empty({B, H, T, D}), lse = Tensor::empty({B, H, T});  // lse: log Σ_j exp(s_ij) per row
    gg::cuda::emulated::attention_forward(s, O.view_desc(), lse.view_desc(), gg::View{}, q.view_desc(), k.view_desc(),
                                          v.view_desc(), gg::View{});
    const Tensor dQ = Tensor::empty({B, H, T, D}), dK = Tensor::empty({B, H, T, D}), dV = Tensor::empty({B, H, T, D});
    gg::cuda::emulated::attention_backward(s, dQ.view_desc(), dK.view_desc(), dV.view_desc(), dO.view_desc(),
                                           q.view_desc(), k.view_desc(), v.view_desc(), O.view_desc(),
                                           lse.view_desc(), gg::View{});

    // The same attention written out: every score and probability of a head, (T, T), in memory,
    // in float64, so that what differs is the kernels' own float32 rounding (the reference's is
    // some 10⁹ times smaller), the same on every CPU whichever vector exp it runs.
    const Tensor q64 = q.to(gg::DType::f64).requires_grad_(), k64 = k.to(gg::DType::f64).requires_grad_(),
                 v64 = v.to(gg::DType::f64).requires_grad_();
    const Tensor future = gg::triu(gg::ones({T, T}), 1);  // 1 where key j comes after query i
    const Tensor scores =
        gg::masked_fill(gg::matmul(q64, k64.transpose(2, 3)) * scale, future, -INFINITY);  // (B, H, T, T)
    const Tensor O_ref = gg::matmul(gg::softmax(scores, -1), v64);                                   // (B, H, T, D)
    const Tensor row_max = gg::amax(scores, {-1}, true);                                             // (B, H, T, 1)
    const Tensor lse_ref = gg::log(gg::sum(gg::exp(scores - row_max), {-1})) + row_max.squeeze(-1);  // (B, H, T)
    (O_ref * dO.to(gg::DType::f64)).sum().backward();  // d(Σ O ⊙ dO)/dO = dO: the gradient dO flows back
    const double differences[] = {max_abs_difference(O, O_ref), max_abs_difference(lse, lse_ref),
                                  max_abs_difference(dQ, q64.grad()), max_abs_difference(dK, k64.grad()),
                                  max_abs_difference(dV, v64.grad())};
    std::printf("  largest difference from softmax(Q K^T scale + mask) V in gatedgrad ops (float64):\n");
    std::printf("    O %.1e   lse %.1e   dQ %.1e   dK %.1e   dV %.1e\n", differences[0], differences[1],
                differences[2], differences[3], differences[4]);

    const int64_t row = T - 1;  // the last query of head 0 sees every key
    std::printf("\n  online softmax of query %lld (head 0) over key tiles of %d, as the forward kernel walks them:\n",
                (long long)row, tiles::kTile);
    const Tensor last_scores = scores.detach().select(0, 0).select(0, 0).select(0, row).to(gg::DType::f32);  // (T)
    const double online = online_softmax(last_scores.to_vector<float>());
    std::printf("  lse = max + log(sum) = %.5f; the kernel kept %.5f, and backward recomputes each\n"
                "  probability as exp(s - lse) instead of storing T x T of them\n",
                online, lse.select(0, 0).select(0, 0).select(0, row).item());

    std::printf("\n  memory per head, f32, D = 64: the T x T probabilities against the fused kernel's lse\n");
    for (int64_t t : {1024, 8192, 65536}) {
        const double probs_mib = double(t) * double(t) * 4 / (1 << 20), lse_kib = double(t) * 4 / (1 << 10);
        const double qkvo_mib = 4.0 * double(t) * 64 * 4 / (1 << 20);
        std::printf("  T = %5lld: probabilities %9.1f MiB; lse %6.1f KiB, beside Q, K, V, O %6.1f MiB\n",
                    (long long)t, probs_mib, lse_kib, qkvo_mib);
    }

    std::printf("\n  causal: query tiles of %d skip the key tiles wholly in their future\n", tiles::kTile);
    for (int64_t t : {100, 1024, 8192}) print_tiles_visited(t);
    // Float sums in two different orders, of values of order 1 (randn inputs).
    return std::ranges::all_of(differences, [](double d) { return d < 1e-4; });
}

}  // namespace tutorial

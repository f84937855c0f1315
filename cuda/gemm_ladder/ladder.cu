// ladder.cu — gemm_ladder (ladder.h): checks the sizes and the input type once and runs the
// chosen rung.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/gemm_ladder/rungs.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

// Throws unless the rung takes inputs of bf16 (or f32) and the sizes fit; true when C is empty.
bool check_and_skip(Rung rung, bool bf16, int M, int N, int K) {
    const auto error = [&](const std::string& what) {
        return std::invalid_argument(std::string("gemm_ladder: ") + rung_name(rung) + ": " + what);
    };
    if (bf16 != takes_bf16(rung))
        throw error(std::string("takes ") + (takes_bf16(rung) ? "bf16" : "f32") + " A and B, given " +
                    (bf16 ? "bf16" : "f32"));
    // The rungs index with int: every matrix must have fewer than 2³¹ elements.
    const auto too_big = [](int rows, int cols) { return int64_t(rows) * cols > INT32_MAX; };
    if (M < 0 || N < 0 || K < 0 || too_big(M, K) || too_big(K, N) || too_big(M, N))
        throw error("M " + std::to_string(M) + ", N " + std::to_string(N) + ", K " + std::to_string(K) +
                    " (sizes from 0 to matrices of 2^31 - 1 elements)");
    return M == 0 || N == 0;
}

}  // namespace

void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    if (check_and_skip(rung, false, M, N, K)) return;
    switch (rung) {
        case Rung::naive: return ladder::naive(M, N, K, alpha, A, B, beta, C);
        case Rung::coalesced: return ladder::coalesced(M, N, K, alpha, A, B, beta, C);
        case Rung::shared_tiles: return ladder::shared_tiles(M, N, K, alpha, A, B, beta, C);
        case Rung::register_1d: return ladder::register_1d(M, N, K, alpha, A, B, beta, C);
        case Rung::register_2d: return ladder::register_2d(M, N, K, alpha, A, B, beta, C);
        case Rung::vectorized: return ladder::vectorized(M, N, K, alpha, A, B, beta, C);
        case Rung::warp_tiling: return ladder::warp_tiling(M, N, K, alpha, A, B, beta, C);
        case Rung::double_buffered: return ladder::double_buffered(M, N, K, alpha, A, B, beta, C);
        default: break;
    }
    throw std::invalid_argument("gemm_ladder: no f32 rung " + std::to_string(int(rung)));
}

void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const bfloat16* A, const bfloat16* B, float beta,
                 float* C) {
    if (check_and_skip(rung, true, M, N, K)) return;
    switch (rung) {
        case Rung::tensor_cores: return ladder::tensor_cores(M, N, K, alpha, A, B, beta, C);
        case Rung::async_pipeline: return ladder::async_pipeline(M, N, K, alpha, A, B, beta, C);
        default: break;
    }
    throw std::invalid_argument("gemm_ladder: no bf16 rung " + std::to_string(int(rung)));
}

}  // namespace gg::cuda::GG_CUDA_BUILD

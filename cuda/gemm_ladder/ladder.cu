// ladder.cu — gemm_ladder (ladder.h): checks the sizes once and runs the chosen rung.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/gemm_ladder/rungs.h"

namespace gg::cuda::GG_CUDA_BUILD {

void gemm_ladder(Rung rung, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    // The rungs index with int: every matrix must have fewer than 2³¹ elements.
    const auto too_big = [](int rows, int cols) { return int64_t(rows) * cols > INT32_MAX; };
    if (M < 0 || N < 0 || K < 0 || too_big(M, K) || too_big(K, N) || too_big(M, N))
        throw std::invalid_argument(std::string("gemm_ladder: ") + rung_name(rung) + ": M " + std::to_string(M) +
                                    ", N " + std::to_string(N) + ", K " + std::to_string(K) +
                                    " (sizes from 0 to matrices of 2^31 - 1 elements)");
    if (M == 0 || N == 0) return;
    switch (rung) {
        case Rung::naive: return ladder::naive(M, N, K, alpha, A, B, beta, C);
        case Rung::coalesced: return ladder::coalesced(M, N, K, alpha, A, B, beta, C);
        case Rung::shared_tiles: return ladder::shared_tiles(M, N, K, alpha, A, B, beta, C);
        case Rung::register_1d: return ladder::register_1d(M, N, K, alpha, A, B, beta, C);
        case Rung::register_2d: return ladder::register_2d(M, N, K, alpha, A, B, beta, C);
        case Rung::vectorized: return ladder::vectorized(M, N, K, alpha, A, B, beta, C);
        case Rung::warp_tiling: return ladder::warp_tiling(M, N, K, alpha, A, B, beta, C);
        case Rung::tensor_core_tf32: return ladder::tensor_core_tf32(M, N, K, alpha, A, B, beta, C);
        case Rung::tensor_core_bf16: return ladder::tensor_core_bf16(M, N, K, alpha, A, B, beta, C);
    }
    throw std::invalid_argument("gemm_ladder: no rung " + std::to_string(int(rung)));
}

}  // namespace gg::cuda::GG_CUDA_BUILD

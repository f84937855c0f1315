// ldmatrix_probe.h — one kernel that asks ldmatrix where it puts each element, and the answer
// the PTX ISA gives ("Matrix fragments for mma.m16n8k16"), shared by the emulator's test of
// ldmatrix (tests/test_emulator_mma.cpp) and the probe that runs on the GPU (tests/mma_probe.cu),
// so that the two always ask the same question.
//
// Shared memory holds four 8×8 b16 matrices, rows 16 bytes apart and padded to 32 bytes;
// element (row, col) of matrix j is the number 64j + 8·row + col (exact in bf16). Each lane
// writes back what ldmatrix gave it: X registers, each of two b16 halves.
#pragma once

#include <cstdint>

#include "cuda/launch.h"
#include "cuda/mma.h"
#include "tensor/bf16.h"

namespace gg::testing {

template <int X, bool Trans>
__global__ void ldmatrix_probe(uint32_t* out) {  // out: (32 lanes, X registers)
    GG_SHARED(bfloat16[4][8][16], tiles);  // row r of matrix j at tiles[j][r]
    const int lane = int(threadIdx.x);
    for (int e = lane; e < 4 * 64; e += 32) tiles[e / 64][e % 64 / 8][e % 8] = bfloat16::from_bits(uint16_t(e));
    __syncwarp();
    uint32_t r[X];
    gg::cuda::ldmatrix<X, Trans>(r, &tiles[lane / 8 % X][lane % 8][0]);
    for (int j = 0; j < X; ++j) out[lane * X + j] = r[j];
}

// What register j of a lane must hold, (first half, second half): lane l receives row g = l / 4,
// columns 2q and 2q + 1 (q = l mod 4) of matrix j; .trans gives column g, rows 2q and 2q + 1.
struct LdmatrixPair {
    int first, second;
};
inline LdmatrixPair ldmatrix_expected(bool trans, int lane, int j) {
    const int g = lane / 4, q = lane % 4;
    const int first = trans ? 64 * j + 8 * (2 * q) + g : 64 * j + 8 * g + 2 * q;
    return {first, trans ? first + 8 : first + 1};
}

}  // namespace gg::testing

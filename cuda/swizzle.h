// swizzle.h — an XOR swizzle of 16-byte chunks in shared memory, for tiles that ldmatrix reads
// (the GEMM ladder's rung 10, cuda/gemm_ladder/mma_tiles.h, and the bf16 GEMM's pipelined path,
// cuda/gemm_bf16.cu).
//
// ldmatrix reads one 16-byte chunk from each of 8 consecutive rows of a tile at once. Shared
// memory serves 128 bytes a cycle — 8 chunks, one per 16-byte bank group, group = chunk index
// mod 8 — so if two of the 8 rows put the chunk in the same group the read takes two passes.
// Stored as they are, rows of 8 or 16 chunks put a chunk column in one group (8-way), rows of
// 4 in two (4-way). The swizzle stores chunk c of row r at chunk
//
//   c ^ s(r),   s(r) = (r / rows per 128-byte line) mod min(chunks a row, 8)
//
// of the same row. With 8 or more chunks a row, s(r) = r mod 8 and 8 consecutive rows spread
// chunk c over c ^ 0 .. c ^ 7, all 8 groups; with 4 chunks a row (two rows to a line) s(r) =
// (r / 2) mod 4, and rows 2j, 2j + 1 put it in groups c ^ j and 4 + (c ^ j), j < 4: all 8 again.
// XOR only permutes the chunks within a row, so 8 consecutive chunks that 8 threads store
// (a whole 128-byte line) still land in 8 different groups, and every chunk stays 16-byte
// aligned for cp.async and ldmatrix. Padding each row by a chunk would spread the reads too,
// at the cost of memory and of a 2-way conflict on the stores of 4-chunk rows.
#pragma once
#include "cuda/launch.h"

namespace gg::cuda {

// The index, in a tile of rows of kRowChunks chunks (4, 8, 16, ...), where chunk `chunk` of
// row `row` is stored.
template <int kRowChunks>
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) {
    static_assert(kRowChunks >= 4 && (kRowChunks & (kRowChunks - 1)) == 0, "rows of 4, 8, 16, ... chunks");
    constexpr int kRowsPerLine = kRowChunks >= 8 ? 1 : 8 / kRowChunks;
    constexpr int kMask = (kRowChunks >= 8 ? 8 : kRowChunks) - 1;
    return row * kRowChunks + (chunk ^ (row / kRowsPerLine & kMask));
}

}  // namespace gg::cuda

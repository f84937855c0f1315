// mma.h — the warp-level tensor-core instructions that cuda/mma.h issues as inline PTX under
// nvcc, for kernels compiled by g++ against the emulator:
//
//   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32   D (16, 8) = A (16, 16) · B (16, 8) + C
//   ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16
//
// These instructions fix which lane holds which element, and kernels rely on it (an epilogue writes
// its own four results, a kernel builds a fragment with its own loads). So here every lane holds
// only its own registers, exactly as on the GPU, and each instruction is a warp exchange: every
// lane hands in its registers (or its row address), every lane computes its own outputs from
// the whole warp's. A kernel that uses the wrong lane's element computes the wrong thing in
// the emulator too. The layouts are those of the PTX ISA, written out where they are used
// below and in cuda/mma.h's opening comment.
//
// Both are warp collectives over all 32 lanes of a whole warp (".aligned": every lane at the
// same instruction); a lane missing deadlocks, which the emulator reports with the call site.
// Also checked, where a GPU faults or reads garbage: each ldmatrix row address is 16-byte
// aligned (a row is 8 b16 values read as one 16-byte access). The rendezvous orders no memory:
// ldmatrix's reads go to the race detector (race_check.h) as reads by the lanes that receive
// the elements, so another lane's store to a row needs a __syncwarp or __syncthreads before.
//
// Numerics of mma: the products of two bf16 values are exact in float (8 + 8 significant
// bits), and are added to C in k order, in float. The hardware's order and internal rounding
// are unspecified, so tests compare with a tolerance that grows with K.
#pragma once
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gg::emu {

// Every lane of the running thread's warp hands in `mine` and gets back all 32 lanes' values,
// in lane order. The exchange table lives on lane 0's stack: the first exchange hands every
// lane its address, each lane writes its own slot, and two more exchanges make sure that every
// slot is written before anyone reads, and read before lane 0 returns.
template <class T>
std::array<T, 32> warp_all_gather(WarpOp op, const char* name, const T& mine, const SourceLocation& site) {
    const ThreadState& t = *current_thread;
    const unsigned id = (t.thread_idx.z * t.block_dim.y + t.thread_idx.y) * t.block_dim.x + t.thread_idx.x;
    const unsigned threads = t.block_dim.x * t.block_dim.y * t.block_dim.z, first = id - id % warpSize;
    if (threads - first < unsigned(warpSize)) {
        const std::string file = site.file_name();
        throw std::runtime_error(std::string(name) + " (" + file.substr(file.find_last_of('/') + 1) + ":" +
                                 std::to_string(site.line()) + "): warp " + std::to_string(id / warpSize) + " has " +
                                 std::to_string(threads - first) + " lanes; it needs all 32");
    }
    std::array<T, 32> table;
    auto* exchange = std::bit_cast<std::array<T, 32>*>(
        uintptr_t(warp_collective(op, 0xffffffffu, std::bit_cast<uintptr_t>(&table), 0, warpSize, site)));
    (*exchange)[id % warpSize] = mine;
    warp_collective(op, 0xffffffffu, 0, 0, warpSize, site);  // every slot written
    const std::array<T, 32> all = *exchange;
    warp_collective(op, 0xffffffffu, 0, 0, warpSize, site);  // every lane has read lane 0's table
    return all;
}

namespace detail {

inline unsigned lane_id() {
    const ThreadState& t = *current_thread;
    return ((t.thread_idx.z * t.block_dim.y + t.thread_idx.y) * t.block_dim.x + t.thread_idx.x) % warpSize;
}

// The b16 value in half h (0: bits 0–15, the lower-numbered element; 1: bits 16–31) of r.
inline uint16_t half_of(uint32_t r, int h) { return uint16_t(r >> (16 * h)); }
inline float bf16_value(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

}  // namespace detail

// d = a · b + c for one m16n8k16 tile, bf16 inputs, float accumulators; a, b, c, d are this
// lane's registers. With g = lane / 4 and q = lane % 4 (PTX's groupID and threadID_in_group):
//   a[0] holds A(g, 2q), A(g, 2q+1)          a[1] A(g+8, 2q), A(g+8, 2q+1)
//   a[2] holds A(g, 2q+8), A(g, 2q+9)        a[3] A(g+8, 2q+8), A(g+8, 2q+9)
//   b[0] holds B(2q, g), B(2q+1, g)          b[1] B(2q+8, g), B(2q+9, g)
//   c[i], d[i] are C(g + 8·(i ≥ 2), 2q + i mod 2)
// (the first element of each pair in the low 16 bits).
inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                              SourceLocation site = SourceLocation::current()) {
    struct Registers {
        uint32_t a[4], b[2];
    };
    const std::array<Registers, 32> warp =
        warp_all_gather(WarpOp::mma, "mma.sync", Registers{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}}, site);
    // A(row, k) is in lane 4·(row mod 8) + (k mod 8)/2, register (row ≥ 8) + 2·(k ≥ 8), half k mod 2.
    const auto A = [&](int row, int k) {
        return detail::bf16_value(
            detail::half_of(warp[4 * (row % 8) + (k % 8) / 2].a[(row >= 8) + 2 * (k >= 8)], k % 2));
    };
    // B(k, col) is in lane 4·col + (k mod 8)/2, register k ≥ 8, half k mod 2.
    const auto B = [&](int k, int col) {
        return detail::bf16_value(detail::half_of(warp[4 * col + (k % 8) / 2].b[k >= 8], k % 2));
    };
    const int g = int(detail::lane_id()) / 4, q = int(detail::lane_id()) % 4;
    float out[4];
    for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i >= 2), col = 2 * q + i % 2;
        float sum = c[i];
        for (int k = 0; k < 16; ++k) sum = std::fma(A(row, k), B(k, col), sum);
        out[i] = sum;
    }
    for (int i = 0; i < 4; ++i) d[i] = out[i];  // d may be c
}

// Loads X (1, 2 or 4) 8×8 matrices of b16 values from shared memory. Lane 8j + r hands in
// the address of row r of matrix j (lanes past 8·X hand in nothing that is read). Matrix j
// arrives in register r[j] of every lane: without .trans, lane l gets row l/4, columns
// 2·(l mod 4) and 2·(l mod 4)+1; with .trans the transposed matrix, i.e. rows 2·(l mod 4) and
// 2·(l mod 4)+1 of column l/4. The first element sits in the low 16 bits.
template <int X, bool Trans = false>
void ldmatrix(uint32_t (&r)[X], const void* row_address, SourceLocation site = SourceLocation::current()) {
    static_assert(X == 1 || X == 2 || X == 4, "ldmatrix loads 1, 2 or 4 matrices");
    const unsigned lane = detail::lane_id();
    if (lane < 8u * X && std::bit_cast<uintptr_t>(row_address) % 16 != 0) {
        const std::string file = site.file_name();
        throw std::runtime_error("ldmatrix (" + file.substr(file.find_last_of('/') + 1) + ":" +
                                 std::to_string(site.line()) + "): lane " + std::to_string(lane) +
                                 "'s row address is not 16-byte aligned");
    }
    const std::array<const void*, 32> rows = warp_all_gather(WarpOp::ldmatrix, "ldmatrix", row_address, site);
    // Each lane reads the elements it receives, mostly from rows other lanes named. The race
    // detector sees them as ldmatrix reads: the warp exchange above orders no memory, so a
    // lane's store to a row must be followed by a __syncwarp (or __syncthreads) first.
    const auto element = [&](int matrix, int row, int col) {
        const char* address = static_cast<const char*>(rows[8 * matrix + row]) + 2 * col;
        note_ldmatrix_read(address, 2);
        const UncheckedAccesses read_as_ldmatrix;
        uint16_t bits;
        std::memcpy(&bits, address, sizeof bits);
        return bits;
    };
    const int q = int(lane) % 4, g = int(lane) / 4;
    for (int j = 0; j < X; ++j) {
        const uint16_t first = Trans ? element(j, 2 * q, g) : element(j, g, 2 * q);
        const uint16_t second = Trans ? element(j, 2 * q + 1, g) : element(j, g, 2 * q + 1);
        r[j] = uint32_t(first) | uint32_t(second) << 16;
    }
}

}  // namespace gg::emu

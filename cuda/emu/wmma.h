// wmma.h — the warp matrix multiply-accumulate API of CUDA's <mma.h> (nvcuda::wmma) and the
// bfloat16 type of <cuda_bf16.h>, for kernels compiled by g++ against the emulator.
// emulator.h includes it; kernels include <mma.h> and <cuda_bf16.h> only under nvcc.
//
// A fragment is a tile of a matrix: matrix_a (M, K), matrix_b (K, N) or accumulator (M, N).
// On a GPU its elements are spread over the 32 lanes of a warp, in an order the API leaves
// unspecified. Here every lane holds the whole tile, row-major in x[]: load_matrix_sync fills
// each lane's copy, mma_sync computes each lane's copy, store_matrix_sync writes it (every
// lane the same values). A kernel that uses only what the API promises — the sync functions,
// fill_fragment, and the same operation on every x[t] — computes the same thing on both.
//
// load_matrix_sync, mma_sync and store_matrix_sync are warp collectives: all 32 lanes of a
// whole warp must reach the same call with the same pointer, ldm and layout, or the launch
// fails with the call site (as a divergent __syncwarp does). Also checked, where a GPU is
// silently wrong: the pointer is 32-byte aligned and ldm a multiple of 16 bytes.
//
// Numerics. __float_to_tf32 rounds to a 10-bit mantissa, to nearest with ties away from zero
// (PTX cvt.rna.tf32.f32); mma_sync, like the hardware, reads only those top 19 bits of a tf32
// element, so a kernel that skips the conversion truncates instead. __float2bfloat16 rounds
// to nearest even. Products of tf32 or bf16 values are exact in float (22 or 16 significant
// bits); mma_sync adds them to the accumulator in k order, in float. The hardware's order and
// intermediate rounding are unspecified, so tests compare with a tolerance that grows with K.
//
// Provided: tf32 m16n16k8 and bf16 m16n16k16, m32n8k16, m8n32k16, with float accumulators.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>
#include <type_traits>

// bfloat16: the top half of a float (8 exponent bits, 7 mantissa bits).
struct __nv_bfloat16 {
    unsigned short bits;
};

inline __nv_bfloat16 __float2bfloat16_rn(float x) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {uint16_t((u >> 16) | 0x0040u)};  // NaN stays a (quiet) NaN
    // Adding 0x7fff rounds half-way cases down; the kept bit 16 then rounds them to even.
    return {uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
inline __nv_bfloat16 __float2bfloat16(float x) { return __float2bfloat16_rn(x); }
inline float __bfloat162float(__nv_bfloat16 x) { return std::bit_cast<float>(uint32_t(x.bits) << 16); }

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

inline float __float_to_tf32(float x) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;  // infinities and NaN as they are
    // Half of the last kept bit (bit 13) added to the magnitude, then the 13 bits below it
    // dropped: round to nearest, ties away from zero.
    return std::bit_cast<float>((u + 0x1000u) & 0xffffe000u);
}

namespace detail {

template <class T>
struct storage {
    using type = T;
};
template <>
struct storage<precision::tf32> {
    using type = float;  // tf32 values live in floats
};

template <class Use, int M, int N, int K, class T>
constexpr bool supported() {
    constexpr bool bf16_shape = K == 16 && ((M == 16 && N == 16) || (M == 32 && N == 8) || (M == 8 && N == 32));
    if constexpr (std::is_same_v<Use, accumulator>) return std::is_same_v<T, float> && (bf16_shape || (M == 16 && N == 16 && K == 8));
    else if constexpr (std::is_same_v<T, precision::tf32>) return M == 16 && N == 16 && K == 8;
    else return std::is_same_v<T, __nv_bfloat16> && bf16_shape;
}

// The value an element brings to a product.
inline float operand(float tf32) { return std::bit_cast<float>(std::bit_cast<uint32_t>(tf32) & 0xffffe000u); }
inline float operand(__nv_bfloat16 x) { return __bfloat162float(x); }

// All 32 lanes of a whole warp at the same call, with the same arguments (folded into one
// number): the emulator's warp exchange, where every lane receives lane 0's arguments.
inline void warp_wide(gg::emu::WarpOp op, const char* name, const void* pointer, unsigned ldm, int layout,
                      const gg::emu::SourceLocation& site) {
    const gg::emu::ThreadState& t = *gg::emu::current_thread;
    const unsigned id = (t.thread_idx.z * t.block_dim.y + t.thread_idx.y) * t.block_dim.x + t.thread_idx.x;
    const unsigned threads = t.block_dim.x * t.block_dim.y * t.block_dim.z, first = id - id % warpSize;
    const auto error = [&](const std::string& what) {
        const std::string file = site.file_name();
        return std::runtime_error(std::string(name) + " (" + file.substr(file.find_last_of('/') + 1) + ":" +
                                  std::to_string(site.line()) + "): " + what);
    };
    if (threads - first < unsigned(warpSize))
        throw error("warp " + std::to_string(id / warpSize) + " has " + std::to_string(threads - first) +
                    " lanes; wmma needs all 32");
    if (pointer != nullptr && std::bit_cast<uintptr_t>(pointer) % 32 != 0)
        throw error("the pointer is not 32-byte aligned");
    const uint64_t arguments = std::bit_cast<uintptr_t>(pointer) ^ (uint64_t(ldm) << 48) ^ (uint64_t(layout) << 63);
    const uint64_t lane0 = gg::emu::warp_collective(op, 0xffffffffu, arguments, 0, warpSize, site);
    if (lane0 != arguments)
        throw error("lane " + std::to_string(id % warpSize) + " passes another pointer, ldm or layout than lane 0");
}

template <class T>
void check_ldm(const char* name, unsigned ldm, const gg::emu::SourceLocation& site) {
    if (ldm * sizeof(T) % 16 != 0) {
        const std::string file = site.file_name();
        throw std::runtime_error(std::string(name) + " (" + file.substr(file.find_last_of('/') + 1) + ":" +
                                 std::to_string(site.line()) + "): ldm " + std::to_string(ldm) +
                                 " is not a multiple of 16 bytes");
    }
}

}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static_assert(detail::supported<Use, M, N, K, T>(), "a WMMA shape and type the emulator does not provide");
    using element_type = typename detail::storage<T>::type;
    static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
    static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
    static constexpr int num_elements = rows * cols;  // the whole tile: every lane holds all of it
    element_type x[num_elements];                     // element (r, c) at x[r * cols + c]
};

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const typename detail::storage<T>::type& value) {
    for (auto& e : f.x) e = value;
}

// matrix_a or matrix_b from memory laid out as the fragment's Layout says.
template <class Use, int M, int N, int K, class T, class Layout>
    requires(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>)
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const typename detail::storage<T>::type* p, unsigned ldm,
                      gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    constexpr bool row = std::is_same_v<Layout, row_major>;
    detail::check_ldm<typename detail::storage<T>::type>("wmma::load_matrix_sync", ldm, site);
    detail::warp_wide(gg::emu::WarpOp::wmma_load, "wmma::load_matrix_sync", p, ldm, row, site);
    using F = fragment<Use, M, N, K, T, Layout>;
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c) f.x[r * F::cols + c] = row ? p[r * ldm + c] : p[c * ldm + r];
}

// An accumulator, whose layout in memory is given at run time.
template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm, layout_t layout,
                      gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    detail::check_ldm<float>("wmma::load_matrix_sync", ldm, site);
    detail::warp_wide(gg::emu::WarpOp::wmma_load, "wmma::load_matrix_sync", p, ldm, layout == mem_row_major, site);
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) f.x[r * N + c] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout,
                       gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    detail::check_ldm<float>("wmma::store_matrix_sync", ldm, site);
    detail::warp_wide(gg::emu::WarpOp::wmma_store, "wmma::store_matrix_sync", p, ldm, layout == mem_row_major, site);
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[r * N + c];
}

// d = a · b + c, one (M, N) tile with an inner dimension of K.
template <int M, int N, int K, class T, class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LayoutA>& a,
              const fragment<matrix_b, M, N, K, T, LayoutB>& b, const fragment<accumulator, M, N, K, float>& c,
              gg::emu::SourceLocation site = gg::emu::SourceLocation::current()) {
    detail::warp_wide(gg::emu::WarpOp::wmma_mma, "wmma::mma_sync", nullptr, 0, 0, site);
    for (int r = 0; r < M; ++r)
        for (int col = 0; col < N; ++col) {
            float sum = c.x[r * N + col];
            for (int k = 0; k < K; ++k)
                sum = std::fma(detail::operand(a.x[r * K + k]), detail::operand(b.x[k * N + col]), sum);
            d.x[r * N + col] = sum;
        }
}

}  // namespace nvcuda::wmma

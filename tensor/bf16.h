// bf16.h — bfloat16, the 16-bit float that mixed-precision training stores.
//
// A bfloat16 is the top half of an IEEE float32: 1 sign bit, the same 8 exponent bits (so the
// same range, ~1e-38 … 3e38) and 7 stored mantissa bits (8 with the implicit one) instead of 23.
// Widening is exact: shift the 16 bits up. Narrowing keeps the top half after rounding to
// the nearest value, ties to even, as the hardware does:
//
//   float32  s eeeeeeee mmmmmmm|mmmmmmmmmmmmmmmm
//   bfloat16 s eeeeeeee mmmmmmm                     (+1 in the last kept bit when the dropped
//                                                     half is above 0x8000, or is 0x8000 and
//                                                     the kept half is odd)
//
// Adding 0x7fff plus the kept half's lowest bit and then dropping the low 16 bits is exactly
// that rule; a carry out of the mantissa bumps the exponent, which is the right answer too
// (and turns the largest finite values into infinity, as rounding should). NaN is the one case
// the trick breaks: a NaN whose payload sits only in the low half would round to infinity,
// so NaN keeps its sign and becomes a quiet NaN.
//
// The type is plain storage: it converts to and from float implicitly, so arithmetic happens in
// float32 and a result is rounded once, when it is stored back. Usable in host and CUDA code.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GG_HOST_DEVICE __host__ __device__
#else
#define GG_HOST_DEVICE
#endif

namespace gg {

GG_HOST_DEVICE inline uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

GG_HOST_DEVICE inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

// Round-to-nearest-even from float32 to the 16 bits of a bfloat16.
GG_HOST_DEVICE inline uint16_t bf16_bits_from_float(float f) {
    uint32_t u = float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

GG_HOST_DEVICE inline float float_from_bf16_bits(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

struct bfloat16 {
    uint16_t bits;

    bfloat16() = default;  // trivial, so arrays of it are plain memory on the host and the device
    GG_HOST_DEVICE bfloat16(float f) : bits(bf16_bits_from_float(f)) {}
    GG_HOST_DEVICE operator float() const { return float_from_bf16_bits(bits); }

    GG_HOST_DEVICE static bfloat16 from_bits(uint16_t b) {
        bfloat16 h;
        h.bits = b;
        return h;
    }
};
static_assert(sizeof(bfloat16) == 2, "bfloat16 is two bytes of storage");

// The rounding a tensor's value goes through when it is stored in bfloat16.
GG_HOST_DEVICE inline float round_to_bf16(float f) { return float_from_bf16_bits(bf16_bits_from_float(f)); }

}  // namespace gg

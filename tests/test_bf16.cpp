// The bfloat16 storage type (tensor/bf16.h): rounding from float32, widening, NaN and
// infinity. Later cases (tensors, kernels, autocast) join this suite.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tensor/bf16.h"
#include "tensor/dtype.h"

using gg::bfloat16;

static uint16_t bits_of(float f) { return bfloat16(f).bits; }

TEST_CASE("bfloat16 keeps the top half of a float32, rounded to nearest, ties to even") {
    CHECK(bits_of(1.0f) == 0x3f80);
    CHECK(bits_of(-2.0f) == 0xc000);
    CHECK(bits_of(0.0f) == 0x0000);
    CHECK(bits_of(-0.0f) == 0x8000);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: the tie goes to the even neighbour, 1.
    CHECK(bits_of(gg::bits_to_float(0x3f808000u)) == 0x3f80);
    // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: it goes up to the even one.
    CHECK(bits_of(gg::bits_to_float(0x3f818000u)) == 0x3f82);
    // Just above and below a tie.
    CHECK(bits_of(gg::bits_to_float(0x3f808001u)) == 0x3f81);
    CHECK(bits_of(gg::bits_to_float(0x3f807fffu)) == 0x3f80);
    // A carry out of the mantissa bumps the exponent: 1.99999 rounds to 2.
    CHECK(bits_of(gg::bits_to_float(0x3fffffffu)) == 0x4000);
}

TEST_CASE("bfloat16 widens exactly and has float32's range") {
    for (uint32_t b = 0; b < 0x10000u; b += 7) {
        const auto h = bfloat16::from_bits(static_cast<uint16_t>(b));
        const float f = h;
        if (std::isnan(f)) continue;
        CHECK(bfloat16(f).bits == h.bits);  // widening then narrowing is the identity
    }
    CHECK(float(bfloat16(1e38f)) == doctest::Approx(1e38).epsilon(1.0 / 256));
    CHECK(float(bfloat16(1e-38f)) == doctest::Approx(1e-38).epsilon(1.0 / 256));
    CHECK(std::isinf(float(bfloat16(std::numeric_limits<float>::max()))));  // rounds past the largest bf16
    CHECK(float(bfloat16(std::numeric_limits<float>::infinity())) == std::numeric_limits<float>::infinity());
    CHECK(float(bfloat16(-std::numeric_limits<float>::infinity())) == -std::numeric_limits<float>::infinity());
    // 8 significant bits: 257 is not representable, and rounds to 256 (a tie, to even).
    CHECK(float(bfloat16(257.0f)) == 256.0f);
    CHECK(float(bfloat16(259.0f)) == 260.0f);
}

TEST_CASE("bfloat16 keeps NaN a NaN, sign included, even when its payload is in the dropped half") {
    const float low_payload_nan = gg::bits_to_float(0x7f800001u);
    REQUIRE(std::isnan(low_payload_nan));
    CHECK(std::isnan(float(bfloat16(low_payload_nan))));
    CHECK(std::isnan(float(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK((bfloat16(gg::bits_to_float(0xffc00000u)).bits & 0x8000) != 0);
}

TEST_CASE("DType::bf16 is a 2-byte floating dtype named bfloat16") {
    CHECK(gg::dtype_size(gg::DType::bf16) == 2);
    CHECK(std::string(gg::dtype_name(gg::DType::bf16)) == "bfloat16");
    CHECK(gg::is_floating(gg::DType::bf16));
    CHECK_THROWS_WITH_AS(gg::dispatch(gg::DType::bf16, []<class T>() {}), doctest::Contains("bfloat16"),
                         std::invalid_argument);
}

// The checks of tutorial 09's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include "tutorials/09_long_context/exercises/exercises.h"

using namespace gg;

TEST_CASE("09.1 rope_frequencies") {
    // Tutorial 09's settings (head size 16, L = 64) at 8×, and a larger head where YaRN's
    // ramp leaves some channels whole, some divided by s and some blended.
    for (const int64_t D : {16, 64}) {
        for (const nn::RopeScaling scaling :
             {nn::RopeScaling::none, nn::RopeScaling::interpolation, nn::RopeScaling::ntk, nn::RopeScaling::yarn}) {
            nn::RopeOptions options;
            options.scaling = scaling;
            options.factor = 8;
            options.original_length = D == 16 ? 64 : 4096;
            const std::vector<double> expected = nn::RoPE(D, options).frequencies();
            const std::vector<double> theta = exercises::rope_frequencies(D, options);
            INFO("head_dim " << D << ", scaling " << nn::rope_scaling_name(scaling));
            REQUIRE(theta.size() == expected.size());
            for (size_t c = 0; c < theta.size(); ++c) {
                INFO("channel " << c);
                CHECK(theta[c] == doctest::Approx(expected[c]).epsilon(1e-12));
            }
        }
    }
}

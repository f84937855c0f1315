// test_cuda_gemm.cpp — the CUDA GEMM (cuda/gemm.cu), run in the emulator and, where one
// answers, on the GPU (tests/cuda_targets.h), against the CPU's
// (OpenBLAS) on the same inputs: every transpose combination, sizes that are not multiples of
// the tiles, batches with padded and broadcast (stride 0) operands, leading dimensions longer
// than a row, alpha and beta, the BLAS promises about what is not read, both load paths (16-byte
// packs, which the emulator checks for alignment, and element by element) and split-K.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "tensor/backend.h"
#include "tests/cuda_targets.h"
#include "tests/gemm_layout.h"

namespace {

using gg::DType;
using gg::testing::cuda_targets;
using gg::testing::CudaTarget;
using gg::testing::describe;
using gg::testing::Mirror;
using gg::testing::Gemm;
using gg::testing::Layout;


template <class T>
constexpr DType dtype_of = std::is_same_v<T, float> ? DType::f32 : DType::f64;

template <class T>
std::vector<T> uniform(int64_t n, std::mt19937& rng) {
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<T> v(n);
    for (T& x : v) x = T(u(rng));
    return v;
}

// gemm: a table's gemm entry. A, B, C: the operands' buffers, each operand `offset` elements in.
template <class T>
void run(decltype(gg::Backend::gemm) gemm, const Gemm& g, const Layout& l, const T* A, const T* B, T* C) {
    gemm(dtype_of<T>, g.batch, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, A + l.a.offset, l.a.ld, l.a.stride,
         B + l.b.offset, l.b.ld, l.b.stride, g.beta, C + l.c.offset, l.c.ld, l.c.stride);
}

void run_emulated(const Gemm& g, const Layout& l, DType dtype, const void* A, const void* B, void* C) {
    gg::cuda::emulated::gemm(dtype, g.batch, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, A, l.a.ld, l.a.stride, B,
                             l.b.ld, l.b.stride, g.beta, C, l.c.ld, l.c.stride);
}

// The plan the emulated gemm makes for g (cuda/gemm.h) with its operands `offset` elements past
// a 16-byte boundary, as they are in mismatch(): std::vector's buffers come from operator new,
// aligned to 16 bytes where the default new alignment is 16 (x86-64 and AArch64).
static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= 16, "the packed load path needs 16-byte aligned buffers");
template <class T>
gg::cuda::emulated::GemmPlan plan_of(const Gemm& g) {
    alignas(16) static const T buffer[4] = {};
    const Layout l(g);
    return gg::cuda::emulated::gemm_plan(dtype_of<T>, g.batch, g.M, g.N, g.alpha == 0 ? 0 : g.K, buffer + g.offset,
                                         l.a.ld, l.a.stride, buffer + g.offset, l.b.ld, l.b.stride);
}

template <class T>
bool same_bits(T x, T y) {
    return std::memcmp(&x, &y, sizeof(T)) == 0;
}

// "" when the CUDA kernel's C matches the CPU's on every target, else the first difference. Inside the
// (batch, M, N) result the error may be tol × what the same sum of |terms| comes to (the
// CPU's gemm on |A|, |B|, |C|), a scale that cancellation cannot shrink; every element
// outside it (row padding, gaps between batches) must be left bit for bit as it was.
// c_fill: C's initial value (NaN checks that beta = 0 reads nothing); else random.
template <class T>
std::string mismatch(const Gemm& g, double tol, T c_fill = T(2), T ab_fill = T(2)) {
    const Layout l(g);
    std::mt19937 rng(unsigned(g.M * 1000003 + g.N * 1009 + g.K + g.batch));
    std::vector<T> A = uniform<T>(l.a.size, rng), B = uniform<T>(l.b.size, rng), C = uniform<T>(l.c.size, rng);
    if (c_fill != T(2)) C.assign(C.size(), c_fill);
    if (ab_fill != T(2)) A.assign(A.size(), ab_fill), B.assign(B.size(), ab_fill);
    std::vector<T> expected = C;
    const gg::Backend& cpu = gg::backend(gg::Device::CPU);
    run(cpu.gemm, g, l, A.data(), B.data(), expected.data());

    std::vector<T> absA(A.size()), absB(B.size()), scale(C.size());
    for (size_t i = 0; i < A.size(); ++i) absA[i] = std::abs(A[i]);
    for (size_t i = 0; i < B.size(); ++i) absB[i] = std::abs(B[i]);
    for (size_t i = 0; i < C.size(); ++i) scale[i] = std::abs(C[i]);
    Gemm magnitude = g;
    magnitude.alpha = std::abs(g.alpha), magnitude.beta = std::abs(g.beta);
    run(cpu.gemm, magnitude, l, absA.data(), absB.data(), scale.data());

    std::vector<bool> inside(C.size(), false);
    for (int64_t b = 0; b < g.batch; ++b)
        for (int64_t m = 0; m < g.M; ++m)
            for (int64_t n = 0; n < g.N; ++n) inside[l.c.offset + b * l.c.stride + m * l.c.ld + n] = true;
    for (const CudaTarget& t : cuda_targets()) {
        std::vector<T> got = C;
        Mirror mirror(t);
        run(t.table->gemm, g, l, mirror.on(A), mirror.on(B), mirror.on(got));
        mirror.back(got);
        for (size_t i = 0; i < C.size(); ++i) {
            const bool ok = inside[i] ? std::abs(double(got[i]) - double(expected[i])) <= tol * double(scale[i])
                                      : same_bits(got[i], C[i]) && same_bits(expected[i], C[i]);
            if (!ok)
                return "on the " + t.name + ": C[" + std::to_string(i) + "] (" + (inside[i] ? "inside" : "outside") +
                       " the result) is " + std::to_string(got[i]) + ", the CPU gives " + std::to_string(expected[i]);
        }
    }
    return "";
}

// Whether g on random f32 operands gives the same bits twice on every target (a fixed order of
// sums, split-K's included).
bool same_bits_twice(const Gemm& g, unsigned seed) {
    const Layout l(g);
    std::mt19937 rng(seed);
    const std::vector<float> A = uniform<float>(l.a.size, rng), B = uniform<float>(l.b.size, rng),
                             C = uniform<float>(l.c.size, rng);
    bool same = true;
    for (const CudaTarget& t : cuda_targets()) {
        std::vector<float> first = C, second = C;
        Mirror mirror(t);
        run(t.table->gemm, g, l, mirror.on(A), mirror.on(B), mirror.on(first));
        run(t.table->gemm, g, l, mirror.on(A), mirror.on(B), mirror.on(second));
        mirror.back(first);
        mirror.back(second);
        same = same && std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0;
    }
    return same;
}

constexpr double kTolF32 = 1e-5, kTolF64 = 1e-12;

// Calls f.template operator()<T>(tol) for float and double.
template <class F>
void for_float_and_double(F&& f) {
    f.template operator()<float>(kTolF32);
    f.template operator()<double>(kTolF64);
}

}  // namespace

TEST_CASE("gemm matches the CPU for every transpose combination and sizes off the tile grid") {
    const int64_t shapes[][3] = {{1, 1, 1}, {7, 33, 65}, {33, 65, 7}, {65, 7, 33}, {64, 64, 16}, {96, 1, 65}, {1, 96, 17}};
    for_float_and_double([&]<class T>(double tol) {
        int variant = 0;
        for (bool trans_a : {false, true})
            for (bool trans_b : {false, true})
                for (const auto& s : shapes) {
                    Gemm g{.trans_a = trans_a, .trans_b = trans_b, .M = s[0], .N = s[1], .K = s[2]};
                    if (variant++ % 2) g.alpha = -0.75, g.beta = 1.5;  // half the cases accumulate into C
                    CAPTURE(describe(g));
                    CHECK(plan_of<T>(g).tile == 64);
                    CHECK(mismatch<T>(g, tol) == "");
                }
    });
}

TEST_CASE("batched gemm: padded leading dimensions, gaps between batches, a broadcast operand") {
    for_float_and_double([&]<class T>(double tol) {
        for (bool trans_a : {false, true})
            for (bool trans_b : {false, true}) {
                Gemm padded{.batch = 3, .trans_a = trans_a, .trans_b = trans_b, .M = 33, .N = 7, .K = 65,
                            .alpha = 0.5, .beta = -1.25, .pad_a = 3, .pad_b = 1, .pad_c = 5};
                Layout tight(padded);
                padded.stride_a = tight.a.stride + 11, padded.stride_b = tight.b.stride + 2,
                padded.stride_c = tight.c.stride + 7;
                Gemm broadcast_a{.batch = 4, .trans_a = trans_a, .trans_b = trans_b, .M = 7, .N = 65, .K = 33,
                                 .beta = 1, .stride_a = 0};
                Gemm broadcast_b{.batch = 2, .trans_a = trans_a, .trans_b = trans_b, .M = 65, .N = 33, .K = 7,
                                 .alpha = 2, .stride_b = 0};
                for (const Gemm& g : {padded, broadcast_a, broadcast_b}) {
                    CAPTURE(describe(g));
                    CHECK(mismatch<T>(g, tol) == "");
                }
            }
    });
}

TEST_CASE("beta = 0 never reads C and alpha = 0 never reads A or B (they may hold NaN)") {
    for_float_and_double([&]<class T>(double tol) {
        const T nan = std::numeric_limits<T>::quiet_NaN();
        for (bool trans_a : {false, true}) {
            const Gemm overwrite{.batch = 2, .trans_a = trans_a, .trans_b = !trans_a, .M = 33, .N = 65, .K = 7,
                                 .alpha = 1.5, .beta = 0, .pad_c = 2};
            CAPTURE(describe(overwrite));
            CHECK(mismatch<T>(overwrite, tol, nan) == "");
            const Gemm scale_only{.trans_a = trans_a, .M = 7, .N = 33, .K = 65, .alpha = 0, .beta = -2};
            CAPTURE(describe(scale_only));
            CHECK(mismatch<T>(scale_only, tol, T(2), nan) == "");
        }
    });
}

TEST_CASE("K = 0 scales C by beta; an empty M, N or batch writes nothing") {
    for_float_and_double([&]<class T>(double tol) {
        for (const Gemm& g : {Gemm{.M = 7, .N = 33, .K = 0, .beta = 0.5}, Gemm{.batch = 2, .M = 33, .N = 7, .K = 0},
                              Gemm{.M = 0, .N = 7, .K = 5, .beta = 3}, Gemm{.M = 7, .N = 0, .K = 5, .beta = 3},
                              Gemm{.batch = 0, .M = 7, .N = 5, .K = 3, .beta = 3}}) {
            CAPTURE(describe(g));
            CHECK(mismatch<T>(g, tol) == "");
        }
    });
}

TEST_CASE("int64 and leading dimensions shorter than a row are errors, as on the CPU") {
    std::vector<int64_t> a(16), b(16), c(16);
    const Gemm g{.M = 2, .N = 2, .K = 2};
    CHECK_THROWS_WITH_AS(run_emulated(g, Layout(g), DType::i64, a.data(), b.data(), c.data()),
                         "gemm: no kernel for int64", std::invalid_argument);
    CHECK_THROWS_AS(gg::backend(gg::Device::CPU).gemm(DType::i64, 1, false, false, 2, 2, 2, 1, a.data(), 2, 0,
                                                      b.data(), 2, 0, 0, c.data(), 2, 0),
                    std::invalid_argument);
    std::vector<float> x(64);
    CHECK_THROWS_WITH_AS(gg::cuda::emulated::gemm(DType::f32, 1, false, true, 4, 3, 5, 1, x.data(), 5, 0, x.data(), 4,
                                                  0, 0, x.data(), 3, 0),
                         "gemm: ldb 4 is shorter than a stored row of 5 (batch 1, M 4, N 3, K 5, trans_a 0, trans_b 1)",
                         std::invalid_argument);
}

TEST_CASE("two runs are bitwise identical") {
    const Gemm g{.batch = 2, .trans_b = true, .M = 65, .N = 33, .K = 96, .alpha = 0.3, .beta = 0.7};
    CHECK(same_bits_twice(g, 7));
}

TEST_CASE("f32 products with 132 or more 128×128 tiles take the large tile (8×8 per thread)") {
    // 66 batches of 129×129: 2×2 tiles each, 264 in all, every tile cut by an edge but one. Rows
    // padded by 1 load element by element, by 3 (leading dimensions 20 and 132) in packs.
    for (bool trans_a : {false, true})
        for (bool trans_b : {false, true})
            for (int64_t pad : {1, 3}) {
                const Gemm g{.batch = 66, .trans_a = trans_a, .trans_b = trans_b, .M = 129, .N = 129, .K = 17,
                             .alpha = 0.5, .beta = trans_a ? 0.0 : -1.0, .pad_a = pad, .pad_b = pad, .pad_c = 2};
                CAPTURE(describe(g));
                CHECK(plan_of<float>(g).tile == 128);
                CHECK(plan_of<float>(g).vector_loads == (pad == 3));
                CHECK(mismatch<float>(g, kTolF32) == "");
            }
}

TEST_CASE("split-K: few tiles of C and a long K, summed in a fixed order") {
    // f32 takes the 128×128 tile: 40×24 is one, K 1100 is cut into 4 ranges of 280 (the last
    // 260), each summed by its own block, then added up by gemm_sum_splits; 65×65 is one per
    // batch and K 600 two ranges. f64 takes 64×64 tiles: 65×65 is four per batch.
    for_float_and_double([&]<class T>(double tol) {
        for (bool trans_a : {false, true})
            for (bool trans_b : {false, true}) {
                Gemm one_tile{.trans_a = trans_a, .trans_b = trans_b, .M = 40, .N = 24, .K = 1100, .alpha = -0.5,
                              .beta = 1.5, .pad_a = 1, .pad_c = 3};
                Gemm batched{.batch = 2, .trans_a = trans_a, .trans_b = trans_b, .M = 65, .N = 65, .K = 600,
                             .pad_b = 2, .stride_b = 0};
                for (const Gemm& g : {one_tile, batched}) {
                    CAPTURE(describe(g));
                    CHECK(plan_of<T>(g).splits > 1);
                    CHECK(mismatch<T>(g, tol) == "");
                }
            }
        const Gemm overwrite{.trans_a = true, .M = 24, .N = 40, .K = 700, .alpha = 2, .beta = 0};
        CAPTURE(describe(overwrite));
        CHECK(mismatch<T>(overwrite, tol, std::numeric_limits<T>::quiet_NaN()) == "");  // beta 0 reads no C
    });
    const Gemm g{.trans_a = true, .M = 40, .N = 24, .K = 1100, .alpha = 0.3, .beta = 0.7};
    const auto plan = plan_of<float>(g);
    CHECK(plan.tile == 128);
    CHECK(plan.splits == 4);
    CHECK(plan.k_split == 280);
    CHECK(same_bits_twice(g, 11));
}

TEST_CASE("16-byte packs where A and B allow them, one element at a time where they do not") {
    // Each case runs the same product twice: once with every operand starting on 16 bytes, every
    // leading dimension and batch stride a multiple of a pack (4 floats, 2 doubles), so that its
    // interior slices load packs; once with one of those broken, so that gemm must load element by
    // element (where a pack would fault on a GPU, and throws in the emulator). 68 × 72 with K 44
    // has interior and edge tiles in M and N and interior and edge slices in K (slices of 8).
    for_float_and_double([&]<class T>(double tol) {
        for (bool trans_a : {false, true})
            for (bool trans_b : {false, true}) {
                const Gemm aligned{.batch = 2, .trans_a = trans_a, .trans_b = trans_b, .M = 68, .N = 72, .K = 44,
                                   .alpha = 0.5, .beta = -1, .pad_a = 4, .pad_c = 1};
                Gemm one_in = aligned, odd_lda = aligned, odd_ldb = aligned, odd_stride = aligned,
                     broadcast = aligned;
                one_in.offset = 1;
                odd_lda.pad_a = 1;
                odd_ldb.pad_b = 1;
                odd_stride.stride_b = Layout(aligned).b.stride + 1;
                broadcast.stride_a = 0;
                const std::pair<Gemm, bool> cases[] = {{aligned, true},  {broadcast, true}, {one_in, false},
                                                       {odd_lda, false}, {odd_ldb, false},  {odd_stride, false}};
                for (const auto& c : cases) {
                    const Gemm& g = c.first;  // not a structured binding: CAPTURE's lambda reads it
                    const bool packs = c.second;
                    CAPTURE(describe(g));
                    CHECK(plan_of<T>(g).vector_loads == packs);
                    CHECK(plan_of<T>(g).splits == 1);
                    CHECK(mismatch<T>(g, tol) == "");
                }
            }
    });
}

TEST_CASE("16-byte packs on the 128×128 tile and under split-K") {
    // f32 136 × 128 is two 128-tiles, one interior, and K 1100 splits; f64 72 × 64 with K 600
    // splits into 2 ranges of its 64-tiles. Each aligned, then one element in.
    const auto check = [&]<class T>(Gemm g, double tol) {
        for (int64_t offset : {0, 1}) {
            g.offset = offset;
            CAPTURE(describe(g));
            const auto plan = plan_of<T>(g);
            CHECK(plan.vector_loads == (offset == 0));
            CHECK(plan.tile == (std::is_same_v<T, float> ? 128 : 64));
            CHECK(plan.splits > 1);
            CHECK(mismatch<T>(g, tol) == "");
        }
    };
    for (bool trans_a : {false, true})
        for (bool trans_b : {false, true}) {
            check.template operator()<float>(
                Gemm{.trans_a = trans_a, .trans_b = trans_b, .M = 136, .N = 128, .K = 1100, .alpha = 1.5, .beta = 0.5},
                kTolF32);
            check.template operator()<double>(
                Gemm{.trans_a = trans_a, .trans_b = trans_b, .M = 72, .N = 64, .K = 600, .alpha = -1, .beta = 2},
                kTolF64);
        }
}

TEST_CASE("the medium step's products: 128×128 tiles, split-K for the weight gradients only") {
    // d_model 384, 32 × 256 tokens: the forward x·Wᵀ and input gradient dY·W have 192 or more
    // tiles and no split; the weight gradients dYᵀ·X, 9 to 36 tiles with K 8192, are split
    // until they make about 264 blocks (kFillBlocks).
    const int64_t tokens = 8192, d = 384;
    for (int64_t n : {d, 3 * d, 4 * d}) {
        CAPTURE(n);
        const Gemm forward{.trans_b = true, .M = tokens, .N = n, .K = d}, input_grad{.M = tokens, .N = d, .K = n},
            weight_grad{.trans_a = true, .M = n, .N = d, .K = tokens};
        for (const Gemm& g : {forward, input_grad}) {
            const auto plan = plan_of<float>(g);
            CHECK(plan.tile == 128);
            CHECK(plan.splits == 1);
            CHECK(plan.vector_loads);
        }
        const auto plan = plan_of<float>(weight_grad);
        const int64_t blocks = (n / 128) * (d / 128) * plan.splits;
        CHECK(plan.tile == 128);
        CHECK(plan.vector_loads);
        CHECK(plan.k_split % 8 == 0);
        CHECK(plan.splits == (tokens + plan.k_split - 1) / plan.k_split);
        CHECK(blocks >= 264);
        CHECK(blocks < 264 + 36);
    }
}

TEST_CASE("more batches than grid.z's 65535 take several launches") {
    // 1×1 matrices and K = 0 (C = beta·C): one block per batch, each thread through once, the
    // least the emulator can do per block. The operands' batch offsets are the same sums as C's.
    const Gemm g{.batch = 65537, .M = 1, .N = 1, .K = 0, .beta = -1};
    CHECK(mismatch<float>(g, kTolF32) == "");
}

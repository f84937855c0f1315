// The vector exponentials of cpu/vector_math.h on every path this build and this CPU run:
// against the scalar functions over a sweep with the edge values (−∞, underflow to 0, the
// overflow to +∞, NaN), and the kernels that use them (attention, the gate's σ, SwiGLU) on
// each path against the same kernels on the scalar path and against float64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "cpu/vector_math.h"
#include "tests/check.h"

using namespace gg;
using gg::testing::max_abs_diff;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<VectorPath> supported_paths() {
    std::vector<VectorPath> paths;
    for (VectorPath path : {VectorPath::scalar, VectorPath::avx2, VectorPath::avx512})
        if (vector_path_supported(path)) paths.push_back(path);
    return paths;
}

// Runs the enclosed code on one path, then puts back the one that was in use.
struct OnPath {
    VectorPath saved = vector_path();
    explicit OnPath(VectorPath path) { set_vector_path(path); }
    ~OnPath() { set_vector_path(saved); }
};

// How many floats lie between a and b (both finite, same sign or zero).
int64_t ulp_distance(float a, float b) {
    int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    return std::llabs(int64_t(ia) - int64_t(ib));
}

// −120 to 100 in small steps (through expf's underflow below −103.97 and its overflow above
// 88.72), an odd count so that every path has a partial last register, and the edge values.
std::vector<float> sweep() {
    std::vector<float> x;
    for (float v = -120.0f; v <= 100.0f; v += 0.0173f) x.push_back(v);
    for (float v : {-kInf, kInf, std::numeric_limits<float>::quiet_NaN(), 0.0f, -0.0f, 88.72f, 88.73f, -87.33f,
                    -87.34f, -103.97f, -103.98f, -1e-30f, 1e-30f, 1e-7f})
        x.push_back(v);
    if (x.size() % 2 == 0) x.push_back(0.5f);
    return x;
}

}  // namespace

TEST_CASE("vector_math: e^x on every path within 2 ULP of std::exp, and its edge values exact") {
    const std::vector<float> x = sweep();
    const int64_t n = int64_t(x.size());
    for (VectorPath path : supported_paths()) {
        CAPTURE(std::string(vector_path_name(path)));
        OnPath on(path);
        std::vector<float> y(n);
        const float sum = vec::exp_shifted(y.data(), x.data(), 0.0f, n);
        int64_t worst = 0;
        for (int64_t j = 0; j < n; ++j) {
            const float want = std::exp(x[j]);
            CAPTURE(x[j]);
            if (std::isnan(want)) {
                CHECK(std::isnan(y[j]));
            } else if (want == 0 || std::isinf(want)) {
                CHECK(y[j] == want);
            } else if (want < std::numeric_limits<float>::min()) {  // subnormal: an absolute bound
                CHECK(std::fabs(y[j] - want) <= 2 * std::numeric_limits<float>::denorm_min());
            } else {
                worst = std::max(worst, ulp_distance(y[j], want));
            }
        }
        CHECK(worst <= 2);
        // The sum holds +∞ and NaN from the edge values; the sweep up to 60, whose sum is a
        // finite float, checks its rounding.
        CHECK(std::isnan(sum));
        std::vector<float> finite;
        double finite_exact = 0;
        for (float v : x)
            if (v <= 60) finite.push_back(v), finite_exact += std::exp(v);
        std::vector<float> z(finite.size());
        const float finite_sum = vec::exp_shifted(z.data(), finite.data(), 0.0f, int64_t(finite.size()));
        CHECK(std::fabs(finite_sum - finite_exact) <= 1e-6 * finite_exact);
    }
}

TEST_CASE("vector_math: the shift is subtracted before the exponential, in place too") {
    std::vector<float> x(37);
    for (size_t j = 0; j < x.size(); ++j) x[j] = 0.25f * float(j) - 3;
    for (VectorPath path : supported_paths()) {
        CAPTURE(std::string(vector_path_name(path)));
        OnPath on(path);
        std::vector<float> y = x;
        const float sum = vec::exp_shifted(y.data(), y.data(), 4.5f, int64_t(y.size()));
        double want_sum = 0;
        for (size_t j = 0; j < x.size(); ++j) {
            const float want = std::exp(x[j] - 4.5f);
            CHECK(ulp_distance(y[j], want) <= 2);
            want_sum += want;
        }
        CHECK(std::fabs(sum - want_sum) <= 1e-6 * want_sum);
        CHECK(vec::exp_shifted(y.data(), x.data(), 0.0f, 0) == 0.0f);  // nothing to do
    }
}

TEST_CASE("vector_math: σ(x) on every path within a relative 4e-7 of its double value, where that is a normal float") {
    const std::vector<float> x = sweep();
    const int64_t n = int64_t(x.size());
    for (VectorPath path : supported_paths()) {
        CAPTURE(std::string(vector_path_name(path)));
        OnPath on(path);
        std::vector<float> y(n);
        vec::sigmoid(y.data(), x.data(), n);
        double worst = 0;
        for (int64_t j = 0; j < n; ++j) {
            CAPTURE(x[j]);
            const double want = 1 / (1 + std::exp(-double(x[j])));
            if (std::isnan(want)) {
                CHECK(std::isnan(y[j]));
            } else if (want < std::numeric_limits<float>::min()) {
                // σ(x) ≈ e^x below the normal floats: 1 / (1 + e^{−x}) in float loses it to the
                // overflow of e^{−x} below x = −88.7 and gives 0, as the scalar formula does.
                CHECK(std::fabs(y[j] - want) <= std::numeric_limits<float>::min());
            } else {
                worst = std::max(worst, std::fabs(y[j] - want) / want);
            }
        }
        CHECK(worst <= 4e-7);
    }
}

TEST_CASE("vector_math: max_value on every path equals std::max_element") {
    Generator gen(5);
    for (VectorPath path : supported_paths()) {
        CAPTURE(std::string(vector_path_name(path)));
        OnPath on(path);
        for (int64_t n : {1, 7, 16, 17, 64, 300}) {
            CAPTURE(n);
            std::vector<float> x = randn({n}, gen).to_vector<float>();
            CHECK(vec::max_value(x.data(), n) == *std::max_element(x.begin(), x.end()));
            x[n - 1] = 1e30f;  // the largest in the partial last register
            CHECK(vec::max_value(x.data(), n) == 1e30f);
            std::fill(x.begin(), x.end(), -kInf);  // a row whose keys are all hidden
            CHECK(vec::max_value(x.data(), n) == -kInf);
        }
    }
}

TEST_CASE("vector_math: set_vector_path refuses a path this build or CPU lacks") {
    for (VectorPath path : {VectorPath::avx2, VectorPath::avx512})
        if (!vector_path_supported(path)) CHECK_THROWS_AS(set_vector_path(path), std::invalid_argument);
    CHECK(vector_path_supported(VectorPath::scalar));
    // The widest path is in use unless GATEDGRAD_VECTOR_PATH says otherwise.
    if (!std::getenv("GATEDGRAD_VECTOR_PATH"))
        CHECK(vector_path() == supported_paths().back());
}

TEST_CASE("vector_math: attention, the gate's σ and SwiGLU agree on every path, forward and backward") {
    Generator gen(11);
    // 150 queries and 300 keys: more than one query block and one key tile (cpu/attention.cpp),
    // and row lengths that leave partial registers.
    const Tensor q64 = randn({1, 2, 150, 8}, gen, DType::f64), k64 = randn({1, 2, 300, 8}, gen, DType::f64);
    const Tensor v64 = randn({1, 2, 300, 8}, gen, DType::f64), g64 = randn({1, 2, 150, 8}, gen, DType::f64);
    const Tensor a64 = randn({3, 1001}, gen, DType::f64) * 4.0, b64 = randn({3, 1001}, gen, DType::f64);
    struct Results {
        std::vector<Tensor> values;
    };
    // Everything in float32 on the path in use.
    auto run = [&] {
        const Tensor q = q64.to(DType::f32).requires_grad_(), k = k64.to(DType::f32).requires_grad_();
        const Tensor v = v64.to(DType::f32).requires_grad_();
        const Tensor o = nn::scaled_dot_product_attention(q, k, v, {true, 0, 0, false});
        o.backward(g64.to(DType::f32));
        const Tensor a = a64.to(DType::f32).requires_grad_(), b = b64.to(DType::f32).requires_grad_();
        const Tensor y = swiglu(a, b) + sigmoid(a);
        y.backward(ones_like(y));
        return Results{{o, q.grad(), k.grad(), v.grad(), y, a.grad(), b.grad()}};
    };
    // The same in float64 (scalar exp throughout): the reference for every path.
    auto reference = [&] {
        const Tensor q = q64.detach().requires_grad_(), k = k64.detach().requires_grad_(), v = v64.detach().requires_grad_();
        const Tensor o = nn::scaled_dot_product_attention(q, k, v, {true, 0, 0, false});
        o.backward(g64);
        const Tensor a = a64.detach().requires_grad_(), b = b64.detach().requires_grad_();
        const Tensor y = swiglu(a, b) + sigmoid(a);
        y.backward(ones_like(y));
        return Results{{o, q.grad(), k.grad(), v.grad(), y, a.grad(), b.grad()}};
    }();
    Results scalar;
    {
        OnPath on(VectorPath::scalar);
        scalar = run();
    }
    const char* names[] = {"attention", "dq", "dk", "dv", "swiglu + sigmoid", "da", "db"};
    for (VectorPath path : supported_paths()) {
        CAPTURE(std::string(vector_path_name(path)));
        OnPath on(path);
        const Results got = run();
        for (size_t i = 0; i < got.values.size(); ++i) {
            CAPTURE(names[i]);
            const Tensor want = reference.values[i];
            const double scale = std::max(1.0, max_abs_diff(want, zeros_like(want)));
            CHECK(max_abs_diff(got.values[i].to(DType::f64), want) < 2e-5 * scale);
            CHECK(max_abs_diff(got.values[i], scalar.values[i]) < 2e-5 * scale);
        }
    }
}

// test_tensor.cpp — tensors, views and the CPU backend's forward ops, without autograd.
//
// Expected values come from hand-worked cases or from naive loops written here, never
// from the ops under test.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cpu/host_memory.h"
#include "gatedgrad.h"
#include "tests/check.h"

using gg::DType;
using gg::Shape;
using gg::Tensor;

using gg::testing::mismatch;

namespace {

// Row-major index ↔ multi-index, for the naive references below.
std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
    std::vector<int64_t> idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
    return flat;
}

// f(a, b) with NumPy broadcasting, element by element.
std::vector<double> broadcast_reference(const Tensor& a, const Tensor& b, const Shape& out_shape,
                                        const std::function<double(double, double)>& f) {
    const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
    auto source = [&](const std::vector<int64_t>& out_idx, const Shape& shape) {
        const size_t lead = out_idx.size() - shape.size();
        std::vector<int64_t> idx(shape.size());
        for (size_t d = 0; d < shape.size(); ++d) idx[d] = shape[d] == 1 ? 0 : out_idx[d + lead];
        return ravel(idx, shape);
    };
    std::vector<double> out(gg::shape_numel(out_shape));
    for (size_t i = 0; i < out.size(); ++i) {
        const auto idx = unravel(static_cast<int64_t>(i), out_shape);
        out[i] = f(va[source(idx, a.shape())], vb[source(idx, b.shape())]);
    }
    return out;
}

// Reduces `x` over `dims` with `f` (starting from `init`) by visiting every element.
std::vector<double> reduce_reference(const Tensor& x, const std::set<int64_t>& dims, double init,
                                     const std::function<double(double, double)>& f, Shape* kept_shape) {
    Shape keep = x.shape();
    for (int64_t d : dims) keep[d] = 1;
    std::vector<double> out(gg::shape_numel(keep), init);
    const auto v = x.to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) {
        auto idx = unravel(static_cast<int64_t>(i), x.shape());
        for (int64_t d : dims) idx[d] = 0;
        double& acc = out[ravel(idx, keep)];
        acc = f(acc, v[i]);
    }
    *kept_shape = keep;
    return out;
}

// C = A @ B for row-major (M, K) and (K, N) values.
std::vector<double> naive_matmul(const std::vector<double>& A, const std::vector<double>& B, int64_t M, int64_t K,
                                 int64_t N) {
    std::vector<double> C(M * N, 0.0);
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
            for (int64_t k = 0; k < K; ++k) C[i * N + j] += A[i * K + k] * B[k * N + j];
    return C;
}

std::string printed(const Tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
}

}  // namespace

// --- creation ---

TEST_CASE("tensor: zeros, ones, full, scalar and the *_like forms") {
    const Tensor z = gg::zeros({2, 3});
    CHECK(z.shape() == Shape{2, 3});
    CHECK(z.dtype() == DType::f32);
    CHECK(z.device() == gg::Device::CPU);
    CHECK(z.is_contiguous());
    CHECK(mismatch(z, std::vector<double>(6, 0.0)) == "");
    CHECK(mismatch(gg::ones({4}, DType::i64), {1, 1, 1, 1}) == "");
    const Tensor f = gg::full({2, 2}, 2.5, DType::f64);
    CHECK(f.dtype() == DType::f64);
    CHECK(mismatch(f, {2.5, 2.5, 2.5, 2.5}) == "");
    const Tensor s = gg::scalar(-3.25);
    CHECK(s.dim() == 0);
    CHECK(s.numel() == 1);
    CHECK(s.item() == -3.25);
    CHECK(gg::zeros_like(f).dtype() == DType::f64);
    CHECK(mismatch(gg::ones_like(f), {1, 1, 1, 1}) == "");
    CHECK(gg::zeros({0, 3}).numel() == 0);
    CHECK_THROWS_WITH_AS(Tensor::empty({2, -1}), doctest::Contains("negative dim"), std::invalid_argument);
}

TEST_CASE("tensor: arange with integer and fractional steps") {
    const Tensor a = gg::arange(5);
    CHECK(a.dtype() == DType::i64);
    CHECK(mismatch(a, {0, 1, 2, 3, 4}) == "");
    CHECK(mismatch(gg::arange(2, 11, 3), {2, 5, 8}) == "");
    const Tensor f = gg::arange(0, 1, 0.25, DType::f32);
    CHECK(f.dtype() == DType::f32);
    CHECK(mismatch(f, {0, 0.25, 0.5, 0.75}) == "");
    CHECK(mismatch(gg::arange(0, 1, 0.3, DType::f64), {0, 0.3, 0.6, 0.9}) == "");
    CHECK(gg::arange(0, 0.3, 0.1, DType::f64).numel() == 3);  // [0, 0.3) stops short of 0.3
    CHECK(mismatch(gg::arange(1, 0, -0.5, DType::f64), {1, 0.5}) == "");
    CHECK(gg::arange(3, 3).numel() == 0);
    CHECK_THROWS_WITH_AS(gg::arange(0, 5, 0), doctest::Contains("arange: cannot go from"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::arange(0, 5, -1), doctest::Contains("arange"), std::invalid_argument);
}

TEST_CASE("tensor: from_vector keeps values, dtype and shape") {
    const Tensor f = gg::from_vector(std::vector<float>{1.5f, -2, 3, 4, 5, 6}, {2, 3});
    CHECK(f.dtype() == DType::f32);
    CHECK(f.shape() == Shape{2, 3});
    CHECK(f.data<float>()[1] == -2.0f);
    const Tensor d = gg::from_vector(std::vector<double>{0.1, 0.2}, {2});
    CHECK(d.dtype() == DType::f64);
    CHECK(d.to_vector<double>() == std::vector<double>{0.1, 0.2});
    const Tensor i = gg::from_vector(std::vector<int64_t>{7, -8, 9}, {3, 1});
    CHECK(i.dtype() == DType::i64);
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{7, -8, 9});
    CHECK(gg::from_vector(std::vector<double>{4}, {}).item() == 4);
    CHECK_THROWS_WITH_AS(gg::from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
                         doctest::Contains("from_vector: 3 values cannot fill shape (2,2)"), std::invalid_argument);
}

TEST_CASE("tensor: random streams are reproducible per seed") {
    gg::Generator g1(42), g2(42), g3(43);
    const auto a = gg::randn({1000}, g1).to_vector<double>();
    const auto b = gg::randn({1000}, g2).to_vector<double>();
    const auto c = gg::randn({1000}, g3).to_vector<double>();
    CHECK(a == b);
    CHECK(a != c);
    CHECK(gg::rand({50}, g1, DType::f64).to_vector<double>() == gg::rand({50}, g2, DType::f64).to_vector<double>());
    CHECK(gg::randint(0, 100, {50}, g1).to_vector<int64_t>() == gg::randint(0, 100, {50}, g2).to_vector<int64_t>());
    // The next draw continues the stream rather than repeating it.
    CHECK(gg::randn({1000}, g1).to_vector<double>() != a);

    // The default generator too, through manual_seed.
    gg::manual_seed(7);
    const auto d1 = gg::rand({20}).to_vector<double>();
    gg::manual_seed(7);
    CHECK(gg::rand({20}).to_vector<double>() == d1);

    // state()/set_state() resume a stream exactly.
    gg::Generator g(5);
    const auto state = g.state();
    const double first = g.normal();
    g.set_state(state);
    CHECK(g.normal() == first);
}

TEST_CASE("tensor: randn, rand and randint have the right distributions") {
    gg::Generator gen(2024);
    const auto n = gg::randn({100000}, gen, DType::f64).to_vector<double>();
    double mean = 0, sq = 0;
    for (double x : n) mean += x;
    mean /= n.size();
    for (double x : n) sq += (x - mean) * (x - mean);
    const double std = std::sqrt(sq / n.size());
    CHECK(std::abs(mean) < 0.02);  // standard error 0.003
    CHECK(std::abs(std - 1) < 0.02);

    const auto u = gg::rand({100000}, gen).to_vector<double>();
    double umean = 0, umin = 1, umax = 0;
    for (double x : u) umean += x, umin = std::min(umin, x), umax = std::max(umax, x);
    CHECK(umin >= 0);
    CHECK(umax < 1);
    CHECK(std::abs(umean / u.size() - 0.5) < 0.01);

    const auto r = gg::randint(-3, 4, {10000}, gen).to_vector<int64_t>();
    std::set<int64_t> seen(r.begin(), r.end());
    CHECK(*seen.begin() == -3);
    CHECK(*seen.rbegin() == 3);
    CHECK(seen.size() == 7);
    CHECK_THROWS_WITH_AS(gg::randint(5, 5, {2}, gen), doctest::Contains("randint: empty range [5, 5)"),
                         std::invalid_argument);
}

// --- views ---

TEST_CASE("tensor: views share storage with their base") {
    const Tensor base = gg::arange(0, 24, 1, DType::f32).view({2, 3, 4});
    const Tensor viewed = base.view({6, 4});
    const Tensor permuted = base.permute({2, 0, 1});  // (4, 2, 3)
    const Tensor transposed = base.transpose(0, 2);   // (4, 3, 2)
    const Tensor narrowed = base.narrow(1, 1, 2);     // (2, 2, 4)
    const Tensor selected = base.select(0, 1);        // (3, 4)
    const Tensor expanded = base.narrow(0, 1, 1).expand({5, 3, 4});
    const Tensor squeezed = base.narrow(0, 1, 1).squeeze(0);
    const Tensor unsqueezed = base.unsqueeze(1);  // (2, 1, 3, 4)
    const Tensor flat = base.flatten();
    for (const Tensor& v : {viewed, permuted, transposed, narrowed, selected, expanded, squeezed, unsqueezed, flat})
        CHECK(v.shares_storage(base));

    // base[1, 2, 3] is element 23; write through the base, read through every view.
    base.data<float>()[23] = -100;
    CHECK(viewed.to_vector<double>()[5 * 4 + 3] == -100);
    CHECK(permuted.to_vector<double>()[3 * 6 + 1 * 3 + 2] == -100);   // [3, 1, 2]
    CHECK(transposed.to_vector<double>()[3 * 6 + 2 * 2 + 1] == -100);  // [3, 2, 1]
    CHECK(narrowed.to_vector<double>()[1 * 8 + 1 * 4 + 3] == -100);    // [1, 1, 3]
    CHECK(selected.to_vector<double>()[2 * 4 + 3] == -100);            // [2, 3]
    const auto ex = expanded.to_vector<double>();
    for (int64_t k = 0; k < 5; ++k) CHECK(ex[k * 12 + 2 * 4 + 3] == -100);  // [k, 2, 3] for every k
    CHECK(squeezed.to_vector<double>()[2 * 4 + 3] == -100);
    CHECK(unsqueezed.to_vector<double>()[23] == -100);
    CHECK(flat.to_vector<double>()[23] == -100);
    // An untouched element is still what arange wrote.
    CHECK(permuted.to_vector<double>()[0 * 6 + 1 * 3 + 2] == 1 * 12 + 2 * 4 + 0);
}

TEST_CASE("tensor: views of views index the right elements") {
    const Tensor x = gg::arange(0, 60, 1, DType::f64).view({3, 4, 5});  // x[a, b, c] = 20a + 5b + c
    const Tensor p = x.permute({2, 0, 1});                              // (5, 3, 4): p[c, a, b]
    const Tensor n = p.narrow(1, 1, 2);                                 // (5, 2, 4): a = 1 + j
    const Tensor t = n.transpose(0, 2);                                 // (4, 2, 5): t[b, j, c]
    REQUIRE(t.shape() == Shape{4, 2, 5});
    std::vector<double> expected;
    for (int b = 0; b < 4; ++b)
        for (int j = 0; j < 2; ++j)
            for (int c = 0; c < 5; ++c) expected.push_back(20 * (1 + j) + 5 * b + c);
    CHECK(mismatch(t, expected) == "");
    CHECK_FALSE(t.is_contiguous());

    // contiguous() copies only when the layout needs it.
    const Tensor tc = t.contiguous();
    CHECK(tc.is_contiguous());
    CHECK_FALSE(tc.shares_storage(x));
    CHECK(mismatch(tc, expected) == "");
    CHECK(x.contiguous().shares_storage(x));
    CHECK(x.narrow(0, 1, 2).is_contiguous());  // a run of whole rows
    CHECK(x.narrow(0, 1, 2).contiguous().shares_storage(x));
    CHECK(x.select(1, 2).select(1, 3).shape() == Shape{3});
    CHECK(mismatch(x.select(1, 2).select(1, 3), {13, 33, 53}) == "");
    CHECK(mismatch(x.select(-1, -1).select(0, 2), {44, 49, 54, 59}) == "");  // negative dim and index
    CHECK(x.unsqueeze(0).unsqueeze(-1).shape() == Shape{1, 3, 4, 5, 1});
    CHECK(x.unsqueeze(0).squeeze(0).squeeze(1).shape() == Shape{3, 4, 5});  // squeezing a non-1 dim is a no-op
    CHECK(x.flatten(1).shape() == Shape{3, 20});
    CHECK(x.flatten(0, 1).shape() == Shape{12, 5});
    CHECK(gg::scalar(2).flatten().shape() == Shape{1});

    // Two transposes cancel; permute of a narrow is still the same storage.
    CHECK(mismatch(x.transpose(0, 1).transpose(0, 1), x.to_vector<double>()) == "");
    const Tensor pn = x.narrow(2, 1, 3).permute({1, 2, 0});  // (4, 3, 3): pn[b, c', a] = x[a, b, 1 + c']
    CHECK(pn.shares_storage(x));
    CHECK(pn.to_vector<double>()[ravel({2, 1, 2}, {4, 3, 3})] == 20 * 2 + 5 * 2 + 2);
}

TEST_CASE("tensor: reshape copies a non-contiguous tensor; view refuses it") {
    const Tensor x = gg::arange(0, 6, 1, DType::f32).view({2, 3});
    const Tensor r = x.reshape({3, 2});
    CHECK(r.shares_storage(x));  // contiguous: a view
    const Tensor xt = x.t();     // (3, 2) non-contiguous
    const Tensor flat = xt.reshape({6});
    CHECK_FALSE(flat.shares_storage(x));
    CHECK(mismatch(flat, {0, 3, 1, 4, 2, 5}) == "");
    CHECK(xt.reshape({-1}).shape() == Shape{6});
    CHECK(x.view({-1, 2}).shape() == Shape{3, 2});
    CHECK_THROWS_WITH_AS(xt.view({6}), doctest::Contains("view: tensor of shape (3,2) is not contiguous"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(x.view({4, 2}), doctest::Contains("cannot view shape (2,3) (6 elements) as (4,2)"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(x.view({-1, 4}), doctest::Contains("cannot view shape"), std::invalid_argument);
}

TEST_CASE("tensor: expand repeats with stride 0") {
    const Tensor col = gg::from_vector(std::vector<double>{1, 2, 3}, {3, 1});
    const Tensor e = col.expand({2, 3, 4});
    CHECK(e.shape() == Shape{2, 3, 4});
    CHECK(e.strides()[0] == 0);
    CHECK(e.strides()[2] == 0);
    std::vector<double> expected;
    for (int k = 0; k < 2; ++k)
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 4; ++j) expected.push_back(i + 1);
    CHECK(mismatch(e, expected) == "");
    CHECK(col.expand({-1, 2}).shape() == Shape{3, 2});
    CHECK_THROWS_WITH_AS(col.expand({4, 2}), doctest::Contains("expand: cannot expand shape (3,1) to (4,2)"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(col.expand({3}), doctest::Contains("expand: cannot expand"), std::invalid_argument);
}

// --- element-wise ---

TEST_CASE("tensor: binary ops broadcast as NumPy") {
    gg::Generator gen(3);
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{2, 3}, {2, 3}}, {{2, 3}, {3}},       {{2, 1}, {1, 3}},       {{4, 1, 3}, {2, 1}},
        {{}, {2, 2}},     {{2, 2}, {}},        {{3}, {5, 4, 1}},       {{1}, {2, 3}},
        {{2, 1, 4}, {3, 1}}, {{1, 1}, {1}},
    };
    using F = std::function<double(double, double)>;
    const std::vector<std::tuple<const char*, std::function<Tensor(const Tensor&, const Tensor&)>, F>> ops = {
        {"add", gg::add, [](double a, double b) { return a + b; }},
        {"sub", gg::sub, [](double a, double b) { return a - b; }},
        {"mul", gg::mul, [](double a, double b) { return a * b; }},
        {"div", gg::div, [](double a, double b) { return a / b; }},
        {"maximum", gg::maximum, [](double a, double b) { return std::max(a, b); }},
        {"minimum", gg::minimum, [](double a, double b) { return std::min(a, b); }},
        {"gt", gg::gt, [](double a, double b) { return double(a > b); }},
        {"le", gg::le, [](double a, double b) { return double(a <= b); }},
    };
    for (const auto& [sa, sb] : cases) {
        const Tensor a = gg::randn(sa, gen, DType::f64), b = gg::rand(sb, gen, DType::f64) + 0.5;
        const Shape out_shape = gg::broadcast_shapes(sa, sb, "test");
        for (const auto& [name, op, f] : ops) {
            const std::string what = std::string(name) + " " + gg::shape_str(sa) + " with " + gg::shape_str(sb);
            INFO(what);  // a named string: doctest captures it in a lambda
            const Tensor out = op(a, b);
            CHECK(out.shape() == out_shape);
            CHECK(mismatch(out, broadcast_reference(a, b, out_shape, f), 1e-12) == "");
        }
    }
    // Strided (transposed) operands take the general path.
    const Tensor a = gg::randn({3, 4}, gen, DType::f64), b = gg::randn({4, 3}, gen, DType::f64);
    const Tensor bt = b.t();
    CHECK(mismatch(a + bt, broadcast_reference(a, bt, {3, 4}, [](double x, double y) { return x + y; })) == "");
    // Scalar operators, both sides.
    const Tensor v = gg::from_vector(std::vector<double>{1, 2, 4}, {3});
    CHECK(mismatch(v + 1.0, {2, 3, 5}) == "");
    CHECK(mismatch(1.0 - v, {0, -1, -3}) == "");
    CHECK(mismatch(v * 2.0, {2, 4, 8}) == "");
    CHECK(mismatch(8.0 / v, {8, 4, 2}) == "");
    CHECK(mismatch(v / 2.0, {0.5, 1, 2}) == "");
    CHECK(mismatch(-v, {-1, -2, -4}) == "");
    CHECK(mismatch(gg::eq(v, gg::scalar(2, DType::f64)), {0, 1, 0}) == "");
    CHECK(mismatch(gg::ne(v, gg::scalar(2, DType::f64)), {1, 0, 1}) == "");
    CHECK(mismatch(gg::lt(v, gg::scalar(2, DType::f64)), {1, 0, 0}) == "");
    CHECK(mismatch(gg::ge(v, gg::scalar(2, DType::f64)), {0, 1, 1}) == "");
    // Integer tensors add and compare too.
    CHECK(mismatch(gg::arange(3) + gg::arange(3), {0, 2, 4}) == "");
}

TEST_CASE("tensor: unary ops match the C library") {
    const std::vector<double> xs = {-2.5, -1, -0.25, 0.3, 1, 3};
    const Tensor x = gg::from_vector(xs, {2, 3});
    const Tensor pos = gg::abs(x) + 0.1;
    std::vector<double> exp_v, tanh_v, sig_v, relu_v, silu_v, gelu_v, erf_v, abs_v, log_v, sqrt_v, rsqrt_v, pow_v;
    for (double v : xs) {
        const double p = std::abs(v) + 0.1;
        exp_v.push_back(std::exp(v));
        tanh_v.push_back(std::tanh(v));
        sig_v.push_back(1 / (1 + std::exp(-v)));
        relu_v.push_back(v > 0 ? v : 0);
        silu_v.push_back(v / (1 + std::exp(-v)));
        gelu_v.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
        erf_v.push_back(std::erf(v));
        abs_v.push_back(std::abs(v));
        log_v.push_back(std::log(p));
        sqrt_v.push_back(std::sqrt(p));
        rsqrt_v.push_back(1 / std::sqrt(p));
        pow_v.push_back(std::pow(p, 1.5));
    }
    CHECK(mismatch(gg::exp(x), exp_v, 1e-12) == "");
    CHECK(mismatch(gg::tanh(x), tanh_v, 1e-12) == "");
    CHECK(mismatch(gg::sigmoid(x), sig_v, 1e-12) == "");
    CHECK(mismatch(gg::relu(x), relu_v, 1e-12) == "");
    CHECK(mismatch(gg::silu(x), silu_v, 1e-12) == "");
    CHECK(mismatch(gg::gelu(x), gelu_v, 1e-12) == "");
    CHECK(mismatch(gg::erf(x), erf_v, 1e-12) == "");
    CHECK(mismatch(gg::abs(x), abs_v, 1e-12) == "");
    CHECK(mismatch(gg::log(pos), log_v, 1e-12) == "");
    CHECK(mismatch(gg::sqrt(pos), sqrt_v, 1e-12) == "");
    CHECK(mismatch(gg::rsqrt(pos), rsqrt_v, 1e-12) == "");
    CHECK(mismatch(gg::pow(pos, 1.5), pow_v, 1e-12) == "");
    CHECK(mismatch(x.t().exp(), gg::exp(x).t().contiguous().to_vector<double>(), 1e-12) == "");  // strided input
    CHECK_THROWS_WITH_AS(gg::exp(gg::arange(3)), doctest::Contains("exp: needs a floating tensor, got (3) int64"),
                         std::invalid_argument);
}

TEST_CASE("tensor: where and masked_fill") {
    const Tensor cond = gg::from_vector(std::vector<int64_t>{1, 0, 0, 1}, {2, 2});
    const Tensor a = gg::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
    const Tensor b = gg::from_vector(std::vector<float>{-1, -2}, {2});  // broadcast over rows
    CHECK(mismatch(gg::where(cond, a, b), {1, -2, -1, 4}) == "");
    const Tensor row_cond = gg::from_vector(std::vector<int64_t>{0, 1}, {2});
    CHECK(mismatch(gg::where(row_cond, a, b), {-1, 2, -1, 4}) == "");
    CHECK(mismatch(gg::masked_fill(a, cond, -9), {-9, 2, 3, -9}) == "");
    const Tensor col_mask = gg::from_vector(std::vector<float>{0, 1}, {2, 1});
    CHECK(mismatch(gg::masked_fill(a, col_mask, 0.5), {1, 2, 0.5, 0.5}) == "");
}

// --- reductions ---

TEST_CASE("tensor: sum, mean, amax, amin over any dims, with and without keepdim") {
    gg::Generator gen(11);
    const Tensor x = gg::randn({2, 3, 4, 5}, gen, DType::f64);
    const std::vector<std::vector<int64_t>> dim_sets = {{0}, {1}, {3}, {-1}, {1, 2}, {0, 2}, {1, 3}, {0, 3}, {0, 1, 3},
                                                        {}, {0, 1, 2, 3}};
    for (const auto& dims : dim_sets) {
        std::set<int64_t> unique;
        for (int64_t d : dims) unique.insert(d < 0 ? d + 4 : d);
        if (dims.empty()) unique = {0, 1, 2, 3};
        Shape keep;
        const auto sums = reduce_reference(x, unique, 0, [](double a, double b) { return a + b; }, &keep);
        const auto maxes = reduce_reference(x, unique, -INFINITY, [](double a, double b) { return std::max(a, b); }, &keep);
        const auto mins = reduce_reference(x, unique, INFINITY, [](double a, double b) { return std::min(a, b); }, &keep);
        const double count = static_cast<double>(x.numel() / gg::shape_numel(keep));
        std::vector<double> means;
        for (double s : sums) means.push_back(s / count);
        Shape dropped;
        for (int64_t d = 0; d < 4; ++d)
            if (!unique.count(d)) dropped.push_back(x.size(d));
        for (bool keepdim : {false, true}) {
            INFO("dims of size " << dims.size() << (dims.empty() ? "" : " starting " + std::to_string(dims[0]))
                                 << " keepdim " << keepdim);
            const Shape expected_shape = keepdim ? keep : dropped;
            const Tensor s = gg::sum(x, dims, keepdim), m = gg::mean(x, dims, keepdim);
            const Tensor hi = gg::amax(x, dims, keepdim), lo = gg::amin(x, dims, keepdim);
            CHECK(s.shape() == expected_shape);
            CHECK(m.shape() == expected_shape);
            CHECK(hi.shape() == expected_shape);
            CHECK(lo.shape() == expected_shape);
            CHECK(mismatch(s, sums, 1e-12) == "");
            CHECK(mismatch(m, means, 1e-12) == "");
            CHECK(mismatch(hi, maxes, 0) == "");
            CHECK(mismatch(lo, mins, 0) == "");
        }
    }
    // A non-contiguous input, and the method forms.
    const Tensor xt = x.transpose(1, 3);  // (2, 5, 4, 3)
    Shape keep;
    const auto sums = reduce_reference(xt, {1, 3}, 0, [](double a, double b) { return a + b; }, &keep);
    CHECK(mismatch(xt.sum({1, 3}), sums, 1e-12) == "");
    CHECK(x.sum().dim() == 0);
    CHECK(x.mean({0}, true).shape() == Shape{1, 3, 4, 5});
    // Integer sums stay exact.
    CHECK(gg::sum(gg::arange(101)).item() == 5050);
    // Over a run of infinities, max and min are infinite, as in torch (not the largest finite value).
    const Tensor infs = gg::full({3}, -INFINITY, gg::DType::f64);
    CHECK(gg::amax(infs).item() == -INFINITY);
    CHECK(gg::amin(-infs).item() == INFINITY);
    CHECK_THROWS_WITH_AS(gg::sum(x, {4}), doctest::Contains("sum: dim 4 out of range for a tensor of 4 dims"),
                         std::out_of_range);
}

TEST_CASE("tensor: max along a dim gives values and first indices") {
    const Tensor x = gg::from_vector(std::vector<double>{1, 5, 5, 2, 7, 0, 7, 3}, {2, 4});
    auto [v1, i1] = gg::max(x, 1);
    CHECK(v1.shape() == Shape{2});
    CHECK(mismatch(v1, {5, 7}) == "");
    CHECK(i1.dtype() == DType::i64);
    CHECK(i1.to_vector<int64_t>() == std::vector<int64_t>{1, 0});  // ties: the first index
    auto [v0, i0] = gg::max(x, 0, true);
    CHECK(v0.shape() == Shape{1, 4});
    CHECK(mismatch(v0, {7, 5, 7, 3}) == "");
    CHECK(i0.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 1});
    auto [vn, in] = gg::max(x, -1, true);
    CHECK(vn.shape() == Shape{2, 1});
    CHECK(in.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
}

// --- nn ops ---

TEST_CASE("tensor: softmax and log_softmax along dim 0 and -1") {
    gg::Generator gen(5);
    const Tensor x = gg::randn({3, 4}, gen, DType::f64) * 3.0;
    const auto v = x.to_vector<double>();
    for (int64_t dim : {0, -1, 1}) {
        INFO("dim " << dim);
        std::vector<double> sm(12), lsm(12);
        const bool rows = dim != 0;
        for (int64_t outer = 0; outer < (rows ? 3 : 4); ++outer) {
            auto at = [&](int64_t k) { return rows ? outer * 4 + k : k * 4 + outer; };
            const int64_t n = rows ? 4 : 3;
            double z = 0;
            for (int64_t k = 0; k < n; ++k) z += std::exp(v[at(k)]);
            for (int64_t k = 0; k < n; ++k) sm[at(k)] = std::exp(v[at(k)]) / z, lsm[at(k)] = v[at(k)] - std::log(z);
        }
        CHECK(mismatch(gg::softmax(x, dim), sm, 1e-12) == "");
        CHECK(mismatch(gg::log_softmax(x, dim), lsm, 1e-12) == "");
    }
    // Large logits stay finite (the max is subtracted first).
    const Tensor big = gg::from_vector(std::vector<float>{1000, 1001, 1002}, {3});
    const auto p = gg::softmax(big).to_vector<double>();
    CHECK(p[2] == doctest::Approx(1 / (1 + std::exp(-1.0) + std::exp(-2.0))).epsilon(1e-5));
    CHECK(mismatch(gg::log_softmax(big), {-2.40760596, -1.40760596, -0.40760596}, 1e-5) == "");
}

TEST_CASE("tensor: matmul in every shape case, against a naive loop") {
    gg::Generator gen(9);
    auto vals = [](const Tensor& t) { return t.to_vector<double>(); };
    SUBCASE("1-d · 1-d is a scalar") {
        const Tensor a = gg::randn({5}, gen, DType::f64), b = gg::randn({5}, gen, DType::f64);
        const Tensor c = gg::matmul(a, b);
        CHECK(c.dim() == 0);
        CHECK(mismatch(c, naive_matmul(vals(a), vals(b), 1, 5, 1), 1e-12) == "");
    }
    SUBCASE("1-d @ 2-d and 2-d @ 1-d") {
        const Tensor v = gg::randn({3}, gen, DType::f64), m = gg::randn({3, 4}, gen, DType::f64);
        const Tensor vm = gg::matmul(v, m);
        CHECK(vm.shape() == Shape{4});
        CHECK(mismatch(vm, naive_matmul(vals(v), vals(m), 1, 3, 4), 1e-12) == "");
        const Tensor w = gg::randn({4}, gen, DType::f64);
        const Tensor mw = m.matmul(w);
        CHECK(mw.shape() == Shape{3});
        CHECK(mismatch(mw, naive_matmul(vals(m), vals(w), 3, 4, 1), 1e-12) == "");
    }
    SUBCASE("2-d @ 2-d with transposed views on either side") {
        const Tensor a = gg::randn({4, 3}, gen, DType::f64), b = gg::randn({5, 4}, gen, DType::f64);
        const Tensor at = a.t(), bt = b.t();  // (3, 4), (4, 5)
        const auto expected = naive_matmul(vals(at), vals(bt), 3, 4, 5);
        CHECK(mismatch(gg::matmul(at, bt), expected, 1e-12) == "");
        CHECK(mismatch(gg::matmul(at.contiguous(), bt), expected, 1e-12) == "");
        CHECK(mismatch(gg::matmul(at, bt.contiguous()), expected, 1e-12) == "");
        // A narrowed (strided rows) operand and a float32 pair.
        const Tensor big = gg::randn({3, 8}, gen, DType::f64);
        const Tensor cols = big.narrow(1, 2, 4);
        CHECK(mismatch(gg::matmul(cols, bt), naive_matmul(vals(cols), vals(bt), 3, 4, 5), 1e-12) == "");
        CHECK(mismatch(gg::matmul(at.to(DType::f32), bt.to(DType::f32)), expected, 1e-5) == "");
    }
    SUBCASE("batched, with broadcast batch dims") {
        const Tensor a = gg::randn({2, 1, 3, 4}, gen, DType::f64), b = gg::randn({3, 4, 2}, gen, DType::f64);
        const Tensor c = gg::matmul(a, b);
        REQUIRE(c.shape() == Shape{2, 3, 3, 2});
        std::vector<double> expected;
        for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 3; ++j) {
                const auto block = naive_matmul(vals(a.select(0, i).select(0, 0)), vals(b.select(0, j)), 3, 4, 2);
                expected.insert(expected.end(), block.begin(), block.end());
            }
        CHECK(mismatch(c, expected, 1e-12) == "");
        // Batched @ shared 2-d weight, and a 2-d matrix against a batch.
        const Tensor x = gg::randn({2, 3, 4}, gen, DType::f64), w = gg::randn({4, 5}, gen, DType::f64);
        std::vector<double> xw;
        for (int64_t i = 0; i < 2; ++i) {
            const auto block = naive_matmul(vals(x.select(0, i)), vals(w), 3, 4, 5);
            xw.insert(xw.end(), block.begin(), block.end());
        }
        CHECK(mismatch(gg::matmul(x, w), xw, 1e-12) == "");
        CHECK(mismatch(gg::matmul(x, w.t().contiguous().t()), xw, 1e-12) == "");  // transposed weight
        const Tensor m = gg::randn({5, 3}, gen, DType::f64);
        std::vector<double> mx;
        for (int64_t i = 0; i < 2; ++i) {
            const auto block = naive_matmul(vals(m), vals(x.select(0, i)), 5, 3, 4);
            mx.insert(mx.end(), block.begin(), block.end());
        }
        CHECK(mismatch(gg::matmul(m, x), mx, 1e-12) == "");
        // Batched transposed operands: y (2, 4, 3) and x (2, 3, 4), each transposed per batch.
        const Tensor y = gg::randn({2, 4, 3}, gen, DType::f64);
        const Tensor lhs = y.transpose(1, 2), rhs = x.transpose(1, 2);  // (2, 3, 4), (2, 4, 3)
        std::vector<double> yx;
        for (int64_t i = 0; i < 2; ++i) {
            const auto block = naive_matmul(vals(lhs.select(0, i)), vals(rhs.select(0, i)), 3, 4, 3);
            yx.insert(yx.end(), block.begin(), block.end());
        }
        CHECK(mismatch(gg::matmul(lhs, rhs), yx, 1e-12) == "");
        const Tensor perm = gg::randn({3, 2, 4}, gen, DType::f64).permute({1, 0, 2});  // batch stride not outermost
        std::vector<double> pw;
        for (int64_t i = 0; i < 2; ++i) {
            const auto block = naive_matmul(vals(perm.select(0, i)), vals(w), 3, 4, 5);
            pw.insert(pw.end(), block.begin(), block.end());
        }
        CHECK(mismatch(gg::matmul(perm, w), pw, 1e-12) == "");
        // 1-d against a batch.
        const Tensor v = gg::randn({4}, gen, DType::f64);
        const Tensor xv = gg::matmul(x, v);
        CHECK(xv.shape() == Shape{2, 3});
        const Tensor vy = gg::matmul(v, y);
        CHECK(vy.shape() == Shape{2, 3});
        std::vector<double> expected_vy;
        for (int64_t i = 0; i < 2; ++i) {
            const auto block = naive_matmul(vals(v), vals(y.select(0, i)), 1, 4, 3);
            expected_vy.insert(expected_vy.end(), block.begin(), block.end());
        }
        CHECK(mismatch(vy, expected_vy, 1e-12) == "");
    }
}

TEST_CASE("tensor: cat, stack, split and chunk") {
    const Tensor a = gg::arange(0, 6, 1, DType::f32).view({2, 3});
    const Tensor b = gg::arange(10, 14, 1, DType::f32).view({2, 2});
    const Tensor c1 = gg::cat({a, b}, 1);
    CHECK(c1.shape() == Shape{2, 5});
    CHECK(mismatch(c1, {0, 1, 2, 10, 11, 3, 4, 5, 12, 13}) == "");
    const Tensor c0 = gg::cat({a, a.narrow(0, 1, 1)}, 0);
    CHECK(mismatch(c0, {0, 1, 2, 3, 4, 5, 3, 4, 5}) == "");
    CHECK(mismatch(gg::cat({b.t(), a.narrow(1, 0, 2)}, -1), {10, 12, 0, 1, 11, 13, 3, 4}) == "");  // strided inputs
    CHECK_THROWS_WITH_AS(gg::cat({a, b}, 0), doctest::Contains("cat: cannot join (2,3) float32 and (2,2) float32 along dim 0"),
                         std::invalid_argument);

    const Tensor s0 = gg::stack({a, a * 2.0}, 0);
    CHECK(s0.shape() == Shape{2, 2, 3});
    CHECK(mismatch(s0, {0, 1, 2, 3, 4, 5, 0, 2, 4, 6, 8, 10}) == "");
    const Tensor s_last = gg::stack({a, a * 2.0}, -1);
    CHECK(s_last.shape() == Shape{2, 3, 2});
    CHECK(mismatch(s_last, {0, 0, 1, 2, 2, 4, 3, 6, 4, 8, 5, 10}) == "");

    const Tensor x = gg::arange(0, 7, 1, DType::f64);
    const auto parts = gg::split(x, 3);
    REQUIRE(parts.size() == 3);
    CHECK(mismatch(parts[0], {0, 1, 2}) == "");
    CHECK(mismatch(parts[1], {3, 4, 5}) == "");
    CHECK(mismatch(parts[2], {6}) == "");
    CHECK(parts[1].shares_storage(x));
    const auto chunks = gg::chunk(a, 3, 1);
    REQUIRE(chunks.size() == 3);
    CHECK(mismatch(chunks[2], {2, 5}) == "");
    const auto uneven = gg::chunk(x, 3);  // 7 → 3 + 3 + 1, as torch.chunk
    REQUIRE(uneven.size() == 3);
    CHECK(uneven[2].numel() == 1);
    CHECK_THROWS_WITH_AS(gg::split(x, 0), doctest::Contains("split: size 0 must be positive"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::split(x, {3, 3}), doctest::Contains("split: sizes (3,3) do not add up to dim 0 of (7)"),
                         std::invalid_argument);
    CHECK_THROWS_AS(gg::split(x, {8, -1}), std::invalid_argument);
}

TEST_CASE("tensor: split's pieces write their gradients into one, again on every backward pass") {
    Tensor x = gg::arange(0, 12, 1, DType::f64).view({2, 6});
    x.requires_grad_();
    const auto parts = gg::split(x, {1, 3, 2}, -1);  // slices of each row: strided
    // parts[2] gets no gradient: its slice of x's gradient is 0, not what the buffer held before.
    const Tensor loss = gg::sum(parts[0] * 5.0) + gg::sum(parts[1] * parts[1]);
    loss.backward(Tensor(), true);
    CHECK(mismatch(x.grad(), {5, 2, 4, 6, 0, 0, 5, 14, 16, 18, 0, 0}) == "");
    loss.backward();  // the retained graph once more: the gradients add up on the leaf
    CHECK(mismatch(x.grad(), {10, 4, 8, 12, 0, 0, 10, 28, 32, 36, 0, 0}) == "");
}

TEST_CASE("tensor: view splits or merges dims that lie contiguously, also in a slice of a wider tensor") {
    // The heads of a projection (B, T, H·dk) that is a slice of a (B, T, N) product.
    const Tensor wide = gg::arange(0, 2 * 3 * 10, 1, DType::f64).view({2, 3, 10});
    const Tensor slice = wide.narrow(2, 2, 6);      // (2, 3, 6): strides (30, 10, 1)
    const Tensor heads = slice.view({2, 3, 2, 3});  // H = 2, dk = 3
    CHECK(heads.shares_storage(wide));
    CHECK(heads.strides() == gg::Strides{30, 10, 3, 1});
    CHECK(mismatch(heads, slice.contiguous().to_vector<double>()) == "");
    CHECK(mismatch(slice.view({2, 3, 6, 1}).squeeze(-1), slice.contiguous().to_vector<double>()) == "");
    // Rows 10 apart hold only 6 values each: (3, 6) cannot become 18 values of one stride.
    CHECK_THROWS_WITH_AS(slice.view({2, 18}), doctest::Contains("view: tensor of shape (2,3,6) is not contiguous"),
                         std::invalid_argument);
}

TEST_CASE("tensor: repeat_interleave, tril and triu") {
    const Tensor a = gg::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {2, 2});
    CHECK(mismatch(gg::repeat_interleave(a, 2, 0), {1, 2, 1, 2, 3, 4, 3, 4}) == "");
    CHECK(mismatch(gg::repeat_interleave(a, 3, -1), {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}) == "");
    CHECK(gg::repeat_interleave(a, 3, 1).shape() == Shape{2, 6});

    const Tensor m = gg::arange(1, 13, 1, DType::f32).view({3, 4});
    CHECK(mismatch(gg::tril(m), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}) == "");
    CHECK(mismatch(gg::tril(m, -1), {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}) == "");
    CHECK(mismatch(gg::triu(m), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}) == "");
    CHECK(mismatch(gg::triu(m, 1), {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}) == "");
    // The last two dims of a batch.
    const Tensor batch = gg::ones({2, 2, 2});
    CHECK(mismatch(gg::tril(batch), {1, 0, 1, 1, 1, 0, 1, 1}) == "");
    CHECK_THROWS_WITH_AS(gg::tril(gg::ones({3})), doctest::Contains("tril: needs ≥ 2 dims, got (3)"),
                         std::invalid_argument);
}

TEST_CASE("tensor: topk and gather") {
    const Tensor x = gg::from_vector(std::vector<double>{3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
    auto [v, i] = gg::topk(x, 2);
    CHECK(v.shape() == Shape{2, 2});
    CHECK(mismatch(v, {4, 3, 9, 6}) == "");
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{2, 0, 1, 3});
    auto [v0, i0] = gg::topk(x, 1, 0);
    CHECK(mismatch(v0, {5, 9, 4, 6}) == "");
    CHECK(i0.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0, 1});
    auto [vt, it] = gg::topk(gg::from_vector(std::vector<double>{1, 2, 2, 0}, {4}), 3);
    CHECK(it.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});  // ties keep index order
    CHECK_THROWS_WITH_AS(gg::topk(x, 5), doctest::Contains("topk: k=5 but dim 1 of shape (2,4) has 4"),
                         std::invalid_argument);

    const Tensor idx = gg::from_vector(std::vector<int64_t>{3, 0, 0, 1, 1, 1}, {2, 3});
    CHECK(mismatch(gg::gather(x, 1, idx), {1, 3, 3, 9, 9, 9}) == "");
    const Tensor idx0 = gg::from_vector(std::vector<int64_t>{1, 0, 1, 0}, {1, 4});
    CHECK(mismatch(gg::gather(x, 0, idx0), {5, 1, 2, 1}) == "");
    CHECK_THROWS_WITH_AS(gg::gather(x, 1, gg::from_vector(std::vector<int64_t>{0, 4}, {2, 1})),
                         doctest::Contains("gather: index 4"), std::out_of_range);
}

TEST_CASE("tensor: embedding looks up rows") {
    const Tensor w = gg::arange(0, 12, 1, DType::f32).view({4, 3});
    const Tensor ids = gg::from_vector(std::vector<int64_t>{2, 0, 2, 3}, {2, 2});
    const Tensor e = gg::embedding(w, ids);
    CHECK(e.shape() == Shape{2, 2, 3});
    CHECK(mismatch(e, {6, 7, 8, 0, 1, 2, 6, 7, 8, 9, 10, 11}) == "");
    CHECK(mismatch(gg::embedding(w, ids.t()), {6, 7, 8, 6, 7, 8, 0, 1, 2, 9, 10, 11}) == "");  // strided ids
    CHECK_THROWS_WITH_AS(gg::embedding(w, gg::from_vector(std::vector<int64_t>{1, 4}, {2})),
                         doctest::Contains("embedding: index 4 at position 1 is out of range [0, 4)"),
                         std::out_of_range);
    CHECK_THROWS_WITH_AS(gg::embedding(w, gg::from_vector(std::vector<int64_t>{-1}, {1})),
                         doctest::Contains("embedding: index -1"), std::out_of_range);
    CHECK_THROWS_WITH_AS(gg::embedding(w, gg::ones({2})), doctest::Contains("need a 2-d weight and int64 ids"),
                         std::invalid_argument);
}

TEST_CASE("tensor: cross_entropy is the mean negative log-likelihood over non-ignored rows") {
    const std::vector<double> logits_v = {1, 2, 3, 0, 0, 0, -1, 4, 0.5};
    const Tensor logits = gg::from_vector(logits_v, {3, 3});
    auto nll = [&](int row, int target) {
        double z = 0;
        for (int c = 0; c < 3; ++c) z += std::exp(logits_v[row * 3 + c]);
        return std::log(z) - logits_v[row * 3 + target];
    };
    const Tensor t = gg::from_vector(std::vector<int64_t>{2, 0, 1}, {3});
    CHECK(gg::cross_entropy(logits, t).item() == doctest::Approx((nll(0, 2) + nll(1, 0) + nll(2, 1)) / 3));
    const Tensor t_ignored = gg::from_vector(std::vector<int64_t>{2, -100, 1}, {3});
    CHECK(gg::cross_entropy(logits, t_ignored).item() == doctest::Approx((nll(0, 2) + nll(2, 1)) / 2));
    const Tensor t_custom = gg::from_vector(std::vector<int64_t>{2, 0, 0}, {3});
    CHECK(gg::cross_entropy(logits, t_custom, 0).item() == doctest::Approx(nll(0, 2)));
    // Leading dims: logits (1, 3, 3) with targets (1, 3).
    CHECK(gg::cross_entropy(logits.unsqueeze(0), t.unsqueeze(0)).item() ==
          doctest::Approx((nll(0, 2) + nll(1, 0) + nll(2, 1)) / 3));
    CHECK_THROWS_WITH_AS(gg::cross_entropy(logits, gg::from_vector(std::vector<int64_t>{2, 3, 0}, {3})),
                         doctest::Contains("cross_entropy: index 3 at position 1 is out of range [0, 3)"),
                         std::out_of_range);
    CHECK_THROWS_WITH_AS(gg::cross_entropy(logits, gg::from_vector(std::vector<int64_t>{-5, 0, 0}, {3})),
                         doctest::Contains("cross_entropy: index -5"), std::out_of_range);
    CHECK_THROWS_WITH_AS(gg::cross_entropy(logits, gg::from_vector(std::vector<int64_t>{1, 2}, {2})),
                         doctest::Contains("cross_entropy: logits (3,3) float64 and targets (2) int64"),
                         std::invalid_argument);
}

TEST_CASE("tensor: dropout keeps or zeroes and rescales") {
    gg::Generator gen(1);
    const Tensor x = gg::ones({10000});
    const Tensor y = gg::dropout(x, 0.25, true, gen);
    const auto v = y.to_vector<double>();
    int64_t kept = 0;
    for (double e : v) {
        CHECK((e == 0 || std::abs(e - 1 / 0.75) < 1e-6));
        kept += e != 0;
    }
    CHECK(std::abs(kept / 10000.0 - 0.75) < 0.02);
    CHECK(gg::dropout(x, 0.25, false, gen).shares_storage(x));  // evaluation: the input itself
    CHECK(gg::sum(gg::dropout(x, 1.0, true, gen)).item() == 0);
    CHECK_THROWS_WITH_AS(gg::dropout(x, 1.5, true, gen), doctest::Contains("dropout: probability"),
                         std::invalid_argument);
}

// --- conversions, printing, errors ---

TEST_CASE("tensor: to(DType) converts values") {
    const Tensor f = gg::from_vector(std::vector<float>{1.7f, -1.7f, 2.5f}, {3});
    const Tensor i = f.to(DType::i64);
    CHECK(i.dtype() == DType::i64);
    CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, -1, 2});  // truncation, as a C cast
    const Tensor d = f.to(DType::f64);
    CHECK(d.dtype() == DType::f64);
    CHECK(d.to_vector<double>()[0] == static_cast<double>(1.7f));
    CHECK(mismatch(gg::arange(3).to(DType::f32), {0, 1, 2}) == "");
    CHECK(f.to(DType::f32).shares_storage(f));  // same dtype: the tensor itself
    const Tensor ft = gg::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).t();  // strided source
    CHECK(mismatch(ft.to(DType::f32), {1, 4, 2, 5, 3, 6}) == "");
    CHECK(f.to(gg::Device::CPU).shares_storage(f));
}

TEST_CASE("tensor: printing shows values, shape and dtype, and elides big tensors") {
    const std::string small = printed(gg::from_vector(std::vector<int64_t>{1, 2, 3, 4}, {2, 2}));
    CHECK(small.find("[[1, 2],") != std::string::npos);
    CHECK(small.find("[3, 4]]") != std::string::npos);
    CHECK(small.find("shape=(2,2)") != std::string::npos);
    CHECK(small.find("dtype=int64") != std::string::npos);
    CHECK(small.find("...") == std::string::npos);
    const std::string f = printed(gg::full({3}, 0.5));
    CHECK(f.find("0.5000") != std::string::npos);
    CHECK(f.find("dtype=float32") != std::string::npos);
    const std::string s = printed(gg::scalar(2, DType::f64));
    CHECK(s.find("shape=()") != std::string::npos);
    CHECK(s.find("float64") != std::string::npos);
    const std::string big = printed(gg::arange(2000).view({40, 50}));
    CHECK(big.find("...") != std::string::npos);
    CHECK(big.find("shape=(40,50)") != std::string::npos);
    CHECK(big.find("[0, 1, 2, ..., 47, 48, 49]") != std::string::npos);
    CHECK(big.find("1999]]") != std::string::npos);
    CHECK(big.find(" 25,") == std::string::npos);  // the middle is left out
    CHECK(big.size() < 1000);
    CHECK(printed(gg::ones({2}).requires_grad_()).find("requires_grad=true") != std::string::npos);
    CHECK(printed(Tensor()) == "tensor(undefined)");
}

TEST_CASE("tensor: errors name the op and the shapes") {
    const Tensor a = gg::ones({2, 3}), b = gg::ones({4, 5});
    CHECK_THROWS_WITH_AS(gg::add(a, b), doctest::Contains("add: shapes (2,3) and (4,5) do not broadcast"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(a * gg::ones({2}), doctest::Contains("mul: shapes (2,3) and (2) do not broadcast"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::matmul(a, b), doctest::Contains("matmul: (2,3) @ (4,5): inner dims 3 and 4 differ"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::matmul(gg::ones({3}), gg::ones({4})),
                         doctest::Contains("matmul: (3) @ (4): inner dims 3 and 4 differ"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::matmul(gg::ones({2, 2, 3}), gg::ones({4})),
                         doctest::Contains("matmul: (2,2,3) @ (4): inner dims 3 and 4 differ"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::matmul(gg::ones({2, 2, 3}), gg::ones({3, 3, 2})),
                         doctest::Contains("matmul: shapes (2) and (3) do not broadcast"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::matmul(gg::scalar(1), a), doctest::Contains("scalars cannot be multiplied"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::add(a, gg::ones({2, 3}, DType::f64)),
                         doctest::Contains("add: dtype mismatch, (2,3) float32 vs (2,3) float64"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::matmul(a, gg::ones({3, 2}, DType::f64)),
                         doctest::Contains("matmul: (2,3) @ (3,2): dtype mismatch, float32 vs float64"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::where(gg::ones({2}), gg::ones({2}), gg::ones({2}, DType::f64)),
                         doctest::Contains("where: dtype mismatch"), std::invalid_argument);
    // Without a CUDA device (or the emulator), making a CUDA tensor says so and how to get one.
    if (!gg::device_available(gg::Device::CUDA)) {
        CHECK_THROWS_WITH_AS(Tensor::empty({2}, DType::f32, gg::Device::CUDA), doctest::Contains("no CUDA"),
                             std::runtime_error);
        CHECK_THROWS_WITH_AS(gg::ones({2}).to(gg::Device::CUDA), doctest::Contains("GATEDGRAD_CUDA=emulator"),
                             std::runtime_error);
    }
    CHECK_THROWS_WITH_AS(a.narrow(1, 2, 2), doctest::Contains("narrow: [2, 4) is outside dim 1 of shape (2,3)"),
                         std::out_of_range);
    CHECK_THROWS_WITH_AS(a.narrow(0, -1, 1), doctest::Contains("narrow:"), std::out_of_range);
    CHECK_THROWS_WITH_AS(a.narrow(2, 0, 1), doctest::Contains("narrow: dim 2 out of range for a tensor of 2 dims"),
                         std::out_of_range);
    CHECK_THROWS_WITH_AS(a.select(0, 2), doctest::Contains("select: index 2 is outside dim 0 of shape (2,3)"),
                         std::out_of_range);
    CHECK_THROWS_WITH_AS(a.select(1, -4), doctest::Contains("select: index -4 is outside dim 1 of shape (2,3)"),
                         std::out_of_range);
    CHECK_THROWS_WITH_AS(a.permute({0}), doctest::Contains("permute: 1 dims given for a tensor of shape (2,3)"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(a.permute({1, 1}), doctest::Contains("permute: dim 1 repeats"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(a.permute({0, 2}), doctest::Contains("permute: dim 2 out of range"), std::out_of_range);
    CHECK_THROWS_WITH_AS(a.transpose(0, -3), doctest::Contains("transpose: dim -3 out of range"), std::out_of_range);
    CHECK_THROWS_WITH_AS(gg::ones({2, 2}).item(), doctest::Contains("item: tensor of shape (2,2) has 4 elements"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(gg::add(Tensor(), a), doctest::Contains("add: undefined tensor"), std::invalid_argument);
}

TEST_CASE("tensor: integer tensors refuse silent truncation, data<T> checks its dtype, small values print") {
    using namespace gg;
    const Tensor i = arange(4);  // int64
    CHECK_THROWS_WITH_AS(i * 0.5, doctest::Contains("int64 tensor of shape (4)"), std::invalid_argument);
    CHECK((i * 2.0).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 6});
    CHECK_THROWS_WITH_AS(i / 2.0, doctest::Contains("div: needs a floating tensor"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(mean(i), doctest::Contains("mean: needs a floating tensor"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(ones({2}).data<double>(), doctest::Contains("float32, not float64"), std::logic_error);
    std::ostringstream small, fixed;
    small << scalar(1e-7, DType::f64);
    CHECK(small.str().find("1.0000e-07") != std::string::npos);
    fixed << from_vector(std::vector<float>{0.5f, 2.0f}, {2});
    CHECK(fixed.str().find("0.5000") != std::string::npos);
}

TEST_CASE("tensor: a shape whose size overflows is an error, never a small allocation (issue: shape_numel)") {
    using namespace gg;
    const int64_t big = int64_t(1) << 62;
    // (257, 2^62) wrapped to a few bytes, and randn then wrote past them.
    CHECK_THROWS_WITH_AS(randn({257, big}), doctest::Contains("(257,4611686018427387904)"), std::length_error);
    CHECK_THROWS_AS(zeros({big, 4}), std::length_error);            // 2^64 elements: was silently 0
    CHECK_THROWS_AS(zeros({big / 2, 4}), std::length_error);        // 2^63 elements
    CHECK_THROWS_WITH_AS(zeros({big / 4}, DType::f64), doctest::Contains("2^63 bytes"), std::length_error);
    CHECK_THROWS_AS(zeros({0, big, 4}), std::length_error);         // no elements, but strides past int64
    CHECK(zeros({0, int64_t(1) << 40}).numel() == 0);
    CHECK_THROWS_WITH_AS(zeros({2, -3}), doctest::Contains("negative"), std::invalid_argument);
    CHECK_THROWS_AS(shape_numel({3, -1}), std::invalid_argument);
    CHECK_THROWS_AS(ones({1, 1}).expand({big, 4}), std::invalid_argument);
    CHECK_THROWS_AS(repeat_interleave(ones({4}), big, 0), std::length_error);
    CHECK_THROWS_AS(arange(0, 1e300), std::invalid_argument);
    CHECK_THROWS_AS(arange(0, NAN), std::invalid_argument);
    CHECK_THROWS_WITH_AS(ones({3}).narrow(0, big, big), doctest::Contains("overflows int64"), std::out_of_range);
    // infer_shape: the known sizes multiply past int64 before they could match.
    CHECK_THROWS_WITH_AS(ones({4}).view({big, 4, -1}), doctest::Contains("past int64"), std::invalid_argument);
}

TEST_CASE("tensor: a tensor too big for memory is a one-line error naming its bytes") {
    // 2^47 bytes: no machine here has them, so the allocation fails cleanly.
    CHECK_THROWS_WITH_AS(gg::zeros({int64_t(1) << 45}), doctest::Contains("out of memory allocating 140737488355328 bytes"),
                         std::runtime_error);
}

namespace {
// The VmFlags of the mapping of this process that holds address p ("" when none holds it):
// /proc/self/smaps lists each mapping as "start-end perms …", then its fields.
std::string mapping_flags(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(p);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        uintptr_t start = 0, end = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2)
            inside = start <= at && at < end;
        else if (inside && line.rfind("VmFlags:", 0) == 0)
            return line;
    }
    return "";
}
}  // namespace

TEST_CASE("tensor: CPU blocks of 8 MiB and more are mappings of their own, 2 MiB aligned, advised for huge pages") {
    // cpu/host_memory.h: a fresh 4 KiB page costs microseconds to fault in; 2 MiB pages take
    // 512 times fewer faults. The advice sets the mapping's "hg" flag wherever the kernel has
    // transparent huge pages, whatever their mode. Through the backend table, as tensors get them.
    const gg::Backend& cpu = gg::backend(gg::Device::CPU);
    for (const size_t bytes : {size_t(4096), size_t(4) << 20}) {  // malloc's, 64-byte aligned, no advice
        void* small = cpu.allocate(bytes);
        CHECK(reinterpret_cast<uintptr_t>(small) % 64 == 0);
        CHECK(mapping_flags(small).find(" hg") == std::string::npos);
        cpu.deallocate(small, bytes);
    }
    if (!gg::kHostMappings) return;  // AddressSanitizer's build: malloc's blocks at their own sizes
    for (const size_t bytes : {gg::kHugeBlock, gg::kHugeBlock + (size_t(3) << 20) + 64}) {
        void* p = cpu.allocate(bytes);
        CHECK(reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20) == 0);
        static_cast<char*>(p)[bytes - 1] = 1;  // the whole block is there
        if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage")) {
            const std::string flags = mapping_flags(p);
            INFO(bytes, " bytes: ", flags);
            CHECK(flags.find(" hg") != std::string::npos);
        }
        cpu.deallocate(p, bytes);
    }
    // A freed mapping goes back to the system whole.
    void* p = gg::host_allocate(gg::kHugeBlock);
    REQUIRE(p != nullptr);
    CHECK(!mapping_flags(p).empty());
    gg::host_free(p);
    CHECK(mapping_flags(p).empty());
}

TEST_CASE("tensor: view, reductions, from_vector and matmul at the edges, as torch") {
    using namespace gg;
    const Tensor x = arange(12, DType::f32);
    CHECK_THROWS_WITH_AS(x.view({-1, -1}), doctest::Contains("only one size can be -1"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(x.view({-2, -6}), doctest::Contains("size -2 is negative"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(x.view({-1, 0}), doctest::Contains("no size for the -1 fits"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(x.view({5, -1}), doctest::Contains("no size for the -1 fits"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(x.view({5, 2}), doctest::Contains("element counts differ"), std::invalid_argument);
    CHECK(x.view({-1, 4}).shape() == Shape{3, 4});
    CHECK(zeros({0, 3}).view({3, 0}).shape() == Shape{3, 0});

    // A repeated dim is an error (torch: "appears multiple times"), however it is spelled.
    const Tensor m = x.view({3, 4});
    CHECK_THROWS_WITH_AS(sum(m, {1, 1}), doctest::Contains("sum: dim 1 appears more than once"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(sum(m, {1, -1}), doctest::Contains("appears more than once"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(mean(m, {0, 0}), doctest::Contains("mean: dim 0"), std::invalid_argument);
    CHECK_THROWS_AS(amax(m, {0, -2}), std::invalid_argument);

    // Empty tensors from host values, and back.
    const Tensor e = from_vector(std::vector<float>{}, {0});
    CHECK(e.numel() == 0);
    CHECK(e.to_vector<float>().empty());
    CHECK(from_vector(std::vector<int64_t>{}, {2, 0}).clone().shape() == Shape{2, 0});

    // An empty inner dim is an empty sum: zeros of the right shape, with gradients of the right shapes.
    const Tensor a = zeros({2, 0}, DType::f64).requires_grad_(), b = zeros({0, 4}, DType::f64).requires_grad_();
    const Tensor y = matmul(a, b);
    CHECK(y.shape() == Shape{2, 4});
    CHECK(testing::mismatch(y, std::vector<double>(8, 0.0)) == "");
    y.sum().backward();
    CHECK(a.grad().shape() == Shape{2, 0});
    CHECK(b.grad().shape() == Shape{0, 4});
    CHECK(matmul(zeros({3, 2, 0}), zeros({0, 4})).shape() == Shape{3, 2, 4});
    CHECK(matmul(ones({2, 3}), ones({3, 0})).shape() == Shape{2, 0});
    CHECK(matmul(ones({0, 3}), ones({3, 5})).shape() == Shape{0, 5});
    CHECK(matmul(zeros({0}), zeros({0})).item() == 0);
    const Tensor w = zeros({0, 4}).requires_grad_();
    matmul(zeros({3, 2, 0}).requires_grad_(), w).sum().backward();  // the shared-weight backward path
    CHECK(w.grad().shape() == Shape{0, 4});
}

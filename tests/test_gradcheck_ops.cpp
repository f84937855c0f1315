// test_gradcheck_ops.cpp — every differentiable op's backward against central finite
// differences in float64 (autograd/gradcheck.h), and gradcheck itself against a backward
// that is known to be wrong.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "tests/check.h"

using gg::DType;
using gg::Shape;
using gg::Tensor;
using Inputs = std::vector<Tensor>;
using gg::testing::on_test_device;

namespace {

// A float64 leaf that requires grad, from its values.
Tensor leaf(Tensor values) {
    Tensor t = on_test_device(values).detach();
    t.requires_grad_();
    return t;
}
Tensor normal(const Shape& shape, gg::Generator& gen) { return leaf(gg::randn(shape, gen, DType::f64)); }
// In [0.5, 2): where log, sqrt, rsqrt, pow and division are smooth.
Tensor positive(const Shape& shape, gg::Generator& gen) { return leaf(gg::rand(shape, gen, DType::f64) * 1.5 + 0.5); }
// |x| ≥ 0.1: away from the kinks of relu and abs.
Tensor away_from_zero(const Shape& shape, gg::Generator& gen) {
    const Tensor x = gg::randn(shape, gen, DType::f64);
    return leaf(x + (gg::gt(x, gg::zeros_like(x)) - gg::le(x, gg::zeros_like(x))) * 0.1);
}

void check_gradient(const std::string& what, const gg::GradcheckFn& f, const Inputs& inputs,
                    const gg::GradcheckOptions& options = {}) {
    const gg::GradcheckResult r = gg::gradcheck(f, inputs, options);
    INFO(what << ": " << r.message);
    CHECK(r.ok);
}

}  // namespace

TEST_CASE("gradcheck: binary element-wise ops, with broadcasting") {
    gg::Generator gen(1);
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{}, {2, 2}}, {{4, 1, 3}, {2, 1}}, {{3}, {2, 1, 1}},
    };
    for (const auto& [sa, sb] : shapes) {
        const std::string pair = gg::shape_str(sa) + " with " + gg::shape_str(sb);
        const Tensor a = normal(sa, gen), b = normal(sb, gen), pb = positive(sb, gen);
        check_gradient("add " + pair, [](const Inputs& x) { return gg::add(x[0], x[1]); }, {a, b});
        check_gradient("sub " + pair, [](const Inputs& x) { return gg::sub(x[0], x[1]); }, {a, b});
        check_gradient("mul " + pair, [](const Inputs& x) { return gg::mul(x[0], x[1]); }, {a, b});
        check_gradient("div " + pair, [](const Inputs& x) { return gg::div(x[0], x[1]); }, {a, pb});
        check_gradient("maximum " + pair, [](const Inputs& x) { return gg::maximum(x[0], x[1]); }, {a, b});
        check_gradient("minimum " + pair, [](const Inputs& x) { return gg::minimum(x[0], x[1]); }, {a, b});
    }
    // The operator forms, scalars on either side, and one operand without grad.
    const Tensor a = normal({2, 3}, gen), p = positive({2, 3}, gen);
    check_gradient("operators", [](const Inputs& x) { return (x[0] + 1.0) * 3.0 - x[1] / 2.0 + 2.0 / x[1] - (-x[0]); },
                   {a, p});
    check_gradient("1 − a", [](const Inputs& x) { return 1.0 - x[0] * x[0]; }, {a});
    check_gradient("a · constant", [](const Inputs& x) { return x[0] * x[1]; },
                   {a, on_test_device(gg::randn({3}, gen, DType::f64))});
}

TEST_CASE("gradcheck: unary element-wise ops") {
    gg::Generator gen(2);
    const Tensor x = normal({3, 4}, gen), p = positive({3, 4}, gen), nz = away_from_zero({3, 4}, gen);
    check_gradient("neg", [](const Inputs& in) { return gg::neg(in[0]); }, {x});
    check_gradient("exp", [](const Inputs& in) { return gg::exp(in[0]); }, {x});
    check_gradient("log", [](const Inputs& in) { return gg::log(in[0]); }, {p});
    check_gradient("sqrt", [](const Inputs& in) { return gg::sqrt(in[0]); }, {p});
    check_gradient("rsqrt", [](const Inputs& in) { return gg::rsqrt(in[0]); }, {p});
    for (double e : {2.0, 0.5, -1.0, 3.0, 1.5, -0.5})
        check_gradient("pow " + std::to_string(e), [e](const Inputs& in) { return gg::pow(in[0], e); }, {p});
    check_gradient("pow 2 on any sign", [](const Inputs& in) { return gg::pow(in[0], 2); }, {x});
    check_gradient("tanh", [](const Inputs& in) { return gg::tanh(in[0]); }, {x});
    check_gradient("sigmoid", [](const Inputs& in) { return gg::sigmoid(in[0]); }, {x});
    check_gradient("relu", [](const Inputs& in) { return gg::relu(in[0]); }, {nz});
    check_gradient("silu", [](const Inputs& in) { return gg::silu(in[0]); }, {x});
    check_gradient("gelu", [](const Inputs& in) { return gg::gelu(in[0]); }, {x});
    check_gradient("erf", [](const Inputs& in) { return gg::erf(in[0]); }, {x});
    check_gradient("abs", [](const Inputs& in) { return gg::abs(in[0]); }, {nz});
    // softplus on any sign, 0 itself among the points (where its composed forward has kinks).
    const Tensor around_zero = leaf(gg::cat({gg::randn({6}, gen, DType::f64), gg::zeros({2}, DType::f64)}));
    check_gradient("softplus", [](const Inputs& in) { return gg::softplus(in[0]); }, {around_zero});
    // A strided input to a unary op.
    check_gradient("exp of a transpose", [](const Inputs& in) { return gg::exp(in[0].t()); }, {x});
    // The method forms.
    check_gradient("methods", [](const Inputs& in) {
        return in[0].exp().log().sqrt().pow(3).sigmoid().tanh() + in[0].relu();
    }, {p});
}

TEST_CASE("softplus: log(1 + eˣ) without overflow, and σ(x) as its gradient at the extremes") {
    const std::vector<double> xs = {-800, -40, -1, 0, 1e-3, 2.5, 40, 800};
    const Tensor x = leaf(gg::from_vector(xs, {8}));
    const Tensor y = gg::softplus(x);
    y.backward(gg::ones_like(y));
    std::vector<double> value, slope;
    for (double v : xs) {
        value.push_back(v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)));
        slope.push_back(1 / (1 + std::exp(-v)));
    }
    // Below about −37, 1 + eˣ rounds to 1: softplus gives 0 where the value is eˣ < 10⁻¹⁶.
    CHECK(gg::testing::mismatch(y, value, 1e-15) == "");
    CHECK(gg::testing::mismatch(x.grad(), slope, 1e-15) == "");
    const Tensor f32 = gg::softplus(gg::from_vector(std::vector<float>{-200.f, 0.f, 200.f}, {3}));
    CHECK(gg::testing::mismatch(f32, {0, std::log(2.0), 200}, 1e-6) == "");
}

TEST_CASE("gradcheck: where and masked_fill") {
    gg::Generator gen(3);
    const Tensor cond = on_test_device(gg::from_vector(std::vector<int64_t>{1, 0, 0, 1, 1, 0}, {2, 3}));
    const Tensor row_cond = on_test_device(gg::from_vector(std::vector<double>{0, 1, 1}, {3}));
    const Tensor a = normal({2, 3}, gen), b = normal({2, 3}, gen), b_row = normal({3}, gen);
    check_gradient("where", [cond](const Inputs& x) { return gg::where(cond, x[0], x[1]); }, {a, b});
    check_gradient("where, broadcast b", [cond](const Inputs& x) { return gg::where(cond, x[0], x[1]); }, {a, b_row});
    check_gradient("where, broadcast cond", [row_cond](const Inputs& x) { return gg::where(row_cond, x[0], x[1]); },
                   {a, b});
    check_gradient("masked_fill", [cond](const Inputs& x) { return gg::masked_fill(x[0], cond, -1e9); }, {a});
    const Tensor col_mask = on_test_device(gg::from_vector(std::vector<double>{1, 0}, {2, 1}));
    check_gradient("masked_fill, broadcast mask",
                   [col_mask](const Inputs& x) { return gg::masked_fill(x[0], col_mask, 2); }, {a});
}

TEST_CASE("gradcheck: reductions") {
    gg::Generator gen(4);
    const Tensor x = normal({2, 3, 4}, gen);  // distinct values, so amax/amin have one winner
    const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};
    for (const auto& dims : dim_sets)
        for (bool keepdim : {false, true}) {
            const std::string tag = " over " + std::to_string(dims.size()) + " dims" +
                                    (dims.empty() ? "" : " from " + std::to_string(dims[0])) +
                                    (keepdim ? ", keepdim" : "");
            check_gradient("sum" + tag, [=](const Inputs& in) { return gg::sum(in[0], dims, keepdim); }, {x});
            check_gradient("mean" + tag, [=](const Inputs& in) { return gg::mean(in[0], dims, keepdim); }, {x});
            check_gradient("amax" + tag, [=](const Inputs& in) { return gg::amax(in[0], dims, keepdim); }, {x});
            check_gradient("amin" + tag, [=](const Inputs& in) { return gg::amin(in[0], dims, keepdim); }, {x});
        }
    for (int64_t dim : {0, 1, -1})
        for (bool keepdim : {false, true})
            check_gradient("max values along " + std::to_string(dim),
                           [=](const Inputs& in) { return gg::max(in[0], dim, keepdim).first; }, {x});
    check_gradient("sum of a permuted tensor",
                   [](const Inputs& in) {
                       return in[0].permute({2, 0, 1}).sum({0, 2});
                   },
                   {x});
    check_gradient("method forms", [](const Inputs& in) { return in[0].sum({1}).mean({0}, true); }, {x});
    check_gradient("sum_to", [](const Inputs& in) { return gg::sum_to(in[0], {3, 1}); }, {x});
}

TEST_CASE("gradcheck: matmul in every shape case") {
    gg::Generator gen(5);
    auto mm = [](const Inputs& x) { return gg::matmul(x[0], x[1]); };
    check_gradient("1-d · 1-d", mm, {normal({4}, gen), normal({4}, gen)});
    check_gradient("1-d @ 2-d", mm, {normal({3}, gen), normal({3, 4}, gen)});
    check_gradient("2-d @ 1-d", mm, {normal({3, 4}, gen), normal({4}, gen)});
    check_gradient("2-d @ 2-d", mm, {normal({3, 4}, gen), normal({4, 2}, gen)});
    check_gradient("batched @ 2-d (shared weight)", mm, {normal({2, 3, 4}, gen), normal({4, 2}, gen)});
    check_gradient("2-d @ batched", mm, {normal({3, 4}, gen), normal({2, 4, 2}, gen)});
    check_gradient("broadcast batch dims", mm, {normal({2, 1, 3, 4}, gen), normal({3, 4, 2}, gen)});
    check_gradient("1-d @ batched", mm, {normal({4}, gen), normal({2, 4, 3}, gen)});
    check_gradient("batched @ 1-d", mm, {normal({2, 3, 4}, gen), normal({4}, gen)});
    const Tensor a = normal({4, 3}, gen), b = normal({2, 4}, gen);
    check_gradient("aᵀ @ bᵀ", [](const Inputs& x) { return gg::matmul(x[0].t(), x[1].t()); }, {a, b});
    const Tensor ba = normal({2, 4, 3}, gen), bb = normal({2, 2, 4}, gen);
    check_gradient("batched transposes",
                   [](const Inputs& x) { return gg::matmul(x[0].transpose(-1, -2), x[1].transpose(1, 2)); }, {ba, bb});
    check_gradient("batched @ transposed weight", [](const Inputs& x) { return gg::matmul(x[0], x[1].t()); },
                   {normal({2, 3, 4}, gen), normal({2, 4}, gen)});
    check_gradient("permuted batch @ weight", [](const Inputs& x) { return gg::matmul(x[0].permute({1, 0, 2}), x[1]); },
                   {normal({3, 2, 4}, gen), normal({4, 2}, gen)});
    check_gradient("the method form, a used twice", [](const Inputs& x) { return x[0].matmul(x[0].t()); },
                   {normal({3, 2}, gen)});
}

TEST_CASE("gradcheck: add_linear, with and without a bias, on rows of any layout") {
    gg::Generator gen(6);
    check_gradient("(B, T, K) rows with a bias", [](const Inputs& x) { return gg::add_linear(x[0], x[1], x[2], x[3]); },
                   {normal({2, 3, 2}, gen), normal({2, 3, 4}, gen), normal({2, 4}, gen), normal({2}, gen)});
    check_gradient("(M, K) rows, no bias", [](const Inputs& x) { return gg::add_linear(x[0], x[1], x[2]); },
                   {normal({3, 2}, gen), normal({3, 4}, gen), normal({2, 4}, gen)});
    check_gradient("transposed x and weight",
                   [](const Inputs& x) { return gg::add_linear(x[0], x[1].t(), x[2].t()); },
                   {normal({3, 2}, gen), normal({4, 3}, gen), normal({4, 2}, gen)});
}

TEST_CASE("gradcheck: softmax, log_softmax and cross_entropy") {
    gg::Generator gen(6);
    const Tensor x = normal({2, 3, 4}, gen);
    for (int64_t dim : {0, 1, -1}) {
        check_gradient("softmax along " + std::to_string(dim),
                       [dim](const Inputs& in) { return gg::softmax(in[0], dim); }, {x});
        check_gradient("log_softmax along " + std::to_string(dim),
                       [dim](const Inputs& in) { return gg::log_softmax(in[0], dim); }, {x});
    }
    const Tensor logits = normal({4, 5}, gen);
    const Tensor targets = on_test_device(gg::from_vector(std::vector<int64_t>{1, -100, 4, 0}, {4}));
    check_gradient("cross_entropy with an ignored row",
                   [targets](const Inputs& in) { return gg::cross_entropy(in[0], targets); }, {logits});
    check_gradient("cross_entropy scaled (a non-unit upstream gradient)",
                   [targets](const Inputs& in) { return gg::cross_entropy(in[0], targets) * 3.0; }, {logits});
    check_gradient("cross_entropy and the z-loss on the same logits",
                   [targets](const Inputs& in) { return gg::cross_entropy(in[0], targets) + gg::z_loss(in[0]) * 0.1; },
                   {logits});
    const Tensor targets_2d = on_test_device(gg::from_vector(std::vector<int64_t>{2, 2, 0, 3, 1, 2}, {2, 3}));
    check_gradient("cross_entropy over (B, T, V) with ignore_index 0",
                   [targets_2d](const Inputs& in) { return gg::cross_entropy(in[0], targets_2d, 0); },
                   {normal({2, 3, 4}, gen)});
}

TEST_CASE("gradcheck: logsumexp and the z-loss, and their values") {
    gg::Generator gen(16);
    const Tensor x = normal({2, 3, 5}, gen);
    for (int64_t dim : {0, -1})
        check_gradient("logsumexp along " + std::to_string(dim),
                       [dim](const Inputs& in) { return gg::logsumexp(in[0], dim); }, {x});
    check_gradient("logsumexp keepdim", [](const Inputs& in) { return gg::logsumexp(in[0], 1, true); }, {x});
    check_gradient("z_loss", [](const Inputs& in) { return gg::z_loss(in[0]); }, {x});
    // Values against the definitions, row by row on the host: log Σ exp, and the mean of its square.
    const Tensor big = leaf(gg::from_vector(std::vector<double>{1000, 1001, -2, 0.5, 0, 3}, {2, 3}));
    const std::vector<double> lse = gg::logsumexp(big, -1).to_vector<double>();
    const double row0 = 1001 + std::log(std::exp(-1.0) + 1 + std::exp(-1003.0));  // no overflow at 1000
    const double row1 = std::log(std::exp(0.5) + 1 + std::exp(3.0));
    CHECK(lse[0] == doctest::Approx(row0).epsilon(1e-14));
    CHECK(lse[1] == doctest::Approx(row1).epsilon(1e-14));
    CHECK(gg::z_loss(big).item() == doctest::Approx((row0 * row0 + row1 * row1) / 2).epsilon(1e-14));
}

TEST_CASE("gradcheck: rms_norm (fused kernel) w.r.t. x and weight") {
    gg::Generator gen(12);
    check_gradient("rms_norm over (2, 3, 5)", [](const Inputs& in) { return gg::rms_norm(in[0], in[1], 1e-6); },
                   {normal({2, 3, 5}, gen), normal({5}, gen)});
    check_gradient("rms_norm of a non-contiguous x, large eps",
                   [](const Inputs& in) { return gg::rms_norm(in[0].transpose(0, 1), in[1], 0.5); },
                   {normal({4, 3}, gen), normal({4}, gen)});
}

TEST_CASE("gradcheck: swiglu, sigmoid_gate and rope (fused kernels)") {
    gg::Generator gen(13);
    check_gradient("swiglu over (2, 3, 5) w.r.t. both inputs",
                   [](const Inputs& in) { return gg::swiglu(in[0], in[1]); },
                   {normal({2, 3, 5}, gen), normal({2, 3, 5}, gen)});
    check_gradient("swiglu of non-contiguous inputs",
                   [](const Inputs& in) { return gg::swiglu(in[0].transpose(0, 1), in[1]); },
                   {normal({4, 3}, gen), normal({3, 4}, gen)});
    check_gradient("swiglu of the halves of one (2, 3, 8)", [](const Inputs& in) { return gg::swiglu(in[0]); },
                   {normal({2, 3, 8}, gen)});
    check_gradient("swiglu of the halves of a slice (3, 6) of a (3, 9)",
                   [](const Inputs& in) { return gg::swiglu(in[0].narrow(1, 2, 6)); }, {normal({3, 9}, gen)});
    check_gradient("sigmoid_gate over (2, 3, 5) w.r.t. the logits and the gated values",
                   [](const Inputs& in) { return gg::sigmoid_gate(in[0], in[1]); },
                   {normal({2, 3, 5}, gen), normal({2, 3, 5}, gen)});
    check_gradient("sigmoid_gate of non-contiguous inputs",
                   [](const Inputs& in) { return gg::sigmoid_gate(in[0], in[1].transpose(0, 1)); },
                   {normal({3, 4}, gen), normal({4, 3}, gen)});
    // Tables of random angles, scaled as YaRN scales them: the rotation need not be orthonormal,
    // and its columns c and c + D/2 are equal, as RoPE's are.
    std::vector<double> cos_values(3 * 4), sin_values(3 * 4);  // (T, D) = (3, 4)
    for (int t = 0; t < 3; ++t)
        for (int c = 0; c < 4; ++c) {
            const double angle = 0.7 * t + 0.4 * (c % 2) + 0.1;
            cos_values[t * 4 + c] = 1.3 * std::cos(angle);
            sin_values[t * 4 + c] = 1.3 * std::sin(angle);
        }
    const Tensor cos = on_test_device(gg::from_vector(cos_values, {3, 4}));
    const Tensor sin = on_test_device(gg::from_vector(sin_values, {3, 4}));
    check_gradient("rope of x (2, 2, 3, 4)", [cos, sin](const Inputs& in) { return gg::rope(in[0], cos, sin); },
                   {normal({2, 2, 3, 4}, gen)});
    check_gradient("rope of the (B, H, T, D) view of a (B, T, H, D) tensor",
                   [cos, sin](const Inputs& in) { return gg::rope(in[0].transpose(1, 2), cos, sin); },
                   {normal({2, 3, 2, 4}, gen)});
}

TEST_CASE("gradcheck: embedding, dropout, topk and gather") {
    gg::Generator gen(7);
    const Tensor ids =
        on_test_device(gg::from_vector(std::vector<int64_t>{1, 3, 1, 0, 3, 3}, {2, 3}));  // repeated ids add up
    check_gradient("embedding", [ids](const Inputs& in) { return gg::embedding(in[0], ids); }, {normal({5, 3}, gen)});
    check_gradient("dropout", [](const Inputs& in) {
        gg::Generator mask_gen(99);  // the same mask on every evaluation
        return gg::dropout(in[0], 0.4, true, mask_gen);
    }, {normal({3, 4}, gen)});
    const Tensor x = normal({3, 5}, gen);
    check_gradient("topk along the last dim", [](const Inputs& in) { return gg::topk(in[0], 2).first; }, {x});
    check_gradient("topk along dim 0", [](const Inputs& in) { return gg::topk(in[0], 2, 0).first; }, {x});
    const Tensor idx = on_test_device(gg::from_vector(std::vector<int64_t>{4, 0, 4, 1, 1, 2}, {3, 2}));
    check_gradient("gather along dim 1, repeated indices",
                   [idx](const Inputs& in) { return gg::gather(in[0], 1, idx); }, {x});
    const Tensor idx0 = on_test_device(gg::from_vector(std::vector<int64_t>{2, 0, 1, 2, 2, 0, 0, 1, 1, 1}, {2, 5}));
    check_gradient("gather along dim 0", [idx0](const Inputs& in) { return gg::gather(in[0], 0, idx0); }, {x});
}

TEST_CASE("gradcheck: cat, stack, split, chunk, repeat_interleave, tril, triu") {
    gg::Generator gen(8);
    const Tensor a = normal({2, 3}, gen), b = normal({2, 2}, gen), c = normal({2, 1}, gen);
    check_gradient("cat along dim 1", [](const Inputs& x) { return gg::cat(x, 1); }, {a, b, c});
    check_gradient("cat along dim 0", [](const Inputs& x) { return gg::cat({x[0], x[1].t()}, 0); },
                   {a, normal({3, 2}, gen)});
    check_gradient("cat with a non-grad input", [b](const Inputs& x) { return gg::cat({b, x[0]}, -1); }, {a});
    check_gradient("stack", [](const Inputs& x) { return gg::stack(x, 1); }, {a, normal({2, 3}, gen)});
    const Tensor x = normal({7, 2}, gen);
    check_gradient("split", [](const Inputs& in) {
        const auto parts = gg::split(in[0], 3);  // 3 + 3 + 1 rows, each weighted differently
        return gg::cat({parts[2], parts[0] * 2.0, parts[1] * 3.0}, 0);
    }, {x});
    // Pieces of given sizes: one unused (its slice of the gradient is 0), one used twice, and x
    // read beside them (its two gradients add up).
    check_gradient("split by sizes", [](const Inputs& in) {
        const auto parts = gg::split(in[0], {2, 4, 1}, 0);
        return gg::cat({parts[2] * 3.0, parts[0] * parts[0]}, 0) + in[0].narrow(0, 4, 3);
    }, {x});
    check_gradient("chunk", [](const Inputs& in) {
        const auto parts = gg::chunk(in[0], 2, 1);
        return parts[0] * parts[1];
    }, {x});
    check_gradient("repeat_interleave", [](const Inputs& in) { return gg::repeat_interleave(in[0], 3, 0); }, {a});
    check_gradient("repeat_interleave along the last dim",
                   [](const Inputs& in) { return gg::repeat_interleave(in[0], 2, -1); }, {a});
    const Tensor m = normal({2, 3, 4}, gen);
    check_gradient("tril", [](const Inputs& in) { return gg::tril(in[0]); }, {m});
    check_gradient("tril(-1)", [](const Inputs& in) { return gg::tril(in[0], -1); }, {m});
    check_gradient("triu", [](const Inputs& in) { return gg::triu(in[0]); }, {m});
    check_gradient("triu(1)", [](const Inputs& in) { return gg::triu(in[0], 1); }, {m});
}

TEST_CASE("gradcheck: views and copies") {
    gg::Generator gen(9);
    const Tensor x = normal({2, 3, 4}, gen);
    auto check = [&](const std::string& what, const gg::GradcheckFn& f) { check_gradient(what, f, {x}); };
    check("view", [](const Inputs& in) { return in[0].view({6, 4}); });
    check("view with -1", [](const Inputs& in) { return in[0].view({-1}); });
    check("reshape of a contiguous tensor", [](const Inputs& in) { return in[0].reshape({4, 6}); });
    check("reshape of a transpose (copies)", [](const Inputs& in) { return in[0].transpose(0, 2).reshape({-1, 2}); });
    check("permute", [](const Inputs& in) { return in[0].permute({2, 0, 1}); });
    check("transpose", [](const Inputs& in) { return in[0].transpose(1, 2); });
    check("t", [](const Inputs& in) { return in[0].select(0, 1).t(); });
    check("narrow", [](const Inputs& in) { return in[0].narrow(2, 1, 2); });
    check("narrow along dim 0", [](const Inputs& in) { return in[0].narrow(0, 1, 1); });
    check("select", [](const Inputs& in) { return in[0].select(1, -1); });
    check("expand", [](const Inputs& in) { return in[0].narrow(1, 0, 1).expand({3, 2, 3, 4}); });
    check("squeeze", [](const Inputs& in) { return in[0].narrow(1, 2, 1).squeeze(1); });
    check("unsqueeze", [](const Inputs& in) { return in[0].unsqueeze(1); });
    check("flatten", [](const Inputs& in) { return in[0].flatten(1); });
    check("flatten of a permute", [](const Inputs& in) { return in[0].permute({1, 0, 2}).flatten(0, 1); });
    check("contiguous of a transpose", [](const Inputs& in) { return in[0].transpose(0, 1).contiguous(); });
    check("contiguous (no-op)", [](const Inputs& in) { return in[0].contiguous(); });
    check("clone", [](const Inputs& in) { return in[0].clone(); });
    check("to(float64) (no-op)", [](const Inputs& in) { return in[0].to(DType::f64); });
    check("to(cpu) (no-op)", [](const Inputs& in) { return in[0].to(gg::Device::CPU); });
    check("transpose of a narrow of a permute",
          [](const Inputs& in) { return in[0].permute({2, 0, 1}).narrow(1, 1, 1).transpose(0, 2) * 2.0; });
}

TEST_CASE("gradcheck: a small composite, by random projections") {
    // An MLP-shaped function big enough to take the projection path.
    gg::Generator gen(10);
    const Tensor x = normal({4, 6}, gen), w1 = normal({6, 8}, gen), w2 = normal({8, 5}, gen);
    const Tensor targets = on_test_device(gg::from_vector(std::vector<int64_t>{0, 4, -100, 2}, {4}));
    gg::GradcheckOptions options;
    options.full_jacobian_limit = 0;
    check_gradient("mlp", [targets](const Inputs& in) {
        const Tensor h = gg::gelu(gg::matmul(in[0], in[1]));
        return gg::cross_entropy(gg::matmul(h, in[2]), targets);
    }, {x, w1, w2}, options);
}

namespace {

// y = x², recorded with gg::record and a backward that returns `factor` times the true
// gradient 2x · dy.
Tensor square_with_backward_scaled_by(const Tensor& x, double factor) {
    Tensor y;
    {
        gg::NoGradGuard no_grad;
        y = x * x;
    }
    return gg::record("square", y, {x},
                      [x, factor](const Tensor& g) { return std::vector<Tensor>{g * x * (2 * factor)}; });
}

}  // namespace

TEST_CASE("gradcheck: fails when a backward is wrong, on both paths") {
    gg::Generator gen(11);
    const Tensor x = normal({3, 4}, gen);
    auto right = [](const Inputs& in) { return square_with_backward_scaled_by(in[0], 1); };
    auto wrong = [](const Inputs& in) { return square_with_backward_scaled_by(in[0], 2); };
    gg::GradcheckOptions projections;
    projections.full_jacobian_limit = 1;  // 12 × 12 > 1: random projections
    for (const gg::GradcheckOptions& options : {gg::GradcheckOptions{}, projections}) {
        INFO("full_jacobian_limit " << options.full_jacobian_limit);
        const gg::GradcheckResult good = gg::gradcheck(right, {x}, options);
        CHECK(good.ok);
        CHECK(good.message.empty());
        CHECK(good.max_error < 1e-6);
        const gg::GradcheckResult bad = gg::gradcheck(wrong, {x}, options);
        CHECK_FALSE(bad.ok);
        CHECK(bad.max_error > 0.1);
        CHECK(bad.message.find("backward gives") != std::string::npos);
        CHECK(bad.message.find("finite differences give") != std::string::npos);
    }
    // The wrong backward hidden behind a correct op is still caught.
    CHECK_FALSE(gg::gradcheck([&](const Inputs& in) { return gg::sum(wrong(in) * 3.0, {1}); }, {x}).ok);
    CHECK_FALSE(gg::gradcheck([&](const Inputs& in) { return gg::sum(wrong(in) * 3.0, {1}); }, {x}, projections).ok);
    // Only inputs that require grad are checked.
    const Tensor constant = on_test_device(gg::randn({3, 4}, gen, DType::f64));
    CHECK(gg::gradcheck([&](const Inputs& in) { return right({in[0]}) * in[1]; }, {x, constant}).ok);
    // And it insists on float64.
    CHECK_THROWS_WITH_AS(gg::gradcheck(right, {gg::ones({2}).requires_grad_()}),
                         doctest::Contains("gradcheck: inputs must be float64, got (2) float32"),
                         std::invalid_argument);
}

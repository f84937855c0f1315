// test_layers.cpp — the basic layers (Linear, Embedding, norms, Dropout, SwiGLU, positions),
// RoPE and its scalings, and the Module base class.
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::testing;

// ================================================================ basic layers

TEST_CASE("nn: Linear computes x Wᵀ + b, with and without bias; gradients check") {
    Generator gen(1);
    for (bool bias : {true, false}) {
        CAPTURE(bias);
        Linear lin(5, 3, bias);
        CHECK(amax(abs(lin.weight)).item() <= 1 / std::sqrt(5.0));  // torch: U(±1/√in)
        CHECK(lin.bias.defined() == bias);
        CHECK(names_of(lin) == (bias ? std::vector<std::string>{"weight", "bias"} : std::vector<std::string>{"weight"}));
        lin.to(DType::f64);
        randomize(lin, gen);
        const Tensor x = randn({2, 4, 5}, gen, DType::f64);
        const Tensor y = lin.forward(x);
        REQUIRE(y.shape() == Shape{2, 4, 3});
        const auto X = x.to_vector<double>(), W = lin.weight.to_vector<double>(), Y = y.to_vector<double>();
        const auto b = bias ? lin.bias.to_vector<double>() : std::vector<double>(3, 0.0);
        double err = 0;
        for (int r = 0; r < 8; ++r)
            for (int o = 0; o < 3; ++o) {
                double s = b[o];
                for (int i = 0; i < 5; ++i) s += X[r * 5 + i] * W[o * 5 + i];
                err = std::max(err, std::abs(s - Y[r * 3 + o]));
            }
        CHECK(err < 1e-12);
        const int n = check_gradients(lin, {x.clone().requires_grad_()},
                                      [&](const std::vector<Tensor>& in) { return lin.forward(in[0]); });
        CHECK(n == (bias ? 2 : 1));
    }
    CHECK_THROWS_AS(Linear(5, 3).forward(zeros({2, 4})), std::invalid_argument);
}

TEST_CASE("nn: Linear with a residual returns residual + x Wᵀ + b, in float32 and under autocast; bad shapes throw") {
    Generator gen(3);
    for (bool bias : {true, false}) {
        CAPTURE(bias);
        Linear lin(5, 3, bias);
        const Tensor x = randn({2, 4, 5}, gen), r = randn({2, 4, 3}, gen);
        CHECK(max_abs_diff(lin.forward(x, r), r + lin.forward(x)) < 1e-5);
        // Under autocast the product is bfloat16 and the stream float32: the sum stays float32.
        const Autocast mixed(DType::bf16);
        const Tensor y = lin.forward(x, r);
        CHECK(y.dtype() == DType::f32);
        CHECK(max_abs_diff(y, r + lin.forward(x).to(DType::f32)) < 1e-6);
    }
    CHECK_THROWS_WITH_AS(Linear(5, 3).forward(zeros({2, 5}), zeros({2, 4})),
                         doctest::Contains("add_linear: residual (2,4) float32, x (2,5) float32, weight (3,5) float32, "
                                           "bias (3) float32: need x (..., K)"),
                         std::invalid_argument);
}

TEST_CASE("nn: Linear::input_transform is applied to x before the product, and its gradient flows through it") {
    Generator gen(2);
    Linear lin(4, 3);
    lin.to(DType::f64);
    randomize(lin, gen);
    const Tensor x = randn({2, 4}, gen, DType::f64);
    const Tensor plain = lin.forward(x);
    lin.input_transform = [](const Tensor& in) { return in * 2.0; };
    CHECK(max_abs_diff(lin.forward(x * 0.5), plain) < 1e-12);  // W(2 · x/2) + b
    CHECK(max_abs_diff(lin.forward(x), plain) > 1e-3);
    const int n = check_gradients(lin, {x.clone().requires_grad_()},
                                  [&](const std::vector<Tensor>& in) { return lin.forward(in[0]); });
    CHECK(n == 2);
    lin.input_transform = nullptr;
    CHECK(max_abs_diff(lin.forward(x), plain) == 0);
}

TEST_CASE("nn: fused_linear gives each layer's forward from one product, and the same gradients") {
    Generator gen(3);
    for (bool bias : {false, true}) {
        CAPTURE(bias);
        Linear a(5, 4, bias), b(5, 2, bias), c(5, 3, bias);
        for (Linear* layer : {&a, &b, &c}) layer->to(DType::f64), randomize(*layer, gen);
        const Tensor x = randn({2, 32, 5}, gen, DType::f64);  // 64 rows: enough to join the weights
        const std::vector<Tensor> fused = fused_linear(x, {&a, &b, &c});
        REQUIRE(fused.size() == 3);
        CHECK(max_abs_diff(fused[0], a.forward(x)) < 1e-12);
        CHECK(max_abs_diff(fused[1], b.forward(x)) < 1e-12);
        CHECK(max_abs_diff(fused[2], c.forward(x)) < 1e-12);
        CHECK(fused[1].shares_storage(fused[2]));  // views of one product
        // A different weight per output, so that every layer's gradient differs from the others'.
        const auto loss = [&](const std::vector<Tensor>& ys) {
            return sum(ys[0] * 2.0) + sum(ys[1] * ys[1]) + sum(ys[2] * -3.0);
        };
        const Tensor xf = x.clone().requires_grad_(), xs = x.clone().requires_grad_();
        loss(fused_linear(xf, {&a, &b, &c})).backward();
        const std::vector<Tensor> fused_grads{xf.grad(), a.weight.grad(), b.weight.grad(), c.weight.grad()};
        for (Linear* layer : {&a, &b, &c}) layer->zero_grad();
        loss({a.forward(xs), b.forward(xs), c.forward(xs)}).backward();
        const std::vector<Tensor> separate_grads{xs.grad(), a.weight.grad(), b.weight.grad(), c.weight.grad()};
        for (size_t i = 0; i < fused_grads.size(); ++i) CHECK(max_abs_diff(fused_grads[i], separate_grads[i]) < 1e-12);
        if (bias) CHECK(max_abs_diff(c.bias.grad(), full({3}, -3.0 * 64, DType::f64)) < 1e-12);
        // One row (a decoding step): each layer multiplies on its own, with the same result.
        const Tensor row = x.narrow(1, 0, 1);  // (2, 1, 5)
        const std::vector<Tensor> apart = fused_linear(row, {&a, &b, &c});
        CHECK_FALSE(apart[1].shares_storage(apart[2]));
        CHECK(max_abs_diff(apart[2], fused[2].narrow(1, 0, 1)) < 1e-12);
    }
    // A layer with an input_transform runs on its own, with it.
    Linear a(5, 4, false), b(5, 2, false);
    b.input_transform = [](const Tensor& in) { return in * 2.0; };
    const Tensor x = randn({3, 5}, gen);
    CHECK(max_abs_diff(fused_linear(x, {&a, &b})[1], b.forward(x)) == 0);
    CHECK_THROWS_AS(fused_linear(zeros({2, 4}), {&a, &b}), std::invalid_argument);
}

TEST_CASE("nn: Embedding picks rows, and repeated ids add up in the gradient") {
    Generator gen(2);
    Embedding emb(6, 4);
    emb.to(DType::f64);
    const std::vector<int64_t> id_values{1, 3, 1, 5, 1, 0};
    const Tensor ids = from_vector(id_values, {2, 3});
    const Tensor y = emb.forward(ids);
    REQUIRE(y.shape() == Shape{2, 3, 4});
    for (int64_t n = 0; n < 6; ++n) CHECK(max_abs_diff(y.reshape({6, 4}).select(0, n), emb.weight.select(0, id_values[n])) == 0);

    const Tensor g = randn({2, 3, 4}, gen, DType::f64), G = g.reshape({6, 4});
    emb.forward(ids).backward(g);
    const Tensor dW = emb.weight.grad();
    CHECK(max_abs_diff(dW.select(0, 1), G.select(0, 0) + G.select(0, 2) + G.select(0, 4)) < 1e-12);
    CHECK(max_abs_diff(dW.select(0, 3), G.select(0, 1)) < 1e-12);
    CHECK(max_abs_diff(dW.select(0, 2), zeros({4}, DType::f64)) == 0);  // never looked up
    emb.zero_grad();
    CHECK(check_gradients(emb, {}, [&](const std::vector<Tensor>&) { return emb.forward(ids); }) == 1);
}

TEST_CASE("nn: RMSNorm and LayerNorm follow their formulas; gradients check") {
    Generator gen(3);
    const Tensor x = randn({3, 6}, gen, DType::f64) * 2.0 + 0.5;
    const auto X = x.to_vector<double>();

    RMSNorm rms(6, 1e-5);
    CHECK(max_abs_diff(rms.weight, ones({6})) == 0);
    rms.to(DType::f64);
    randomize(rms, gen);
    {
        const auto Y = rms.forward(x).to_vector<double>(), g = rms.weight.to_vector<double>();
        double err = 0;
        for (int r = 0; r < 3; ++r) {
            double ms = 0;
            for (int c = 0; c < 6; ++c) ms += X[r * 6 + c] * X[r * 6 + c] / 6;
            for (int c = 0; c < 6; ++c)
                err = std::max(err, std::abs(X[r * 6 + c] / std::sqrt(ms + 1e-5) * g[c] - Y[r * 6 + c]));
        }
        CHECK(err < 1e-12);
        check_gradients(rms, {x.clone().requires_grad_()}, [&](const std::vector<Tensor>& in) { return rms.forward(in[0]); });
    }

    // Zero-centred (Qwen3-Next, Qwen3.5): the weight starts at 0 and scales by 1 + weight, so
    // that it equals a plain norm whose weight is one more.
    RMSNorm centred(6, 1e-5, true);
    CHECK(max_abs_diff(centred.weight, zeros({6})) == 0);
    centred.to(DType::f64);
    randomize(centred, gen);
    {
        NoGradGuard no_grad;
        rms.weight.copy_(centred.weight + 1.0);
    }
    CHECK(max_abs_diff(centred.forward(x), rms.forward(x)) < 1e-15);
    CHECK(check_gradients(centred, {x.clone().requires_grad_()},
                          [&](const std::vector<Tensor>& in) { return centred.forward(in[0]); }) == 1);

    LayerNorm ln(6);
    CHECK(max_abs_diff(ln.weight, ones({6})) == 0);
    CHECK(max_abs_diff(ln.bias, zeros({6})) == 0);
    ln.to(DType::f64);
    {
        // At init: zero mean and (up to ε) unit biased variance per row.
        const Tensor y = ln.forward(x);
        CHECK(amax(abs(mean(y, {-1}))).item() < 1e-12);
        CHECK(amax(abs(mean(y * y, {-1}) - 1.0)).item() < 1e-4);
    }
    randomize(ln, gen);
    {
        const auto Y = ln.forward(x).to_vector<double>(), g = ln.weight.to_vector<double>(),
                   b = ln.bias.to_vector<double>();
        double err = 0;
        for (int r = 0; r < 3; ++r) {
            double mu = 0, var = 0;
            for (int c = 0; c < 6; ++c) mu += X[r * 6 + c] / 6;
            for (int c = 0; c < 6; ++c) var += (X[r * 6 + c] - mu) * (X[r * 6 + c] - mu) / 6;
            for (int c = 0; c < 6; ++c)
                err = std::max(err, std::abs((X[r * 6 + c] - mu) / std::sqrt(var + 1e-5) * g[c] + b[c] - Y[r * 6 + c]));
        }
        CHECK(err < 1e-12);
        CHECK(check_gradients(ln, {x.clone().requires_grad_()},
                              [&](const std::vector<Tensor>& in) { return ln.forward(in[0]); }) == 2);
    }
}

TEST_CASE("nn: Dropout keeps units with probability 1 − p scaled by 1/(1 − p) in training, identity in eval") {
    manual_seed(11);
    const double p = 0.3;
    const int64_t n = 200000;
    Dropout drop(p);
    const Tensor x = ones({n}, DType::f64).requires_grad_();
    const Tensor y = drop.forward(x);
    const auto Y = y.to_vector<double>();
    int64_t dropped = 0, bad = 0;
    for (double v : Y) {
        if (v == 0) ++dropped;
        else if (std::abs(v - 1 / (1 - p)) > 1e-12) ++bad;
    }
    CHECK(bad == 0);
    CHECK(std::abs(double(dropped) / n - p) < 0.01);  // ~10 binomial standard deviations
    CHECK(std::abs(mean(y).item() - 1.0) < 0.015);  // E[y] = x
    y.backward(ones({n}, DType::f64));
    CHECK(max_abs_diff(x.grad(), y) == 0);  // dy/dx is the same mask and scale (x = 1)
    CHECK(max_abs_diff(drop.forward(x), y) > 0);  // a fresh mask each call

    drop.eval();
    const Tensor z = randn({5, 7}, default_generator(), DType::f64);
    CHECK(max_abs_diff(drop.forward(z), z) == 0);
    drop.train();
    CHECK(max_abs_diff(Dropout(0).forward(z), z) == 0);
    CHECK(amax(abs(Dropout(1).forward(z))).item() == 0);
    CHECK_THROWS_AS(Dropout(1.5).forward(z), std::invalid_argument);
}

TEST_CASE("nn: SwiGLU is W3(silu(W1 x) ⊙ W2 x); gradients check") {
    Generator gen(4);
    SwiGLU ffn(6, 10);
    CHECK(names_of(ffn) == std::vector<std::string>{"w1.weight", "w2.weight", "w3.weight"});
    CHECK(ffn.w1->weight.shape() == Shape{10, 6});
    CHECK(ffn.w3->weight.shape() == Shape{6, 10});
    ffn.to(DType::f64);
    randomize(ffn, gen);
    const Tensor x = randn({2, 3, 6}, gen, DType::f64);
    const Tensor a = matmul(x, ffn.w1->weight.t()), b = matmul(x, ffn.w2->weight.t());
    const Tensor expected = matmul(a / (1.0 + exp(-a)) * b, ffn.w3->weight.t());
    CHECK(max_abs_diff(ffn.forward(x), expected) < 1e-12);
    CHECK(check_gradients(ffn, {x.clone().requires_grad_()},
                          [&](const std::vector<Tensor>& in) { return ffn.forward(in[0]); }) == 3);
}

TEST_CASE("nn: LearnedPositionalEmbedding returns rows [offset, offset + T)") {
    Generator gen(5);
    LearnedPositionalEmbedding pos(64, 32);
    const double sd = std::sqrt(mean(pos.weight * pos.weight).item());
    CHECK(sd > 0.018);  // N(0, 0.02²) init, 2048 draws
    CHECK(sd < 0.022);
    pos.to(DType::f64);
    const Tensor y = pos.forward(5, 7);
    CHECK(y.shape() == Shape{5, 32});
    for (int64_t t = 0; t < 5; ++t) CHECK(max_abs_diff(y.select(0, t), pos.weight.select(0, 7 + t)) == 0);
    CHECK_NOTHROW(pos.forward(4, 60));
    CHECK_THROWS_AS(pos.forward(5, 60), std::out_of_range);
    CHECK_THROWS_AS(pos.forward(1, -1), std::out_of_range);
    const Tensor w = randn({5, 32}, gen, DType::f64);
    CHECK(check_gradients(pos, {}, [&](const std::vector<Tensor>&) { return pos.forward(5, 7) * w; }) == 1);
}

// ================================================================ RoPE

namespace {
const RopeScaling kAllScalings[] = {RopeScaling::none, RopeScaling::interpolation, RopeScaling::ntk, RopeScaling::yarn};

RopeOptions rope_options(RopeScaling scaling) {
    RopeOptions o;
    o.base = 10000;
    o.scaling = scaling;
    o.factor = scaling == RopeScaling::none ? 1 : 4;
    o.original_length = 512;
    return o;
}

// θ_c for head size D, from the formulas in rope.h's header comment.
std::vector<double> spec_frequencies(int64_t D, const RopeOptions& o) {
    const double s = o.factor;
    const double base = o.scaling == RopeScaling::ntk ? o.base * std::pow(s, double(D) / (D - 2)) : o.base;
    std::vector<double> theta(D / 2);
    for (int64_t c = 0; c < D / 2; ++c) {
        const double t = std::pow(base, -2.0 * c / D);
        const double turns = o.original_length * t / (2 * M_PI);
        const double keep = std::clamp((turns - o.yarn_beta_slow) / (o.yarn_beta_fast - o.yarn_beta_slow), 0.0, 1.0);
        theta[c] = o.scaling == RopeScaling::interpolation ? t / s
                   : o.scaling == RopeScaling::yarn        ? keep * t + (1 - keep) * t / s
                                                           : t;
    }
    return theta;
}
}  // namespace

TEST_CASE("nn: RoPE frequencies follow each scaling's formula") {
    const int64_t D = 16;
    for (RopeScaling scaling : kAllScalings) {
        CAPTURE(rope_scaling_name(scaling));
        const RopeOptions o = rope_options(scaling);
        const std::vector<double> got = RoPE(D, o).frequencies(), want = spec_frequencies(D, o);
        REQUIRE(got.size() == want.size());
        for (size_t c = 0; c < got.size(); ++c) CHECK(got[c] == relative(want[c], 1e-12));
    }
    const std::vector<double> plain = RoPE(D, rope_options(RopeScaling::none)).frequencies(),
                              pi = RoPE(D, rope_options(RopeScaling::interpolation)).frequencies(),
                              ntk = RoPE(D, rope_options(RopeScaling::ntk)).frequencies(),
                              yarn = RoPE(D, rope_options(RopeScaling::yarn)).frequencies();
    CHECK(plain[3] == relative(std::pow(10000.0, -6.0 / 16), 1e-12));
    // NTK keeps the highest frequency and slows the lowest exactly as interpolation does.
    CHECK(ntk[0] == relative(1.0, 1e-12));
    CHECK(ntk[7] == relative(pi[7], 1e-12));
    // YaRN (L = 512, s = 4): channel 0 turns 81 times within L (> β_fast: kept), channel 7
    // well under once (< β_slow: interpolated), channels in between blended.
    CHECK(yarn[0] == relative(plain[0], 1e-12));
    CHECK(yarn[7] == relative(plain[7] / 4, 1e-12));
    CHECK(yarn[2] < plain[2]);
    CHECK(yarn[2] > plain[2] / 4);

    CHECK_THROWS_AS(RoPE(7), std::invalid_argument);
    RopeOptions bad = rope_options(RopeScaling::yarn);
    bad.original_length = 0;
    CHECK_THROWS_AS(RoPE(8, bad), std::invalid_argument);
    bad = rope_options(RopeScaling::ntk);
    bad.factor = 0.5;
    CHECK_THROWS_AS(RoPE(8, bad), std::invalid_argument);
    CHECK(parse_rope_scaling("pi") == RopeScaling::interpolation);
    CHECK(parse_rope_scaling(rope_scaling_name(RopeScaling::yarn)) == RopeScaling::yarn);
    CHECK_THROWS_AS(parse_rope_scaling("linear"), std::invalid_argument);
    CHECK(parse_rope_scaling("YaRN") == RopeScaling::yarn);
    CHECK(parse_rope_scaling("NTK") == RopeScaling::ntk);
}

TEST_CASE("nn: RoPE rotates channel pairs (c, c + D/2), keeps norms, and q·k depends only on m − n") {
    Generator gen(6);
    const int64_t B = 1, H = 2, T = 7, D = 8, offset = 3;
    for (RopeScaling scaling : kAllScalings) {
        CAPTURE(rope_scaling_name(scaling));
        const RopeOptions o = rope_options(scaling);
        const RoPE rope(D, o);
        const double mscale = scaling == RopeScaling::yarn ? 0.1 * std::log(o.factor) + 1 : 1.0;
        const std::vector<double> theta = spec_frequencies(D, o);

        const Tensor x = randn({B, H, T, D}, gen, DType::f64);
        const Tensor y = rope.forward(x, offset);
        REQUIRE(y.shape() == x.shape());
        const auto X = x.to_vector<double>(), Y = y.to_vector<double>();
        double err = 0;
        for (int64_t bh = 0; bh < B * H; ++bh)
            for (int64_t t = 0; t < T; ++t)
                for (int64_t c = 0; c < D / 2; ++c) {
                    const int64_t i = (bh * T + t) * D + c, j = i + D / 2;
                    const double angle = double(offset + t) * theta[c];
                    err = std::max(err, std::abs(mscale * (X[i] * std::cos(angle) - X[j] * std::sin(angle)) - Y[i]));
                    err = std::max(err, std::abs(mscale * (X[j] * std::cos(angle) + X[i] * std::sin(angle)) - Y[j]));
                }
        CHECK(err < 1e-12);

        // A rotation keeps each head vector's length; YaRN also scales it by its mscale.
        const Tensor norm_x = sqrt(sum(x * x, {-1})), norm_y = sqrt(sum(y * y, {-1}));
        CHECK(max_abs_diff(norm_y, norm_x * mscale) < 1e-12);

        // An offset continues the positions of a longer sequence.
        const Tensor longer = randn({B, H, offset + T, D}, gen, DType::f64);
        CHECK(max_abs_diff(rope.forward(longer).narrow(2, offset, T), rope.forward(longer.narrow(2, offset, T), offset)) <
              1e-12);

        // The same q and k at every position: q_m · k_n must depend on m − n alone.
        const Tensor q = randn({1, 1, 1, D}, gen, DType::f64).expand({1, 1, T, D}).contiguous();
        const Tensor k = randn({1, 1, 1, D}, gen, DType::f64).expand({1, 1, T, D}).contiguous();
        const auto S = matmul(rope.forward(q), rope.forward(k).transpose(-1, -2)).to_vector<double>();  // (T, T)
        double spread = 0, variation = 0;
        for (int64_t m = 0; m < T; ++m)
            for (int64_t n = 0; n < T; ++n) {
                const int64_t m0 = m - std::min(m, n), n0 = n - std::min(m, n);  // same m − n, nearest the origin
                spread = std::max(spread, std::abs(S[m * T + n] - S[m0 * T + n0]));
                variation = std::max(variation, std::abs(S[m * T + n] - S[0]));
            }
        CHECK(spread < 1e-12);
        CHECK(variation > 1e-3);  // ... and does depend on it

        const GradcheckResult r = gradcheck(
            [&](const std::vector<Tensor>& in) { return rope.forward(in[0], offset); },
            {randn({1, 2, 3, D}, gen, DType::f64).requires_grad_()});
        CHECK_MESSAGE(r.ok, r.message);
    }
}

// The float32 rotation runs in whichever of its compiled forms the CPU takes (AVX-512, AVX2 or
// the baseline: cpu/fused.cpp). Each must give the bits of the plain loop below, each product
// and sum rounded to float on its own: over whole vectors and the tails after them (D/2 = 18,
// 64), on contiguous heads and on the (B, H, T, D) view of a (B, T, H, D) projection, and in
// the transpose that backward takes.
TEST_CASE("nn: RoPE in float32 gives the bits of a plain loop on every CPU") {
    for (const int64_t D : {36, 128}) {
        const int64_t B = 2, H = 3, T = 5, half = D / 2;
        Generator gen{uint64_t(D)};
        const Tensor cos = randn({T, D}, gen), sin = randn({T, D}, gen);
        const std::vector<float> c = cos.to_vector<float>(), sn = sin.to_vector<float>();
        for (const bool token_major : {false, true}) {
            CAPTURE(D);
            CAPTURE(token_major);
            const Tensor x = token_major ? randn({B, T, H, D}, gen).transpose(1, 2).requires_grad_()
                                         : randn({B, H, T, D}, gen).requires_grad_();
            const Tensor dy = randn({B, H, T, D}, gen);
            const Tensor y = gg::rope(x, cos, sin);
            y.backward(dy);
            // want(v, sign): the rotation (sign 1) or its transpose (sign −1) of v, row by row.
            const auto want = [&](const Tensor& v, float sign) {
                const std::vector<float> in = v.contiguous().to_vector<float>();
                std::vector<float> out(in.size());
                for (int64_t row = 0; row < B * H * T; ++row) {
                    const int64_t t = row % T;
                    const float* xr = &in[row * D];
                    for (int64_t i = 0; i < half; ++i) {
                        volatile float a = xr[i] * c[t * D + i], b = sign * xr[i + half] * sn[t * D + i];
                        out[row * D + i] = a - b;
                        volatile float e = xr[i + half] * c[t * D + i + half], f = sign * xr[i] * sn[t * D + i + half];
                        out[row * D + i + half] = e + f;
                    }
                }
                return out;
            };
            CHECK(y.contiguous().to_vector<float>() == want(x.detach(), 1.0f));
            CHECK(x.grad().contiguous().to_vector<float>() == want(dy, -1.0f));
        }
    }
}

TEST_CASE("nn: partial RoPE turns the first R = partial·D channels as a RoPE of size R and passes the rest") {
    Generator gen(16);
    const int64_t D = 16, T = 6, offset = 2;
    for (RopeScaling scaling : kAllScalings) {
        CAPTURE(rope_scaling_name(scaling));
        RopeOptions o = rope_options(scaling);
        o.partial = 0.25;  // Qwen3-Next's: 4 of 16 channels
        const RoPE partial(D, o);
        CHECK(partial.rotary_dim() == 4);
        // θ_c = base^(−2c/R), as Hugging Face computes inv_freq over the rotary dims.
        RopeOptions whole = o;
        whole.partial = 1;
        CHECK(partial.frequencies() == RoPE(4, whole).frequencies());
        const Tensor x = randn({1, 2, T, D}, gen, DType::f64);
        const Tensor y = partial.forward(x, offset);
        CHECK(max_abs_diff(y.narrow(-1, 0, 4), RoPE(4, whole).forward(x.narrow(-1, 0, 4).contiguous(), offset)) < 1e-12);
        CHECK(max_abs_diff(y.narrow(-1, 4, D - 4), x.narrow(-1, 4, D - 4)) == 0);
        CHECK(max_abs_diff(y.narrow(-1, 0, 4), x.narrow(-1, 0, 4)) > 1e-3);  // the first ones did turn
        const GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return partial.forward(in[0], offset); },
                                            {randn({1, 2, 3, D}, gen, DType::f64).requires_grad_()});
        CHECK_MESSAGE(r.ok, r.message);
    }
    RopeOptions odd;
    odd.partial = 0.3;  // 4.8 channels of 16: 4 turn
    CHECK(RoPE(16, odd).rotary_dim() == 4);
    odd.partial = 0.2;  // 3 channels of 16
    CHECK_THROWS_WITH_AS(RoPE(16, odd), doctest::Contains("turns 3 channels; need an even number ≥ 2"), std::invalid_argument);
    LMConfig c = small_lm();  // 4 heads of 4
    c.attn.rope_options.partial = 0.25;
    CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("partial_rotary_factor 0.250000 turns 1 of the head's 4 channels"),
                         std::invalid_argument);
    c.attn.rope_options.partial = 0;
    CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("partial_rotary_factor 0 is outside (0, 1]"), std::invalid_argument);
}

TEST_CASE("nn: a hybrid LM with partial RoPE on its full layers: float64 gradcheck of the attention's weights") {
    Generator gen(17);
    LMConfig c = small_lm();
    c.d_model = 16;
    c.attn.n_heads = 2;  // heads of 8: 4 channels turn
    c.attn.rope_options.partial = 0.5;
    c.attn.qk_norm = true;
    c.layer_types = {LayerType::linear_attention, LayerType::full_attention};
    GatedTransformerLM model(c);
    model.to(DType::f64);
    randomize(model, gen, 0.5);
    CHECK(model.blocks[1]->attn->rope()->rotary_dim() == 4);
    const Tensor ids = randint(0, c.vocab_size, {1, 6}, gen), targets = randint(0, c.vocab_size, {1, 6}, gen);
    GradcheckOptions options;
    options.full_jacobian_limit = 64;
    check_gradients(model, {}, [&](const std::vector<Tensor>&) { return model.forward(ids, targets).loss; },
                    only({"layers.1.attn.w_q.weight", "layers.1.attn.w_k.weight", "tok_emb.weight"}), options);
}

// ================================================================ Module

TEST_CASE("nn: Module train()/eval() propagate, zero_grad clears, to(dtype) converts every parameter") {
    LMConfig c = small_lm();
    c.n_experts = 2;
    c.positions = PositionEncoding::learned;
    manual_seed(51);
    GatedTransformerLM model(c);
    const std::vector<const Module*> nested = {&model,
                                               model.tok_emb.get(),
                                               model.pos_emb.get(),
                                               model.blocks[1].get(),
                                               model.blocks[1]->attn.get(),
                                               model.blocks[1]->attn->w_g.get(),
                                               model.blocks[0]->moe.get(),
                                               model.blocks[0]->moe->experts[1]->w3.get(),
                                               model.norm_f.get()};
    for (const Module* m : nested) CHECK(m->is_training());
    model.eval();
    for (const Module* m : nested) CHECK(!m->is_training());
    model.train();
    for (const Module* m : nested) CHECK(m->is_training());

    Generator gen(52);
    const Tensor ids = randint(0, c.vocab_size, {2, 6}, gen), targets = randint(0, c.vocab_size, {2, 6}, gen);
    model.forward(ids, targets).loss.backward();
    int with_grad = 0;
    for (const Tensor& p : model.parameters()) with_grad += p.grad().defined();
    CHECK(with_grad > int(model.parameters().size()) / 2);
    model.zero_grad();
    for (const auto& named : model.named_parameters()) CHECK_MESSAGE(!named.second.grad().defined(), named.first);

    std::vector<std::vector<double>> before;
    for (const Tensor& p : model.parameters()) before.push_back(p.to_vector<double>());
    model.to(DType::f64);
    size_t i = 0;
    for (const auto& [name, p] : model.named_parameters()) {
        const std::string param_name = name;  // doctest captures it in a lambda
        CAPTURE(param_name);
        CHECK(p.dtype() == DType::f64);
        CHECK(p.requires_grad());
        CHECK(p.is_leaf());
        CHECK(p.to_vector<double>() == before[i++]);  // f32 → f64 is exact
    }
    // The modules' own members were converted (not copies of them).
    CHECK(model.blocks[0]->attn->w_q->weight.dtype() == DType::f64);
    CHECK(model.blocks[1]->moe->experts[0]->w2->weight.dtype() == DType::f64);
    const LMOutput out = model.forward(ids, targets);
    CHECK(out.logits.dtype() == DType::f64);
    out.loss.backward();
    CHECK(model.tok_emb->weight.grad().dtype() == DType::f64);
    model.zero_grad();
    model.to(DType::f32);
    for (const Tensor& p : model.parameters()) CHECK(p.dtype() == DType::f32);
    CHECK(model.state_dict().size() == model.named_parameters().size() + model.named_buffers().size());
}

TEST_CASE("nn: SkipInit builds zero weights in its dtype and draws nothing; outside it the draws are the same") {
    LMConfig c;
    c.d_model = 32;
    c.n_layers = 2;
    c.attn.n_heads = 4;
    c.max_len = 16;
    {
        const SkipInit skip(DType::bf16);
        default_generator().manual_seed(7);
        const GatedTransformerLM model(c, DType::bf16);
        CHECK(SkipInit::active());
        for (const auto& named : model.named_parameters()) {
            const std::string& name = named.first;
            const Tensor& p = named.second;
            CAPTURE(name);
            CHECK(p.dtype() == DType::bf16);
            CHECK(p.requires_grad());
            if (!name.ends_with("norm1.weight") && !name.ends_with("norm2.weight") && !name.ends_with("norm_f.weight"))
                CHECK(amax(abs(p.to(DType::f32))).item() == 0);
        }
        // Nothing was drawn: the generator is where the seed put it.
        const double next = rand({1}).item();
        default_generator().manual_seed(7);
        CHECK(rand({1}).item() == next);
    }
    CHECK_FALSE(SkipInit::active());
    // Outside the scope the model draws as before: the same seed, the same weights, twice.
    default_generator().manual_seed(3);
    const GatedTransformerLM a(c);
    default_generator().manual_seed(3);
    const GatedTransformerLM b(c);
    CHECK(amax(abs(a.tok_emb->weight - b.tok_emb->weight)).item() == 0);
    CHECK(amax(abs(a.tok_emb->weight)).item() > 0);
}

// bfloat16: the storage type (tensor/bf16.h), bfloat16 tensors, every CPU backend entry
// against its float32 form, the bf16 GEMM, and the autocast policy (autograd/autocast.h).
#include <doctest/doctest.h>

#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>

#include "gatedgrad.h"
#include "tests/nn_check.h"

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

// ---------------------------------------------------------------- tensors

using namespace gg;

TEST_CASE("bfloat16 tensors: creation, conversions both ways, item, printing, views") {
    CHECK(zeros({2, 3}, DType::bf16).dtype() == DType::bf16);
    CHECK(ones({2}, DType::bf16).to_vector<double>() == std::vector<double>{1, 1});
    CHECK(full({1}, 257.0, DType::bf16).item() == 256.0);  // rounded once, to nearest even
    CHECK(scalar(0.1, DType::bf16).item() == double(round_to_bf16(0.1f)));
    Generator gen(3);
    const Tensor r = randn({64}, gen, DType::bf16);
    Generator again(3);
    const auto expected = randn({64}, again, DType::f32).to_vector<float>();
    const auto got = r.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == round_to_bf16(expected[i]));

    const Tensor x = from_vector(std::vector<float>{1.0f, 1.00390625f, -3.1415926f, 1e30f}, {2, 2});
    const Tensor h = x.to(DType::bf16);
    CHECK(h.to_vector<float>() == std::vector<float>{1.0f, 1.0f, -3.140625f, round_to_bf16(1e30f)});
    CHECK(h.to(DType::f64).to(DType::bf16).to_vector<float>() == h.to_vector<float>());  // exact widening
    const Tensor whole = from_vector(std::vector<float>{1.0f, -3.1415926f, 300.7f}, {3}).to(DType::bf16);
    CHECK(whole.to(DType::i64).to_vector<int64_t>() == std::vector<int64_t>{1, -3, 300});  // 300.7 is 300 in bf16
    const Tensor from_bits = from_vector(std::vector<bfloat16>{bfloat16(2.5f), bfloat16(-0.5f)}, {2});
    CHECK(from_bits.to_vector<double>() == std::vector<double>{2.5, -0.5});
    CHECK(from_bits.data<const bfloat16>()[1].bits == bfloat16(-0.5f).bits);
    CHECK_THROWS_AS(from_bits.data<const float>(), std::logic_error);

    // Views share the 2-byte storage; contiguous() copies through the strides.
    const Tensor t = h.t();
    CHECK(t.shares_storage(h));
    CHECK(t.contiguous().to_vector<float>() == std::vector<float>{1.0f, -3.140625f, 1.0f, round_to_bf16(1e30f)});
    CHECK(h.index({1, 0}).item() == -3.140625);

    std::ostringstream out;
    out << from_bits;
    CHECK(out.str() == "tensor([   2.5000,   -0.5000], shape=(2), dtype=bfloat16)");
}

// ---------------------------------------------------------------- CPU entries against float32

namespace {

// Each bfloat16 entry computes in float32 and rounds once, so on inputs that are already
// bfloat16 values it must give the float32 entry's result rounded to bfloat16. Two roundings
// of nearly equal float32 results can land on neighbouring bfloat16 values, one unit in the
// last place apart: with 8 significant bits that is at most 2^-7 of the value. So the
// tolerance is |bf16 − round(f32)| ≤ 2^-7 |round(f32)| + 2^-7 · 1e-3 · max|f32| (the second
// term for results near zero from cancellation, whose float32 sums may differ in the order of
// their terms; for most entries the results are identical and the tolerance is unused).
constexpr double kUlp = 1.0 / 128;

std::string bf16_mismatch(const Tensor& half, const Tensor& single) {
    if (half.dtype() != DType::bf16) return std::string("the bfloat16 entry returned ") + dtype_name(half.dtype());
    if (half.shape() != single.shape()) return "shapes " + shape_str(half.shape()) + " vs " + shape_str(single.shape());
    const auto h = half.to_vector<double>(), f = single.to(DType::bf16).to_vector<double>();
    double scale = 0;
    for (double v : single.to_vector<double>()) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < h.size(); ++i)
        if (!(std::abs(h[i] - f[i]) <= kUlp * std::abs(f[i]) + kUlp * 1e-3 * scale) && !(std::isnan(h[i]) && std::isnan(f[i])))
            return "element " + std::to_string(i) + ": bfloat16 " + std::to_string(h[i]) + ", float32 rounded " +
                   std::to_string(f[i]);
    return "";
}

using Entry = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Runs `entry` on bfloat16 copies of the float32 `inputs` and on the same values in float32
// (integer inputs pass unchanged), and compares every output. Inputs are made leaves that
// require grad, so an entry may return gradients too.
void check_entry(const std::string& name, const std::vector<Tensor>& inputs, const Entry& entry) {
    CAPTURE(name);
    std::vector<Tensor> half, single;
    for (const Tensor& x : inputs) {
        const bool floating = is_floating(x.dtype());
        half.push_back(floating ? x.to(DType::bf16).requires_grad_() : x);
        single.push_back(floating ? x.to(DType::bf16).to(DType::f32).requires_grad_() : x);
    }
    const std::vector<Tensor> h = entry(half), f = entry(single);
    REQUIRE(h.size() == f.size());
    for (size_t i = 0; i < h.size(); ++i) {
        CAPTURE(i);
        CHECK(bf16_mismatch(h[i], f[i]) == "");
    }
}

Tensor normal(const Shape& shape, uint64_t seed, double scale = 1) {
    Generator gen(seed);
    return randn(shape, gen) * scale;
}

}  // namespace

TEST_CASE("bfloat16 CPU entries equal their float32 form on bfloat16 inputs, rounded once") {
    NoGradGuard no_grad;
    const Tensor a = normal({5, 7}, 1), b = normal({5, 7}, 2), row = normal({7}, 3);
    const Tensor positive = abs(normal({5, 7}, 4)) + 0.1;
    using V = const std::vector<Tensor>&;
    check_entry("fill", {}, [](V) { return std::vector<Tensor>{full({3}, 0.3, DType::bf16)}; });
    // (A pair, not a structured binding: clang 14, which the sanitized build uses, cannot
    // capture a binding in a lambda.)
    for (const auto& op : std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>>{
             {"neg", neg}, {"exp", exp}, {"tanh", tanh}, {"sigmoid", sigmoid}, {"relu", relu}, {"silu", silu},
             {"gelu", gelu}, {"erf", erf}, {"abs", abs}})
        check_entry(op.first, {a}, [f = op.second](V x) { return std::vector<Tensor>{f(x[0])}; });
    for (const auto& op : std::vector<std::pair<const char*, Tensor (*)(const Tensor&)>>{{"log", log}, {"sqrt", sqrt}, {"rsqrt", rsqrt}})
        check_entry(op.first, {positive}, [f = op.second](V x) { return std::vector<Tensor>{f(x[0])}; });
    check_entry("pow", {positive}, [](V x) { return std::vector<Tensor>{pow(x[0], 1.5)}; });
    for (const auto& op : std::vector<std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)>>{
             {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}, {"maximum", maximum}, {"minimum", minimum},
             {"lt", lt}, {"ge", ge}, {"eq", eq}})
        check_entry(op.first, {a, b, row},
                    [f = op.second](V x) { return std::vector<Tensor>{f(x[0], x[1]), f(x[0], x[2])}; });
    check_entry("where", {a, b}, [](V x) { return std::vector<Tensor>{where(gt(x[0], x[1]), x[0], x[1])}; });
    check_entry("copy (strided)", {a}, [](V x) { return std::vector<Tensor>{x[0].t().contiguous()}; });
    check_entry("reduce", {normal({4, 300, 3}, 5)}, [](V x) {
        return std::vector<Tensor>{sum(x[0], {1}), amax(x[0], {1}), amin(x[0], {0, 2}), mean(x[0])};
    });
    const Tensor ids = from_vector(std::vector<int64_t>{4, 0, 4, 2}, {4});
    check_entry("embedding", {a, ids}, [](V x) { return std::vector<Tensor>{embedding(x[0], x[1])}; });
    check_entry("index_add", {a, ids, normal({4, 7}, 6)}, [](V x) { return std::vector<Tensor>{index_add(x[0], x[1], x[2])}; });
    const Tensor cols = from_vector(std::vector<int64_t>{6, 0, 3, 3, 1, 2, 5, 5, 0, 1}, {5, 2});
    check_entry("gather", {a, cols}, [](V x) { return std::vector<Tensor>{gather(x[0], 1, x[1])}; });
    check_entry("topk", {a}, [](V x) { return std::vector<Tensor>{topk(x[0], 3).first}; });
    check_entry("arange", {}, [](V) { return std::vector<Tensor>{arange(-1.0, 3.0, 0.1, DType::bf16)}; });
    // scatter_add_last, the backward of gather: repeated columns add up in float32 first.
    const Backend& be = backend(Device::CPU);
    const Tensor repeated = from_vector(std::vector<int64_t>{1, 1, 1, 0, 6, 6}, {2, 3});
    check_entry("scatter_add", {normal({2, 7}, 27), repeated, normal({2, 3}, 28, 0.01)}, [&](V x) {
        const Tensor out = x[0].clone();
        be.scatter_add_last(out.view_desc(), x[1].view_desc(), x[2].contiguous().view_desc());
        return std::vector<Tensor>{out};
    });
    // The optimiser steps take float32 master weights only, and say so.
    const Tensor p = zeros({3}, DType::bf16);
    CHECK_THROWS_WITH_AS(be.sgd_step({0.1, 0, 0}, p.view_desc(), p.view_desc(), View{nullptr, DType::bf16}),
                         doctest::Contains("bfloat16"), std::invalid_argument);
}

// A backend entry's operand: float32 values, rounded to bfloat16 for the bfloat16 call unless
// it is a statistic that stays float32 (attention's lse, RMSNorm's rstd) or not floating.
struct Operand {
    Tensor values;
    bool statistic = false;
};

// Calls a backend entry on bfloat16 operands and on float32 operands of the same values, and
// compares the outputs (of the given shapes) as bf16_mismatch does.
void check_backend_entry(const std::string& name, const std::vector<Operand>& inputs, const std::vector<Shape>& outputs,
                         const std::function<void(const std::vector<View>&, const std::vector<View>&)>& call) {
    CAPTURE(name);
    std::vector<Tensor> in_h, in_f, out_h, out_f;
    for (const Operand& op : inputs) {
        const bool round = op.values.dtype() == DType::f32 && !op.statistic;
        const Tensor h = round ? op.values.to(DType::bf16) : op.values.contiguous();
        in_h.push_back(h);
        in_f.push_back(round ? h.to(DType::f32) : h);
    }
    for (const Shape& shape : outputs) {
        out_h.push_back(Tensor::empty(shape, DType::bf16));
        out_f.push_back(Tensor::empty(shape, DType::f32));
    }
    const auto views = [](const std::vector<Tensor>& ts) {
        std::vector<View> v;
        for (const Tensor& t : ts) v.push_back(t.view_desc());
        return v;
    };
    call(views(in_h), views(out_h));
    call(views(in_f), views(out_f));
    for (size_t i = 0; i < outputs.size(); ++i) {
        CAPTURE(i);
        CHECK(bf16_mismatch(out_h[i], out_f[i]) == "");
    }
}

TEST_CASE("bfloat16 fused CPU entries, forward and backward, equal their float32 form") {
    NoGradGuard no_grad;
    const Backend& be = backend(Device::CPU);
    using V = const std::vector<Tensor>&;
    using Views = const std::vector<View>&;
    const int64_t R = 6, C = 33;
    const Tensor x = normal({R, C}, 7, 2.0), dy = normal({R, C}, 8);
    check_entry("softmax", {x}, [](V in) { return std::vector<Tensor>{softmax(in[0]), log_softmax(in[0], 0)}; });
    for (bool log : {false, true})
        check_backend_entry(log ? "log_softmax backward" : "softmax backward",
                            {{log ? log_softmax(x) : softmax(x)}, {dy}}, {{R, C}},
                            [&](Views i, Views o) { be.softmax_backward(o[0], i[0], i[1], R, C, log); });

    const Tensor targets = from_vector(std::vector<int64_t>{3, 0, -100, 32, 7, 7}, {R});
    check_entry("cross_entropy", {x, targets}, [](V in) { return std::vector<Tensor>{cross_entropy(in[0], in[1])}; });
    // The loss and its gradient from one call; an ignored row (target -100) gets zeros.
    check_backend_entry("cross_entropy with its gradient", {{x}, {targets}, {normal({R}, 9)}}, {{R}, {R, C}},
                        [&](Views i, Views o) { be.cross_entropy(o[0], o[1], i[0], i[1], i[2], -100); });

    const Tensor w = normal({C}, 10);
    check_entry("rms_norm", {x, w}, [](V in) { return std::vector<Tensor>{rms_norm(in[0], in[1], 1e-6)}; });
    const Tensor rstd = rsqrt(mean(x * x, {1}) + 1e-6);
    check_backend_entry("rms_norm backward", {{dy}, {x}, {w}, {rstd, true}}, {{R, C}, {C}}, [&](Views i, Views o) {
        be.rms_norm_backward(o[0], o[1], i[0], i[1], i[2], i[3], R, C);
    });

    const Tensor b = normal({R, C}, 11);
    check_entry("swiglu", {x, b}, [](V in) { return std::vector<Tensor>{swiglu(in[0], in[1])}; });
    check_backend_entry("swiglu backward", {{dy}, {x}, {b}}, {{R, C}, {R, C}}, [&](Views i, Views o) {
        be.swiglu_backward(o[0], o[1], i[0], i[1], i[2]);
    });
    check_entry("sigmoid_gate", {x, b}, [](V in) { return std::vector<Tensor>{sigmoid_gate(in[0], in[1])}; });
    check_backend_entry("sigmoid_gate backward", {{dy}, {x}, {b}}, {{R, C}, {R, C}}, [&](Views i, Views o) {
        be.sigmoid_gate_backward(o[0], o[1], i[0], i[1], i[2]);
    });

    // RoPE's constant (T, D) tables, each angle's cos and sin written at c and c + D/2.
    const int64_t T = 5, D = 8;
    std::vector<float> cos_v(T * D), sin_v(T * D);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < D; ++c) {
            const double angle = t * std::pow(100.0, -double(c % (D / 2)) / (D / 2));
            cos_v[t * D + c] = float(std::cos(angle)), sin_v[t * D + c] = float(std::sin(angle));
        }
    for (bool transpose : {false, true})  // transposed: backward
        check_backend_entry(transpose ? "rope backward" : "rope",
                            {{normal({2, 3, T, D}, 12)}, {from_vector(cos_v, {T, D})}, {from_vector(sin_v, {T, D})}},
                            {{2, 3, T, D}}, [&](Views i, Views o) { be.rope(o[0], i[0], i[1], i[2], transpose); });

    const int64_t B = 2, H = 4, Hkv = 2, Tq = 9, Dh = 8;
    const Tensor q = normal({B, H, Tq, Dh}, 13), k = normal({B, Hkv, Tq, Dh}, 14), v = normal({B, Hkv, Tq, Dh}, 15);
    for (bool causal : {true, false}) {
        const AttentionShape s{B, H, Hkv, Tq, Tq, Dh, causal, 0, 1 / std::sqrt(double(Dh))};
        check_backend_entry(causal ? "attention (causal, GQA)" : "attention", {{q}, {k}, {v}},
                            {{B, H, Tq, Dh}, {B, H, Tq}, {B, H, Tq, Tq}}, [&](Views i, Views o) {
                                // lse stays float32 (nn/attention.cpp): widen the bf16 call's back.
                                const Tensor lse = Tensor::empty({B, H, Tq});
                                be.attention_forward(s, o[0], lse.view_desc(), o[2], i[0], i[1], i[2], View{});
                                be.copy(o[1], lse.view_desc());
                            });
        Tensor lse;
        const Tensor out = nn::scaled_dot_product_attention(q, k, v, {causal}, nullptr, &lse);
        check_backend_entry(causal ? "attention backward (causal, GQA)" : "attention backward",
                            {{normal({B, H, Tq, Dh}, 16)}, {q}, {k}, {v}, {out}, {lse, true}},
                            {{B, H, Tq, Dh}, {B, Hkv, Tq, Dh}, {B, Hkv, Tq, Dh}}, [&](Views i, Views o) {
                                be.attention_backward(s, o[0], o[1], o[2], i[0], i[1], i[2], i[3], i[4], i[5], View{});
                            });
    }
    check_entry("sum_squares", {x}, [](V in) {
        const Tensor acc = zeros({}, DType::f64);
        const View x = in[0].contiguous().view_desc();
        backend(Device::CPU).sum_squares(acc.view_desc(), {&x, 1});
        return std::vector<Tensor>{acc.to(in[0].dtype())};  // the sum itself is float64
    });
}

TEST_CASE("bfloat16 attention forward writes every element of O and P, whatever its memory held") {
    // Its float32 outputs come from the caching allocator without zeros (Outputs::overwritten in
    // cpu/float32.h), and P is written by the kernel row by row. Blocks of their sizes are handed
    // back full of NaN first, and P starts as NaN, so that an element the kernel skips (a hidden
    // key, a row past a query block, a tile past a window) shows. P is the float32 kernel's,
    // rounded once: bit for bit.
    NoGradGuard no_grad;
    const Backend& be = backend(Device::CPU);
    const int64_t B = 1, H = 2, Hkv = 1, D = 8;
    struct Case {
        int64_t Tq, Tk;
        bool causal;
        int64_t window;
        ScoreFunction fn;
    };
    const ScoreFunction softmax = ScoreFunction::softmax;
    for (const Case& c : {Case{9, 9, true, 0, softmax}, Case{9, 9, true, 3, softmax}, Case{5, 8, false, 0, softmax},
                          Case{3, 11, true, 0, softmax}, Case{70, 70, true, 0, softmax}, Case{70, 70, true, 5, softmax},
                          Case{9, 9, true, 0, ScoreFunction::softmax1}, Case{70, 70, true, 4, ScoreFunction::sigmoid},
                          Case{9, 9, false, 0, ScoreFunction::softpick}}) {
        CAPTURE(c.Tq);
        CAPTURE(c.Tk);
        CAPTURE(c.window);
        CAPTURE(int(c.fn));
        const AttentionShape s{B, H, Hkv, c.Tq, c.Tk, D, c.causal, c.window, 1 / std::sqrt(double(D)), false, c.fn};
        const Tensor q = normal({B, H, c.Tq, D}, 21).to(DType::bf16), k = normal({B, Hkv, c.Tk, D}, 22).to(DType::bf16),
                     v = normal({B, Hkv, c.Tk, D}, 23).to(DType::bf16);
        for (const int64_t n : {B * H * c.Tq * D, B * H * c.Tq * c.Tk}) {
            const size_t bytes = size_t(n) * sizeof(float);
            std::vector<void*> blocks;
            for (int b = 0; b < 4; ++b) {
                blocks.push_back(be.allocate(bytes));
                std::fill_n(static_cast<float*>(blocks.back()), n, std::numeric_limits<float>::quiet_NaN());
            }
            for (void* block : blocks) be.deallocate(block, bytes);
        }
        const Tensor O = Tensor::empty({B, H, c.Tq, D}, DType::bf16),
                     P = full({B, H, c.Tq, c.Tk}, std::numeric_limits<double>::quiet_NaN(), DType::bf16),
                     lse = Tensor::empty({B, H, c.Tq});
        be.attention_forward(s, O.view_desc(), lse.view_desc(), P.view_desc(), q.view_desc(), k.view_desc(),
                             v.view_desc(), View{});
        const Tensor O_f = zeros({B, H, c.Tq, D}), P_f = zeros({B, H, c.Tq, c.Tk}), lse_f = zeros({B, H, c.Tq});
        be.attention_forward(s, O_f.view_desc(), lse_f.view_desc(), P_f.view_desc(), q.to(DType::f32).view_desc(),
                             k.to(DType::f32).view_desc(), v.to(DType::f32).view_desc(), View{});
        CHECK(bf16_mismatch(O, O_f) == "");
        CHECK(bf16_mismatch(P, P_f) == "");
        CHECK(P.to_vector<float>() == P_f.to(DType::bf16).to_vector<float>());
        CHECK(lse.to_vector<float>() == lse_f.to_vector<float>());
    }
}

TEST_CASE("bfloat16 GEMM: sbgemm's float32 sums against sgemm on the same bfloat16 values") {
    // Odd shapes, every transpose, a batch with padded strides and leading dimensions, alpha
    // and beta: C = alpha · op(A) op(B) + beta · C. Products of two bfloat16 values are exact
    // in float32, so the two differ only in the order of the float32 sums.
    const Backend& be = backend(Device::CPU);
    int cases = 0;
    for (const auto& mnk : {std::array<int64_t, 3>{1, 1, 1}, {3, 5, 7}, {17, 1, 33}, {33, 65, 129}, {64, 48, 80}})
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (double beta : {0.0, 0.25}) {
                    const int64_t M = mnk[0], N = mnk[1], K = mnk[2];
                    CAPTURE(M);
                    CAPTURE(N);
                    CAPTURE(K);
                    CAPTURE(ta);
                    CAPTURE(tb);
                    CAPTURE(beta);
                    const int64_t batch = 3, lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
                    const int64_t sa = (ta ? K : M) * lda + 5, sb = (tb ? N : K) * ldb + 1, sc = M * ldc + 2;
                    const Tensor A = normal({batch * sa}, 20).to(DType::bf16), B = normal({batch * sb}, 21).to(DType::bf16);
                    const Tensor C = normal({batch * sc}, 22).to(DType::bf16);
                    const Tensor A32 = A.to(DType::f32), B32 = B.to(DType::f32), C32 = C.to(DType::f32);
                    be.gemm(DType::bf16, batch, ta, tb, M, N, K, 0.5, A.view_desc().data, lda, sa, B.view_desc().data,
                            ldb, sb, beta, C.view_desc().data, ldc, sc);
                    be.gemm(DType::f32, batch, ta, tb, M, N, K, 0.5, A32.view_desc().data, lda, sa,
                            B32.view_desc().data, ldb, sb, beta, C32.view_desc().data, ldc, sc);
                    CHECK(bf16_mismatch(C, C32) == "");  // the padding between rows stays as it was, too
                    ++cases;
                }
    CHECK(cases == 40);
    // Through matmul: a transposed view, batch dims that broadcast, a vector.
    NoGradGuard no_grad;
    using V = const std::vector<Tensor>&;
    check_entry("matmul", {normal({2, 3, 9, 13}, 23), normal({11, 13}, 24), normal({3, 13, 5}, 25), normal({13}, 26)},
                [](V x) {
                    return std::vector<Tensor>{matmul(x[0], x[1].t()), matmul(x[0], x[2]), matmul(x[0], x[3])};
                });
}

// ---------------------------------------------------------------- autocast

TEST_CASE("autocast: matmul, Linear and attention run in bfloat16; softmax, norms, losses, sums in float32") {
    Generator gen(30);
    nn::Linear linear(8, 6);
    const Tensor x = randn({2, 5, 8}, gen), w = randn({8, 4}, gen), q = randn({1, 2, 5, 4}, gen);
    const Tensor h = x.to(DType::bf16), targets = zeros({2, 5}, DType::i64);
    {
        Autocast guard(DType::bf16);
        CHECK(autocast_dtype() == DType::bf16);
        CHECK(matmul(x, w).dtype() == DType::bf16);
        CHECK(linear.forward(x).dtype() == DType::bf16);  // bias too: the whole layer
        CHECK(nn::scaled_dot_product_attention(q, q, q).dtype() == DType::bf16);
        CHECK(softmax(h).dtype() == DType::f32);
        CHECK(log_softmax(h).dtype() == DType::f32);
        CHECK(logsumexp(h).dtype() == DType::f32);
        CHECK(cross_entropy(h, targets).dtype() == DType::f32);
        CHECK(rms_norm(h, ones({8}), 1e-6).dtype() == DType::f32);
        CHECK(sum(h).dtype() == DType::f32);
        CHECK(mean(h, {1}).dtype() == DType::f32);
        CHECK((h + x).dtype() == DType::f32);  // promote: the residual stream stays float32
        CHECK((x * h).dtype() == DType::f32);
        CHECK((h * h).dtype() == DType::bf16);
        CHECK(where(gt(x, h), h, x).dtype() == DType::f32);
        {
            Autocast off(DType::f32);
            CHECK(!autocast_dtype());
            CHECK(matmul(x, w).dtype() == DType::f32);
        }
        CHECK(matmul(x, w).dtype() == DType::bf16);
    }
    CHECK(!autocast_dtype());
    CHECK(matmul(x, w).dtype() == DType::f32);
    CHECK_THROWS_WITH_AS(h + x, doctest::Contains("dtype mismatch"), std::invalid_argument);  // no silent cast outside
    CHECK_THROWS_WITH_AS(Autocast{DType::f64}, doctest::Contains("float64"), std::invalid_argument);
}

TEST_CASE("autocast: gradients cross the casts, so float32 parameters get float32 gradients") {
    Generator gen(31);
    nn::Linear linear(16, 10);
    nn::RMSNorm norm(16);
    const Tensor x = randn({4, 3, 16}, gen), targets = randint(0, 10, {4, 3}, gen);
    const auto grads = [&](DType precision) {
        linear.weight.zero_grad(), linear.bias.zero_grad(), norm.weight.zero_grad();
        Tensor loss;
        {
            Autocast guard(precision);
            loss = cross_entropy(linear.forward(norm.forward(x)), targets);
        }
        CHECK(loss.dtype() == DType::f32);
        loss.backward();
        return std::vector<Tensor>{linear.weight.grad(), linear.bias.grad(), norm.weight.grad()};
    };
    const auto single = grads(DType::f32), mixed = grads(DType::bf16);
    for (size_t i = 0; i < single.size(); ++i) {
        CAPTURE(i);
        CHECK(mixed[i].dtype() == DType::f32);
        // The operands of each GEMM are rounded to 8 significant bits (2^-9 relative each way),
        // forward and backward: a few units of 2^-8 of the gradient's scale.
        const double scale = amax(abs(single[i])).item();
        CHECK(testing::max_abs_diff(mixed[i], single[i]) <= 4.0 / 256 * scale);
    }
}

TEST_CASE("the cast op: its backward casts the gradient back; gradcheck in float64 through float32") {
    const Tensor x = from_vector(std::vector<float>{0.1f, -2.3f, 7.7f}, {3}).requires_grad_();
    const Tensor y = x.to(DType::bf16);
    const Tensor seed = from_vector(std::vector<float>{1.5f, -0.25f, 3.0f}, {3}).to(DType::bf16);
    y.backward(seed);
    CHECK(x.grad().dtype() == DType::f32);
    CHECK(x.grad().to_vector<float>() == std::vector<float>{1.5f, -0.25f, 3.0f});  // exactly the seed, widened
    // d/dx of x → float32 → ·w → float64 is w. A float32 rounds at 2^-24 relative, so the
    // differences take a step of 1e-3 and a tolerance of 1e-4 (rounding / step, well above).
    Generator gen(32);
    const Tensor x64 = randn({4, 3}, gen, DType::f64).requires_grad_(), w = randn({3}, gen, DType::f64);
    GradcheckOptions options;
    options.eps = 1e-3, options.atol = 1e-4, options.rtol = 1e-4;
    const auto r = gradcheck([&](const std::vector<Tensor>& in) { return (in[0].to(DType::f32) * w.to(DType::f32)).to(DType::f64); },
                             {x64}, options);
    CHECK_MESSAGE(r.ok, r.message);
}

// ---------------------------------------------------------------- training

namespace {

// The tiny preset's model (d 64, 2 layers, 4 heads) on batches of 4 × 16 tokens, so that 200
// steps take seconds: the same architecture and optimiser, 1/16 of the tokens per step.
nn::TrainConfig tiny_run(DType precision, const std::string& out_dir = "") {
    nn::TrainConfig c = nn::TrainConfig::preset("tiny");
    c.batch_size = 4, c.seq_len = 16, c.model.max_len = 16, c.steps = 200, c.warmup = 20;
    c.eval_every = 0, c.eval_batches = 4, c.probe_every = 0, c.ckpt_minutes = 0, c.log_every = 0;
    c.precision = precision;
    c.out_dir = out_dir;
    return c;
}

double mean_loss(const nn::TrainResult& r, size_t last) {
    double sum = 0;
    for (size_t i = r.log.size() - last; i < r.log.size(); ++i) sum += r.log[i].loss;
    return sum / double(last);
}

}  // namespace

TEST_CASE("bf16 training of the tiny model tracks float32: the loss after 200 steps within 0.02 nats") {
    const auto data = testing::word_corpus(60);
    nn::Trainer single(tiny_run(DType::f32), data), mixed(tiny_run(DType::bf16), data);
    const nn::TrainResult f = single.run(true), h = mixed.run(true);
    REQUIRE(f.log.size() == 200);
    REQUIRE(h.log.size() == 200);
    // The master weights stay float32 and so do AdamW's moments.
    for (const Tensor& p : mixed.model().parameters()) CHECK(p.dtype() == DType::f32);
    // Same init, same batches: the curves differ only by the rounding of GEMM and attention
    // operands. Compared on the mean of the last 20 steps' losses (one batch's loss is noisy)
    // and on the validation loss of the same fixed batches.
    const double lf = mean_loss(f, 20), lh = mean_loss(h, 20);
    MESSAGE("mean loss of steps 181-200: f32 " << lf << ", bf16 " << lh << "; first step " << f.log[0].loss << " vs "
                                               << h.log[0].loss << "; validation " << f.final_val_loss << " vs "
                                               << h.final_val_loss);
    CHECK(lh < f.log[0].loss - 1.0);  // it learned
    CHECK(std::abs(lh - lf) <= 0.02);
    CHECK(std::abs(h.final_val_loss - f.final_val_loss) <= 0.02);
    CHECK(f.log[0].loss == doctest::Approx(h.log[0].loss).epsilon(0.01));
}

TEST_CASE("bf16 training: 10 steps + resume + 10 steps equals 20 steps, bit for bit") {
    namespace fs = std::filesystem;
    const auto data = testing::word_corpus(60);
    const fs::path dir = fs::temp_directory_path() / ("gatedgrad_test_bf16_resume_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    nn::TrainConfig c = tiny_run(DType::bf16, (dir / "resumed").string());
    c.steps = 20;
    nn::TrainConfig plain = tiny_run(DType::bf16);
    plain.steps = 20;
    nn::Trainer full_run(plain, data);
    const nn::TrainResult full = full_run.run(true);
    nn::Trainer first(c, data);
    first.run(true, 10);
    // The precision travels in the checkpoint's config: a config read back from it trains in bf16.
    nn::Trainer second(c, data);
    second.resume((dir / "resumed" / "model.safetensors").string());
    CHECK(second.config().precision == DType::bf16);
    const nn::TrainResult rest = second.run(true);
    REQUIRE(rest.log.size() == 10);
    for (size_t i = 0; i < 10; ++i) {
        CAPTURE(i);
        CHECK(rest.log[i].loss == full.log[10 + i].loss);  // exact, not approximate
        CHECK(rest.log[i].grad_norm == full.log[10 + i].grad_norm);
    }
    const auto pa = full_run.model().parameters(), pb = second.model().parameters();
    for (size_t i = 0; i < pa.size(); ++i) CHECK(pa[i].to_vector<float>() == pb[i].to_vector<float>());
    CHECK(nn::TrainConfig::from_json(c.to_json()).precision == DType::bf16);
    CHECK_THROWS_WITH_AS(nn::parse_precision("fp8"), doctest::Contains("f32, bf16"), std::invalid_argument);
    fs::remove_all(dir);
}

// ---------------------------------------------------------------- safetensors

TEST_CASE("safetensors: PyTorch's bfloat16 file loads with its bits, and ours round-trips") {
    // Written by tests/reference/make_bf16_fixture.py make: torch's own rounding of float32
    // values (ties, a carry, 1e-38, 3e38, -0, inf) to torch.bfloat16, and the same widened.
    const nn::NamedTensors file = nn::load_tensors("tests/reference/torch_bf16.safetensors");
    REQUIRE(file.size() == 2);
    const Tensor x = file[0].second, widened = file[1].second;
    CHECK(file[0].first == "x");
    CHECK(x.dtype() == DType::bf16);
    CHECK(x.shape() == Shape{3, 4});
    CHECK(x.to(DType::f32).to_vector<float>() == widened.to_vector<float>());
    // Our rounding of the float32 values the script started from gives torch's bits.
    const std::vector<float> values{1.0f, 1.00390625f, 1.01171875f, 1.9999999f, -3.1415926f, 0.1f, 257.0f, 259.0f,
                                    1e-38f, 3e38f, -0.0f, INFINITY};
    const bfloat16* bits = x.data<const bfloat16>();
    for (size_t i = 0; i < values.size(); ++i) {
        CAPTURE(i);
        CHECK(bits[i].bits == bfloat16(values[i]).bits);
    }

    namespace fs = std::filesystem;
    const std::string path = (fs::temp_directory_path() / ("gg_bf16_" + std::to_string(::getpid()) + ".safetensors")).string();
    nn::save_tensors(path, {{"x", x}, {"t", x.t()}});  // a transposed view is written row-major
    const nn::NamedTensors back = nn::load_tensors(path);
    CHECK(back[0].second.dtype() == DType::bf16);
    CHECK(back[0].second.to_vector<float>() == x.to_vector<float>());
    CHECK(back[1].second.to_vector<float>() == x.t().contiguous().to_vector<float>());
    fs::remove(path);
}

TEST_CASE("safetensors: export_model writes a bfloat16 copy; the checkpoint's master weights stay float32") {
    namespace fs = std::filesystem;
    nn::Linear linear(5, 3);
    const std::string path = (fs::temp_directory_path() / ("gg_export_" + std::to_string(::getpid()) + ".safetensors")).string();
    nn::export_model(linear, path, DType::bf16, {{"note", "bf16 copy"}});
    nn::Metadata metadata;
    const nn::NamedTensors file = nn::load_tensors(path, &metadata);
    CHECK(metadata.at("note") == "bf16 copy");
    REQUIRE(file.size() == 2);
    for (const auto& [name, t] : file) CHECK(t.dtype() == DType::bf16);
    CHECK(file[0].second.to_vector<float>() == linear.weight.to(DType::bf16).to_vector<float>());
    CHECK(fs::file_size(path) < 300);  // 18 values of 2 bytes and a short header (4 bytes each: 400)
    // Loading a bfloat16 file into the float32 model is refused, naming the dtypes.
    CHECK_THROWS_WITH_AS(nn::load(linear, path), doctest::Contains("bfloat16"), std::runtime_error);
    CHECK_THROWS_WITH_AS(nn::export_model(linear, path, DType::i64), doctest::Contains("int64"), std::invalid_argument);
    fs::remove(path);
}

TEST_CASE("safetensors: a bfloat16 file for PyTorch") {
    // tests/reference/make_bf16_fixture.py check runs this with GG_BF16_FOR_TORCH set and
    // compares the bits torch reads with torch's own rounding of y_as_f32.
    const std::vector<float> values{1.0f, 1.00390625f, 1.01171875f, -2.0f, 0.3f, 1e-30f, 65504.0f, -1e20f};
    const Tensor y32 = from_vector(values, {2, 4});
    const char* target = std::getenv("GG_BF16_FOR_TORCH");
    namespace fs = std::filesystem;
    const std::string path = target ? target : (fs::temp_directory_path() / ("gg_torch_" + std::to_string(::getpid()) + ".safetensors")).string();
    nn::save_tensors(path, {{"y", y32.to(DType::bf16)}, {"y_as_f32", y32}}, {{"from", "gatedgrad"}});
    const nn::NamedTensors back = nn::load_tensors(path);
    CHECK(back[0].second.dtype() == DType::bf16);
    CHECK(back[0].second.to_vector<float>() == y32.to(DType::bf16).to_vector<float>());
    if (!target) fs::remove(path);
}

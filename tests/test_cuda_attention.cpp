// test_cuda_attention.cpp — the fused attention kernels (cuda/attention_forward.cu,
// cuda/attention_backward.cu) against the CPU table on the same inputs: O, lse and probs
// forward; dQ, dK, dV backward, from the CPU's O and lse so that each direction is checked on
// its own. Every case runs in the CUDA emulator and, where one answers, on the GPU
// (tests/cuda_targets.h).
//
// The emulator switches fibers at every barrier and shuffle, so the shapes stay small; the
// case tagged "bench" (T = 128, D = 64) is skipped by default: run it with --no-skip.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/kernels.h"
#include "nn/attention.h"
#include "tensor/random.h"
#include "tensor/tensor.h"
#include "tests/check.h"
#include "tests/cuda_targets.h"

using namespace gg;
using gg::testing::cuda_targets;
using gg::testing::CudaTarget;
using gg::testing::mismatch;

namespace {

struct Case {
    int64_t B, H, Hkv, Tq, Tk, D;
    bool causal;
    int64_t window = 0;
    bool exclude_self = false;
    ScoreFunction score_fn = ScoreFunction::softmax;
};

struct Inputs {
    AttentionShape shape;
    Tensor Q, K, V, dO;  // (B, H, Tq, D), (B, Hkv, Tk, D) twice, (B, H, Tq, D)
    Tensor sink;         // (H) the sink function's slot logits, in lse's dtype
};

Inputs make_inputs(const Case& c, DType dtype, uint64_t seed) {
    Generator gen(seed);
    const double scale = 1 / std::sqrt(double(std::max<int64_t>(c.D, 1)));
    const AttentionShape s{c.B, c.H, c.Hkv, c.Tq, c.Tk, c.D, c.causal, c.window, scale, c.exclude_self, c.score_fn};
    return {s,
            randn({c.B, c.H, c.Tq, c.D}, gen, dtype),
            randn({c.B, c.Hkv, c.Tk, c.D}, gen, dtype),
            randn({c.B, c.Hkv, c.Tk, c.D}, gen, dtype),
            randn({c.B, c.H, c.Tq, c.D}, gen, dtype),
            randn({c.H}, gen, dtype == DType::bf16 ? DType::f32 : dtype)};
}

// The CPU's table, as a target like the CUDA ones, for the references.
const CudaTarget& cpu() {
    static const CudaTarget target{"cpu", &backend(Device::CPU), Device::CPU};
    return target;
}

// Each entry on target t: the inputs copied to its device, the results left there.
struct Forward {
    Tensor O, lse, probs;
};
Forward run_forward(const CudaTarget& t, const Inputs& in, bool with_probs) {
    const AttentionShape& s = in.shape;
    const DType dtype = in.Q.dtype(), lse_dtype = dtype == DType::bf16 ? DType::f32 : dtype;
    Forward f{Tensor::empty({s.B, s.H, s.Tq, s.D}, dtype, t.device),
              Tensor::empty({s.B, s.H, s.Tq}, lse_dtype, t.device), Tensor()};
    View probs{nullptr, dtype};
    if (with_probs) {
        f.probs = Tensor::empty({s.B, s.H, s.Tq, s.Tk}, dtype, t.device);
        probs = f.probs.view_desc();
    }
    t.table->attention_forward(s, f.O.view_desc(), f.lse.view_desc(), probs, t.put(in.Q).view_desc(),
                               t.put(in.K).view_desc(), t.put(in.V).view_desc(),
                               in.sink.defined() ? t.put(in.sink).view_desc() : View{});
    return f;
}

struct Backward {
    Tensor dQ, dK, dV;
};
Backward run_backward(const CudaTarget& t, const Inputs& in, const Forward& f) {
    Backward g{Tensor::empty(in.Q.shape(), in.Q.dtype(), t.device), Tensor::empty(in.K.shape(), in.K.dtype(), t.device),
               Tensor::empty(in.V.shape(), in.V.dtype(), t.device)};
    t.table->attention_backward(in.shape, g.dQ.view_desc(), g.dK.view_desc(), g.dV.view_desc(),
                                t.put(in.dO).view_desc(), t.put(in.Q).view_desc(), t.put(in.K).view_desc(),
                                t.put(in.V).view_desc(), t.put(f.O).view_desc(), t.put(f.lse).view_desc(), View{});
    return g;
}

// The CUDA kernels give what the CPU gives on this case: each CHECK prints the first
// difference (relative above 1, absolute below).
void check_case(const Case& c, DType dtype) {
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    const Inputs in = make_inputs(c, dtype, 17);
    const Forward want = run_forward(cpu(), in, true);
    const Backward want_grad = run_backward(cpu(), in, want);
    for (const CudaTarget& t : cuda_targets()) {
        INFO("on the ", t.name);
        const Forward got = run_forward(t, in, true);
        CHECK(mismatch(got.O, want.O.to_vector<double>(), tol) == "");
        CHECK(mismatch(got.lse, want.lse.to_vector<double>(), tol) == "");
        CHECK(mismatch(got.probs, want.probs.to_vector<double>(), tol) == "");
        const Backward got_grad = run_backward(t, in, want);
        CHECK(mismatch(got_grad.dQ, want_grad.dQ.to_vector<double>(), tol) == "");
        CHECK(mismatch(got_grad.dK, want_grad.dK.to_vector<double>(), tol) == "");
        CHECK(mismatch(got_grad.dV, want_grad.dV.to_vector<double>(), tol) == "");
    }
}

void check_cases(const std::vector<Case>& cases, const std::vector<DType>& dtypes = {DType::f32, DType::f64}) {
    for (const Case& c : cases)
        for (DType dtype : dtypes) {
            INFO("B ", c.B, ", H ", c.H, ", Hkv ", c.Hkv, ", Tq ", c.Tq, ", Tk ", c.Tk, ", D ", c.D, ", causal ",
                 c.causal, ", window ", c.window, ", exclude_self ", c.exclude_self, ", ", dtype_name(dtype), ", ",
                 nn::score_function_name(c.score_fn));
            check_case(c, dtype);
        }
}

bool same_bits(const Tensor& a_anywhere, const Tensor& b_anywhere) {
    const Tensor a = a_anywhere.to(Device::CPU).contiguous(), b = b_anywhere.to(Device::CPU).contiguous();
    const size_t n = size_t(a.numel()) * dtype_size(a.dtype());
    return a.numel() == b.numel() && std::memcmp(a.view_desc().data, b.view_desc().data, n) == 0;
}

}  // namespace

// Tiles are 32 queries by 32 keys: T = 1, 5, 17 fit one tile, 33 and 70 cross into more.
TEST_CASE("cuda attention: causal and full masks, odd sizes and head sizes") {
    check_cases({
        {1, 1, 1, 1, 1, 1, true},
        {2, 2, 2, 5, 5, 8, true},
        {1, 2, 2, 17, 17, 16, true},
        {1, 2, 2, 33, 33, 3, true},
        {2, 1, 1, 33, 33, 33, true},
        {1, 2, 2, 17, 17, 16, false},
        {1, 1, 1, 33, 33, 8, false},
        {2, 2, 2, 5, 5, 1, false},
    });
}

TEST_CASE("cuda attention: sliding windows and exclude_self") {
    check_cases({
        {1, 2, 2, 17, 17, 8, true, 1},
        {1, 2, 2, 33, 33, 8, true, 3},
        {1, 2, 2, 17, 17, 8, true, 100},  // wider than T: the plain causal mask
        {1, 1, 1, 33, 33, 5, false, 4},   // without causal the window looks both ways
        {1, 2, 2, 33, 33, 8, true, 0, true},
        {1, 2, 2, 17, 17, 8, true, 3, true},
        {1, 1, 1, 70, 70, 8, true, 20},  // the band leaves key tile 0 behind from query 52 on
        {1, 2, 1, 70, 70, 8, false, 20},
    });
}

TEST_CASE("cuda attention: grouped-query heads and a KV cache") {
    check_cases({
        {1, 4, 4, 17, 17, 8, true},
        {1, 4, 2, 33, 33, 3, true},
        {2, 4, 1, 17, 17, 16, true, 5},
        {1, 4, 2, 5, 37, 16, true},          // Tq < Tk: queries at positions 32..36
        {1, 4, 1, 1, 70, 8, true},           // decoding one token against a long cache
        {1, 2, 2, 1, 70, 8, true, 20},
        {1, 2, 1, 1, 40, 8, false},
        {1, 2, 2, 5, 9, 8, true, 0, true},
        {1, 2, 2, 40, 75, 8, true},          // two query tiles against three key tiles
    });
}

// The same masks and shapes with the other score functions (tensor/score_functions.h): the slot
// of softmax1 and sink in the online softmax, sigmoid's weights without a sum, softpick's
// rectified terms and its sum of their absolute values; backward from each one's lse.
TEST_CASE("cuda attention: every score function, with masks, GQA and a KV cache") {
    for (ScoreFunction f : {ScoreFunction::softmax1, ScoreFunction::sink, ScoreFunction::sigmoid,
                            ScoreFunction::softpick})
        check_cases({
            {1, 2, 2, 17, 17, 8, true, 0, false, f},
            {2, 4, 2, 33, 33, 3, true, 0, false, f},   // GQA, D not a multiple of the vector
            {1, 2, 1, 70, 70, 8, true, 20, false, f},  // a window that leaves key tile 0 behind
            {1, 2, 2, 33, 33, 8, true, 3, true, f},    // exclude_self
            {1, 4, 2, 5, 37, 16, true, 0, false, f},   // a KV cache: queries at positions 32..36
            {1, 2, 1, 1, 70, 8, true, 0, false, f},    // decoding one token
            {1, 2, 2, 40, 40, 64, false, 9, false, f}, // no causal mask, a window both ways
        });
}

TEST_CASE("cuda attention: the largest head sizes, where every lane holds the most columns") {
    check_cases({{1, 2, 1, 33, 33, 128, true}, {1, 1, 1, 20, 40, 100, false, 9}}, {DType::f32});
    check_cases({{1, 2, 1, 33, 33, 64, true}, {1, 1, 1, 20, 40, 50, false, 9}}, {DType::f64});
}

TEST_CASE("cuda attention: empty dims launch nothing and leave dK, dV zero where no query looks") {
    check_cases({
        {0, 2, 2, 5, 5, 8, true},
        {1, 2, 1, 0, 6, 8, true},  // no query: dK = dV = 0
        {1, 2, 2, 3, 3, 0, true},  // D = 0: lse is still log(#visible keys)
    });
}

TEST_CASE("cuda attention: two runs give the same bits") {
    for (const CudaTarget& t : cuda_targets())
        for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {  // bf16: the tensor-core kernels
            INFO("on the ", t.name, ", ", dtype_name(dtype));
            const Inputs in = make_inputs({2, 4, 2, 33, 40, 16, true, 9}, dtype, 3);
            const Forward a = run_forward(t, in, true);
            const Forward b = run_forward(t, in, true);
            CHECK(same_bits(a.O, b.O));
            CHECK(same_bits(a.lse, b.lse));
            CHECK(same_bits(a.probs, b.probs));
            const Backward ga = run_backward(t, in, a);
            const Backward gb = run_backward(t, in, a);
            CHECK(same_bits(ga.dQ, gb.dQ));
            CHECK(same_bits(ga.dK, gb.dK));
            CHECK(same_bits(ga.dV, gb.dV));
        }
}

namespace {

// x's values in a (B, heads, T, D) view of a NaN-filled (B, T, heads + 1, D) buffer: the heads
// of a projection (B, T, ·) split by view and transpose, each row of D at stride (heads + 1)·D,
// one head's width of NaN before them (the buffer is returned alongside, to see that it stays).
struct SplitHeads {
    Tensor buffer, heads;
};
SplitHeads split_heads(const Tensor& x, Device device = Device::CPU) {
    const int64_t B = x.size(0), heads = x.size(1), T = x.size(2), D = x.size(3);
    const Tensor buffer = full({B, T, heads + 1, D}, std::nan(""), x.dtype(), device);
    const Tensor view = buffer.narrow(2, 1, heads).transpose(1, 2);  // (B, heads, T, D)
    view.copy_(x.to(device));
    return {buffer, view};
}
// Whether the NaN head of a result's buffer is still all NaN: nothing was written outside the view.
bool gap_untouched(const SplitHeads& x) {
    const std::vector<double> gap = x.buffer.narrow(2, 0, 1).to_vector<double>();
    return std::ranges::all_of(gap, [](double v) { return std::isnan(v); });
}

// Each entry on operands and results laid out as split heads gives what the CPU gives on
// contiguous ones, and leaves the NaN around them untouched.
void check_split_heads(const Case& c, DType dtype, const CudaTarget& t) {
    INFO("B ", c.B, ", H ", c.H, ", Hkv ", c.Hkv, ", Tq ", c.Tq, ", Tk ", c.Tk, ", D ", c.D, ", ", dtype_name(dtype),
         ", on the ", t.name);
    const double tol = dtype == DType::f32 ? 1e-5 : 1e-12;
    const Inputs in = make_inputs(c, dtype, 5);
    const Forward want = run_forward(cpu(), in, false);
    const Backward want_grad = run_backward(cpu(), in, want);

    const auto split = [&](const Tensor& x) { return split_heads(x, t.device); };
    const SplitHeads Q = split(in.Q), K = split(in.K), V = split(in.V), dO = split(in.dO);
    const auto result_like = [&](const Tensor& x) { return split(zeros(x.shape(), dtype)); };
    const SplitHeads O = result_like(in.Q), dQ = result_like(in.Q), dK = result_like(in.K), dV = result_like(in.V);
    const Tensor lse = Tensor::empty({c.B, c.H, c.Tq}, dtype, t.device);
    t.table->attention_forward(in.shape, O.heads.view_desc(), lse.view_desc(), View{nullptr, dtype}, Q.heads.view_desc(),
            K.heads.view_desc(), V.heads.view_desc(), View{});
    CHECK(mismatch(O.heads, want.O.to_vector<double>(), tol) == "");
    CHECK(mismatch(lse, want.lse.to_vector<double>(), tol) == "");
    t.table->attention_backward(in.shape, dQ.heads.view_desc(), dK.heads.view_desc(), dV.heads.view_desc(),
                                dO.heads.view_desc(), Q.heads.view_desc(), K.heads.view_desc(), V.heads.view_desc(),
                                O.heads.view_desc(), lse.view_desc(), View{});
    CHECK(mismatch(dQ.heads, want_grad.dQ.to_vector<double>(), tol) == "");
    CHECK(mismatch(dK.heads, want_grad.dK.to_vector<double>(), tol) == "");
    CHECK(mismatch(dV.heads, want_grad.dV.to_vector<double>(), tol) == "");
    for (const SplitHeads* result : {&O, &dQ, &dK, &dV}) CHECK(gap_untouched(*result));
}

}  // namespace

TEST_CASE("attention on the CPU and the CUDA targets: heads split from a projection are read and written in place") {
    const std::vector<Case> cases{
        {2, 2, 2, 17, 17, 8, true},
        {1, 4, 2, 33, 33, 3, true},           // D not a multiple of the vector: one value at a time
        {2, 4, 1, 5, 37, 16, true, 0, true},  // GQA, a KV cache, exclude_self
        {1, 2, 2, 70, 70, 8, false, 20},
    };
    for (const Case& c : cases)
        for (DType dtype : {DType::f32, DType::f64}) {
            check_split_heads(c, dtype, cpu());
            for (const CudaTarget& t : cuda_targets()) check_split_heads(c, dtype, t);
        }
}

TEST_CASE("cuda attention: a head size beyond the kernels' registers is a clear error") {
    for (const CudaTarget& t : cuda_targets()) {
        INFO("on the ", t.name);
        for (const auto& [dtype, D, limit] : {std::tuple{DType::f32, 129, "(128)"}, std::tuple{DType::f64, 65, "(64)"}}) {
            const Inputs in = make_inputs({1, 1, 1, 2, 2, D, true}, dtype, 1);
            const std::string what = "head size D = " + std::to_string(D);
            const std::string forward_error = "attention_forward: " + what +
                                              " is more than the CUDA kernels support in " + dtype_name(dtype) + " " +
                                              limit;
            CHECK_THROWS_WITH_AS(run_forward(t, in, false),
                                 doctest::Contains(forward_error.c_str()), std::invalid_argument);
            const Forward f{Tensor::empty({1, 1, 2, D}, dtype, t.device), Tensor::empty({1, 1, 2}, dtype, t.device), Tensor()};
            const std::string backward_error = "attention_backward: " + what;
            CHECK_THROWS_WITH_AS(run_backward(t, in, f),
                                 doctest::Contains(backward_error.c_str()), std::invalid_argument);
        }
    }
}

// ---- bf16 on the tensor cores (cuda/attention_forward_mma.cu, cuda/attention_backward_mma.cu) ----

namespace {

// Attention in double on the values bf16 inputs hold (softmax, or softmax1 and sink with their
// slot), by the CPU's rule of which keys a query sees, with each output element's sum of its
// terms' magnitudes (O_mag_i = Σ_j P_ij |v_j|, dV_mag_j = Σ_i P_ij |dO_i|,
// dQ_mag_i = scale Σ_j |dS_ij| |k_j|, dK_mag_j = scale Σ_i |dS_ij| |q_i|).
// The tensor-core kernels round every term to bf16 on its way into the tensor cores — P for O
// and dV, P and then dS for dQ and dK — and each rounding moves it by at most u = 2⁻⁸ of itself
// (bf16 has 8 significant bits), so their error is at most that many u of the sum, plus u of
// the result for its own rounding. The backward takes O rounded to bf16, as the kernels get it.
struct Exact {
    std::vector<double> O, lse, O_mag, dQ, dK, dV, dQ_mag, dK_mag, dV_mag;
};
Exact exact_attention(const Inputs& in) {
    const AttentionShape& s = in.shape;
    const std::vector<double> Q = in.Q.to_vector<double>(), K = in.K.to_vector<double>(),
                              V = in.V.to_vector<double>(), dO = in.dO.to_vector<double>();
    const int64_t D = s.D;
    Exact e;
    for (auto* x : {&e.O, &e.O_mag, &e.dQ, &e.dQ_mag}) x->assign(Q.size(), 0.0);
    for (auto* x : {&e.dK, &e.dV, &e.dK_mag, &e.dV_mag}) x->assign(K.size(), 0.0);
    e.lse.assign(size_t(s.B * s.H * s.Tq), 0.0);
    for (int64_t bh = 0; bh < s.B * s.H; ++bh) {
        const int64_t bhk = bh / s.H * s.Hkv + bh % s.H / (s.H / s.Hkv);
        for (int64_t i = 0; i < s.Tq; ++i) {
            const int64_t pos = s.Tk - s.Tq + i, row = (bh * s.Tq + i) * D;
            int64_t last = s.causal ? std::min(pos, s.Tk - 1) : s.Tk - 1;
            if (s.exclude_self && pos > 0) last = pos - 1;
            const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
            std::vector<double> p(size_t(std::max<int64_t>(last - first + 1, 0)));
            // The slot of softmax1 and sink: one more term of logit c and value 0.
            const double c = s.score_fn == ScoreFunction::softmax1 ? 0
                             : s.score_fn == ScoreFunction::sink   ? in.sink.to_vector<double>()[bh % s.H]
                                                                   : -INFINITY;
            double m = c, l = 0;
            for (int64_t j = first; j <= last; ++j) {
                double dot = 0;
                for (int64_t d = 0; d < D; ++d) dot += Q[row + d] * K[(bhk * s.Tk + j) * D + d];
                m = std::max(m, p[j - first] = dot * s.scale);
            }
            if (std::isfinite(c)) l = std::exp(c - m);
            for (double& x : p) l += x = std::exp(x - m);
            e.lse[bh * s.Tq + i] = l == 0 ? -INFINITY : m + std::log(l);
            std::vector<double> O_rounded(D);
            for (int64_t d = 0; d < D; ++d) {
                for (int64_t j = first; j <= last; ++j) {
                    const double v = V[(bhk * s.Tk + j) * D + d], w = p[j - first] / l;
                    e.O[row + d] += w * v;
                    e.O_mag[row + d] += w * std::abs(v);
                }
                O_rounded[d] = round_to_bf16(float(e.O[row + d]));
            }
            double delta = 0;
            for (int64_t d = 0; d < D; ++d) delta += dO[row + d] * O_rounded[d];
            for (int64_t j = first; j <= last; ++j) {
                const int64_t key = (bhk * s.Tk + j) * D;
                const double w = p[j - first] / l;
                double dp = 0;
                for (int64_t d = 0; d < D; ++d) dp += dO[row + d] * V[key + d];
                const double ds = w * (dp - delta) * s.scale;
                for (int64_t d = 0; d < D; ++d) {
                    e.dV[key + d] += w * dO[row + d];
                    e.dV_mag[key + d] += w * std::abs(dO[row + d]);
                    e.dQ[row + d] += ds * K[key + d];
                    e.dQ_mag[row + d] += std::abs(ds * K[key + d]);
                    e.dK[key + d] += ds * Q[row + d];
                    e.dK_mag[key + d] += std::abs(ds * Q[row + d]);
                }
            }
        }
    }
    return e;
}

// "" when every element of got is want's (infinities included) or within bound(k) of it; else
// the first that is not.
template <class Bound>
std::string mismatch_within(const Tensor& got, const std::vector<double>& want, const Bound& bound) {
    const std::vector<double> g = got.to_vector<double>();
    for (size_t k = 0; k < want.size(); ++k)
        if (!(g[k] == want[k] || std::abs(g[k] - want[k]) <= bound(k)))
            return "element " + std::to_string(k) + ": " + std::to_string(g[k]) + ", want " + std::to_string(want[k]) +
                   " ± " + std::to_string(bound(k));
    return "";
}
// The bound of a bf16 output whose terms went through `roundings` bf16 roundings (see Exact):
// (roundings + 1) u mag + u |want| + 10⁻⁵, one u of mag and 10⁻⁵ more than the worst case, for
// the f32 sums and exponentials.
std::string bf16_mismatch(const Tensor& got, const std::vector<double>& want, const std::vector<double>& mag,
                          int roundings) {
    return mismatch_within(got, want, [&](size_t k) {
        return std::ldexp((roundings + 1) * mag[k] + std::abs(want[k]), -8) + 1e-5;
    });
}

// A bf16 tensor of the given values, rounded.
Tensor bf16_tensor(const std::vector<double>& values, const Shape& shape) {
    std::vector<bfloat16> bits(values.begin(), values.end());
    return from_vector(bits, shape);
}

// The tensor-core kernels against Exact: O and lse from the forward; dQ, dK, dV from the
// backward given Exact's O (rounded to bf16) and lse, so that each direction is checked alone.
void check_bf16_case(const Case& c, const CudaTarget& t) {
    INFO("B ", c.B, ", H ", c.H, ", Hkv ", c.Hkv, ", Tq ", c.Tq, ", Tk ", c.Tk, ", D ", c.D, ", causal ", c.causal,
         ", window ", c.window, ", exclude_self ", c.exclude_self, ", ", nn::score_function_name(c.score_fn),
         ", on the ", t.name);
    const Inputs in = make_inputs(c, DType::bf16, 29);
    const Exact want = exact_attention(in);
    const AttentionShape& s = in.shape;
    const Forward f = run_forward(t, in, false);
    CHECK(bf16_mismatch(f.O, want.O, want.O_mag, 1) == "");
    // lse stays f32: its scores are exact products of bf16 summed in f32.
    const auto lse_bound = [&](size_t k) { return 1e-5 * std::max(1.0, std::abs(want.lse[k])); };
    CHECK(mismatch_within(f.lse, want.lse, lse_bound) == "");
    const Forward exact{bf16_tensor(want.O, {s.B, s.H, s.Tq, s.D}),
                        from_vector(std::vector<float>(want.lse.begin(), want.lse.end()), {s.B, s.H, s.Tq}), Tensor()};
    const Backward g = run_backward(t, in, exact);
    CHECK(bf16_mismatch(g.dQ, want.dQ, want.dQ_mag, 2) == "");
    CHECK(bf16_mismatch(g.dK, want.dK, want.dK_mag, 2) == "");
    CHECK(bf16_mismatch(g.dV, want.dV, want.dV_mag, 1) == "");
}

}  // namespace

// Head sizes 16, 32, 64, 128 take the tensor-core kernels; 64-row tiles: 70 and 75 rows cross
// into a second tile that ends early.
TEST_CASE("cuda attention bf16 on the tensor cores: causal, full, windows, against double") {
    for (const Case& c : std::vector<Case>{
             {1, 2, 2, 70, 70, 64, true},
             {1, 2, 1, 33, 33, 32, false},          // GQA, no mask at all
             {1, 1, 1, 70, 70, 16, true, 20},        // queries 64..69 see keys 45..69: two edge tiles
             {1, 2, 1, 200, 200, 16, true, 20},      // from query 83 on the band leaves key tile 0 behind
             {2, 4, 2, 9, 9, 16, false, 4},          // a window both ways
             {1, 2, 2, 17, 17, 16, true, 3, true},   // exclude_self
             {1, 2, 2, 40, 75, 128, true},           // Tq < Tk: a KV cache, every lane's most columns
             {1, 4, 1, 1, 70, 32, true},             // decoding one token, MQA
             {1, 1, 1, 70, 40, 32, true},            // Tq > Tk: the first 30 queries see no key
             {1, 2, 1, 0, 6, 16, true},              // no query: dK = dV = 0
         })
        for (const CudaTarget& t : cuda_targets()) check_bf16_case(c, t);
}

// softmax1 and sink on the tensor cores: the slot's term starts each row's online softmax.
TEST_CASE("cuda attention bf16 on the tensor cores: softmax1 and sink, against double") {
    for (ScoreFunction f : {ScoreFunction::softmax1, ScoreFunction::sink})
        for (const Case& c : std::vector<Case>{
                 {1, 2, 2, 70, 70, 64, true, 0, false, f},
                 {1, 4, 2, 40, 75, 32, true, 20, false, f},  // GQA, a KV cache, a window
                 {1, 2, 2, 17, 17, 16, true, 3, true, f},    // exclude_self
             })
            for (const CudaTarget& t : cuda_targets()) check_bf16_case(c, t);
}

TEST_CASE("cuda attention bf16: many key/value and query tiles through the cp.async stages, odd row counts") {
    // The tiles stream through two stages of shared memory by cp.async, the next one in flight
    // while the warps work on this one; a last tile of 3 rows (131 = 2 · 64 + 3) is zero-filled
    // by copies that read nothing. Forward and dQ stream 3 to 4 key tiles, dK/dV 3 query tiles
    // of each of 2 query heads, causal and full, D = 64 and 32.
    for (const Case& c : std::vector<Case>{
             {1, 1, 1, 131, 131, 64, false},
             {1, 2, 1, 131, 197, 32, true},
         })
        for (const CudaTarget& t : cuda_targets()) check_bf16_case(c, t);
}

namespace {

// What the SIMT kernels give on bf16 inputs: they compute in f32 and round once, so exactly
// the f32 kernels' results on the same values, rounded (lse stays f32); the backward from that
// O and lse. The tensor-core kernels round P first, so their bits differ from these.
struct Results {
    Forward f;
    Backward g;
};
Results simt_reference(const CudaTarget& t, const Inputs& in) {
    const Inputs in32{in.shape, in.Q.to(DType::f32), in.K.to(DType::f32), in.V.to(DType::f32),
                      in.dO.to(DType::f32), in.sink};
    const Forward f32 = run_forward(t, in32, false);
    const Tensor O = f32.O.to(DType::bf16);
    const Backward g32 = run_backward(t, in32, Forward{O.to(DType::f32), f32.lse, Tensor()});
    return {Forward{O, f32.lse, Tensor()},
            Backward{g32.dQ.to(DType::bf16), g32.dK.to(DType::bf16), g32.dV.to(DType::bf16)}};
}

// Whether got has want's bits in O, dQ, dK, dV (and in lse, when want_same: the tensor-core
// forward may round its lse differently).
void check_same_bits(const Results& got, const Results& want, bool want_same) {
    CHECK(same_bits(got.f.O, want.f.O) == want_same);
    CHECK((!want_same || same_bits(got.f.lse, want.f.lse)));
    CHECK(same_bits(got.g.dQ, want.g.dQ) == want_same);
    CHECK(same_bits(got.g.dK, want.g.dK) == want_same);
    CHECK(same_bits(got.g.dV, want.g.dV) == want_same);
}

}  // namespace

TEST_CASE("cuda attention bf16: other head sizes and misaligned views fall back to the f32 kernels") {
    const auto check = [](const CudaTarget& t, const Case& c, bool misaligned, bool want_same) {
        INFO("D ", c.D, ", misaligned ", misaligned, ", on the ", t.name);
        const Inputs in = make_inputs(c, DType::bf16, 31);
        const Results simt = simt_reference(t, in);
        // Q one bf16 past a 16-byte boundary: the same values, a pointer the mma path refuses.
        Tensor Q = t.put(in.Q);
        if (misaligned) {
            Q = Tensor::empty({in.Q.numel() + 1}, DType::bf16, t.device)
                    .alias(in.Q.shape(), contiguous_strides(in.Q.shape()), 1);
            Q.copy_(t.put(in.Q));
        }
        const Tensor K = t.put(in.K), V = t.put(in.V), dO = t.put(in.dO);
        const AttentionShape& s = in.shape;
        const auto empty = [&](const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, t.device); };
        const Results got{Forward{empty(in.Q.shape(), DType::bf16), empty({s.B, s.H, s.Tq}, DType::f32), Tensor()},
                          Backward{empty(in.Q.shape(), DType::bf16), empty(in.K.shape(), DType::bf16),
                                   empty(in.V.shape(), DType::bf16)}};
        t.table->attention_forward(s, got.f.O.view_desc(), got.f.lse.view_desc(), View{nullptr, DType::bf16},
                                   Q.view_desc(), K.view_desc(), V.view_desc(), View{});
        // The backward from the SIMT reference's O and lse, so that both read the same.
        t.table->attention_backward(s, got.g.dQ.view_desc(), got.g.dK.view_desc(), got.g.dV.view_desc(),
                                    dO.view_desc(), Q.view_desc(), K.view_desc(), V.view_desc(),
                                    simt.f.O.view_desc(), simt.f.lse.view_desc(), View{});
        check_same_bits(got, simt, want_same);
    };
    for (const CudaTarget& t : cuda_targets()) {
        check(t, {1, 2, 1, 40, 40, 48, true}, false, true);  // D = 48: not a head size of the mma kernels
        check(t, {1, 2, 1, 40, 40, 8, true}, false, true);   // D = 8
        check(t, {1, 2, 1, 40, 40, 64, true}, true, true);   // D = 64, Q misaligned
        check(t, {1, 2, 1, 40, 40, 64, true}, false, false); // D = 64: the tensor cores, which differ
    }
}

// Sigmoid and softpick are computed by the SIMT kernels only: bf16 inputs of a head size the
// tensor cores take go there, and give the f32 kernels' results rounded, bit for bit.
TEST_CASE("cuda attention bf16: sigmoid and softpick take the f32 kernels at every head size") {
    for (ScoreFunction f : {ScoreFunction::sigmoid, ScoreFunction::softpick})
        for (const CudaTarget& t : cuda_targets()) {
            INFO(nn::score_function_name(f), ", on the ", t.name);
            const Inputs in = make_inputs({1, 2, 1, 40, 40, 64, true, 0, false, f}, DType::bf16, 43);
            const Results simt = simt_reference(t, in);
            check_same_bits({run_forward(t, in, false), run_backward(t, in, simt.f)}, simt, true);
        }
}

namespace {

// Q, K, V as the heads of one token-major projection (B, T, (H + 2·Hkv)·D + pad), as
// nn/attention.cpp hands them to the kernels: every row of a head at stride (H + 2·Hkv)·D + pad.
struct FusedQKV {
    Tensor buffer, Q, K, V;
};
FusedQKV fused_qkv(const Inputs& in, int64_t pad, Device device) {
    const AttentionShape& s = in.shape;  // Tq = Tk = T
    const int64_t T = s.Tk, W = (s.H + 2 * s.Hkv) * s.D + pad;
    const Tensor buffer = full({s.B, T, W}, std::nan(""), DType::bf16, device);
    // Heads [first, first + n) of the projection, as (B, n, T, D).
    const auto heads = [&](int64_t first, int64_t n) {
        return buffer.alias({s.B, n, T, s.D}, {T * W, s.D, W, 1}, first * s.D);
    };
    const FusedQKV f{buffer, heads(0, s.H), heads(s.H, s.Hkv), heads(s.H + s.Hkv, s.Hkv)};
    f.Q.copy_(in.Q.to(device));
    f.K.copy_(in.K.to(device));
    f.V.copy_(in.V.to(device));
    return f;
}

// The bf16 entries on strided views: Q, K, V from fused_qkv(pad); dO, the backward's O (given's)
// and the results O, dQ, dK, dV in split_heads' buffers, whose NaN head must stay. The backward
// runs from given's O and lse. The results come back contiguous.
Results run_strided(const CudaTarget& t, const Inputs& in, int64_t pad, const Forward& given) {
    const AttentionShape& s = in.shape;
    const FusedQKV qkv = fused_qkv(in, pad, t.device);
    const SplitHeads dO = split_heads(in.dO, t.device), O_given = split_heads(given.O, t.device);
    const auto result_like = [&](const Tensor& x) { return split_heads(zeros(x.shape(), DType::bf16), t.device); };
    const SplitHeads O = result_like(in.Q), dQ = result_like(in.Q), dK = result_like(in.K), dV = result_like(in.V);
    const Tensor lse = Tensor::empty({s.B, s.H, s.Tq}, DType::f32, t.device);
    const Tensor given_lse = t.put(given.lse);
    t.table->attention_forward(s, O.heads.view_desc(), lse.view_desc(), View{nullptr, DType::bf16},
                               qkv.Q.view_desc(), qkv.K.view_desc(), qkv.V.view_desc(), View{});
    t.table->attention_backward(s, dQ.heads.view_desc(), dK.heads.view_desc(), dV.heads.view_desc(),
                                dO.heads.view_desc(), qkv.Q.view_desc(), qkv.K.view_desc(), qkv.V.view_desc(),
                                O_given.heads.view_desc(), given_lse.view_desc(), View{});
    for (const SplitHeads* result : {&O, &dQ, &dK, &dV}) CHECK(gap_untouched(*result));
    return {Forward{O.heads.contiguous(), lse, Tensor()},
            Backward{dQ.heads.contiguous(), dK.heads.contiguous(), dV.heads.contiguous()}};
}

}  // namespace

// Every row of every view on 16 bytes: the tensor-core kernels, the same bits as on contiguous
// tensors and not the SIMT kernels'. A row stride of 260 bf16 (520 bytes) puts every other row
// of Q, K, V off 16 bytes: the SIMT kernels' bits.
TEST_CASE("cuda attention bf16: strided heads take the tensor cores when every row starts on 16 bytes") {
    const Inputs in = make_inputs({2, 4, 2, 70, 70, 32, true}, DType::bf16, 37);  // GQA, two query tiles
    for (const CudaTarget& t : cuda_targets()) {
        INFO("on the ", t.name);
        const Results simt = simt_reference(t, in);
        const Forward mma_forward = run_forward(t, in, false);
        const Results mma{mma_forward, run_backward(t, in, simt.f)};
        {
            INFO("row stride (H + 2·Hkv)·D = 256");
            const Results strided = run_strided(t, in, 0, simt.f);
            check_same_bits(strided, mma, true);
            check_same_bits(strided, simt, false);
        }
        {
            INFO("row stride (H + 2·Hkv)·D + 4 = 260");
            check_same_bits(run_strided(t, in, 4, simt.f), simt, true);
        }
    }
}

// The head sizes of real models, D = 64 and 128 (85–105 KiB of shared memory and the most
// registers a lane holds at 128), each with a window, grouped queries and, as nn/attention.cpp
// hands them over, heads strided out of one projection: against double (check_bf16_case), then
// the strided run against the contiguous one, bit for bit. 66 and 70 rows cross into a second
// 64-row tile; the emulator keeps T that small.
TEST_CASE("cuda attention bf16 at D = 64 and 128: windows, GQA and strided heads on the tensor cores") {
    for (const CudaTarget& t : cuda_targets()) {
        for (const Case& c : std::vector<Case>{
                 {1, 4, 2, 70, 70, 64, true, 20},   // GQA 2:1 and a window of 20
                 {1, 2, 1, 66, 66, 128, true, 33},  // MQA and a window at D = 128
                 {1, 2, 2, 66, 66, 128, false},     // no mask at D = 128: every key tile whole
             })
            check_bf16_case(c, t);
        for (const Case& c : std::vector<Case>{{1, 4, 2, 70, 70, 64, true}, {1, 2, 1, 66, 66, 128, true, 20}}) {
            INFO("strided heads, D ", c.D, ", on the ", t.name);
            const Inputs in = make_inputs(c, DType::bf16, 41);
            const Forward f = run_forward(t, in, false);
            const Results contiguous{f, run_backward(t, in, f)};
            check_same_bits(run_strided(t, in, 0, f), contiguous, true);
        }
    }
}

TEST_CASE("bench: T = 128, D = 64, GQA, forward and backward against the CPU" * doctest::skip()) {
    const auto start = std::chrono::steady_clock::now();
    check_cases({{1, 4, 2, 128, 128, 64, true}});
    MESSAGE("f32 and f64, forward and backward, emulator and CPU: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
}

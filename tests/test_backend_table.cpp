// test_backend_table.cpp — every entry of the backend table (tensor/backend.h) on every
// device this build has, against the CPU: the emulated CUDA device always, the GPU when
// one is present. Inputs are random, in float32 and float64, over shapes with odd sizes,
// sizes that are not multiples of any tile, strided and broadcast operands, and empty dims.
//
// Each case builds its operands as CPU tensors, runs the entry on the CPU, then mirrors
// every operand's whole storage onto the device under test (same strides and offset),
// runs the same entry there and brings the outputs back. A device table is reached
// directly, not through Device::CUDA, so the GPU and the emulator are tested in one run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/cuda.h"
#include "cuda/gemm.h"
#include "cuda/runtime.h"
#include "gatedgrad.h"
#include "tensor/bf16.h"

using namespace gg;

namespace {

// The device tables under test, by name.
std::vector<std::pair<std::string, const Backend*>> devices() {
    std::vector<std::pair<std::string, const Backend*>> out{{"emulated", &cuda::emulated::backend_table()}};
    if (cuda::selection().mode == cuda::Mode::gpu) out.emplace_back("gpu", cuda::selection().table);
    return out;
}

// A CPU tensor's storage copied onto a device: the same bytes, so the same View geometry.
class Mirror {
public:
    Mirror(const Backend& be, const Tensor& t) : be_(be), host_(t) {
        bytes_ = t.impl()->storage->nbytes;
        data_ = be.allocate(bytes_);
        if (bytes_) be.from_host(data_, t.impl()->storage->data, bytes_);
    }
    ~Mirror() { be_.deallocate(data_, bytes_); }
    Mirror(const Mirror&) = delete;
    Mirror& operator=(const Mirror&) = delete;

    // The View the device sees: host_'s geometry over the device copy.
    View view() const {
        View v = host_.view_desc();
        v.data = static_cast<char*>(data_) + host_.offset() * dtype_size(host_.dtype());
        return v;
    }
    // What the device wrote, as a CPU tensor of host_'s geometry.
    Tensor fetch() const {
        Tensor out = Tensor::empty({static_cast<int64_t>(bytes_ / dtype_size(host_.dtype()))}, host_.dtype());
        be_.synchronize();
        if (bytes_) be_.to_host(out.impl()->storage->data, data_, bytes_);
        return out.alias(host_.shape(), host_.strides(), host_.offset());
    }

private:
    const Backend& be_;
    Tensor host_;
    void* data_;
    size_t bytes_;
};

double tolerance(DType dtype) { return dtype == DType::f64 ? 1e-11 : 2e-5; }

// |a − b| ≤ tol · max(1, |b|) everywhere; NaNs must sit at the same places.
void check_close(const std::string& what, const Tensor& got, const Tensor& want, double tol) {
    REQUIRE(got.shape() == want.shape());
    const auto g = got.to_vector<double>(), w = want.to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
        const bool ok =
            std::isnan(w[i]) ? std::isnan(g[i]) : std::abs(g[i] - w[i]) <= tol * std::max(1.0, std::abs(w[i]));
        if (!ok) {
            FAIL_CHECK(what << ": element " << i << " is " << g[i] << ", the CPU gives " << w[i]);
            return;
        }
    }
}

// Runs `entry` on the CPU over `operands`, then on every device over mirrors of them, and
// compares the operands listed in `outputs` afterwards. `entry` gets the table and the
// Views in the order of `operands`. The CPU run works on clones, so each device starts
// from the same inputs.
using Entry = std::function<void(const Backend&, const std::vector<View>&)>;
void compare(const std::string& what, const std::vector<Tensor>& operands, const std::vector<size_t>& outputs,
             const Entry& entry, double tol) {
    std::vector<Tensor> cpu;
    std::vector<View> cpu_views;
    for (const Tensor& t : operands) {
        // A copy with the same geometry over its own storage.
        const Tensor storage = Tensor::empty({static_cast<int64_t>(t.impl()->storage->nbytes / dtype_size(t.dtype()))},
                                             t.dtype());
        if (t.impl()->storage->nbytes)
            std::memcpy(storage.impl()->storage->data, t.impl()->storage->data, t.impl()->storage->nbytes);
        cpu.push_back(storage.alias(t.shape(), t.strides(), t.offset()));
        cpu_views.push_back(cpu.back().view_desc());
    }
    entry(backend(Device::CPU), cpu_views);
    for (const auto& [name, be] : devices()) {
        std::vector<std::unique_ptr<Mirror>> mirrors;
        std::vector<View> views;
        for (const Tensor& t : operands) {
            mirrors.push_back(std::make_unique<Mirror>(*be, t));
            views.push_back(mirrors.back()->view());
        }
        entry(*be, views);
        for (size_t i : outputs) check_close(what + " on " + name, mirrors[i]->fetch(), cpu[i], tol);
    }
}

const DType kFloats[] = {DType::f32, DType::f64};

Tensor random(const Shape& shape, DType dtype, Generator& gen) { return randn(shape, gen, dtype); }
// A non-contiguous tensor of `shape`: the transpose of a contiguous one, or a slice.
Tensor strided(const Shape& shape, DType dtype, Generator& gen) {
    Shape wider = shape;
    wider.back() += 3;
    return randn(wider, gen, dtype).narrow(-1, 1, shape.back());
}

}  // namespace

TEST_CASE("table: fill, arange and copy (strided, converting dtypes)") {
    Generator gen(1);
    for (DType dt : {DType::f32, DType::f64, DType::i64}) {
        for (const Shape& s : {Shape{0}, Shape{1}, Shape{7, 13}, Shape{3, 0, 2}, Shape{2, 3, 5, 7}}) {
            CAPTURE(shape_str(s));
            compare(
                "fill", {zeros(s, dt)}, {0}, [](const Backend& be, const std::vector<View>& v) { be.fill(v[0], 2.5); },
                0);
            compare("arange", {zeros({shape_numel(s)}, dt)}, {0},
                    [](const Backend& be, const std::vector<View>& v) { be.arange(v[0], -3, 0.5); }, 0);
        }
        for (DType src : {DType::f32, DType::f64, DType::i64}) {
            const Tensor in = (randn({5, 9, 4}, gen, DType::f64) * 10).to(src);
            compare("copy of a permuted view", {zeros({9, 4, 5}, dt), in.permute({1, 2, 0})}, {0},
                    [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); }, 0);
            compare("copy into a strided view", {zeros({5, 12}, dt).narrow(1, 2, 9), in.select(2, 1)}, {0},
                    [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); }, 0);
            compare(
                "copy of a broadcast", {zeros({4, 9}, dt), in.select(0, 0).select(1, 0).unsqueeze(0).expand({4, 9})},
                {0}, [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); }, 0);
        }
    }
}

TEST_CASE("table: unary and binary ops, contiguous, strided and broadcast") {
    Generator gen(2);
    const UnaryOp unary_ops[] = {UnaryOp::neg,  UnaryOp::exp,     UnaryOp::log,  UnaryOp::sqrt, UnaryOp::rsqrt,
                                 UnaryOp::tanh, UnaryOp::sigmoid, UnaryOp::relu, UnaryOp::silu, UnaryOp::gelu,
                                 UnaryOp::erf,  UnaryOp::abs,     UnaryOp::pow};
    const BinaryOp binary_ops[] = {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div,
                                   BinaryOp::maximum, BinaryOp::minimum, BinaryOp::eq, BinaryOp::ne,
                                   BinaryOp::lt, BinaryOp::le, BinaryOp::gt, BinaryOp::ge};
    for (DType dt : kFloats) {
        for (const Shape& s : {Shape{0, 3}, Shape{1}, Shape{33}, Shape{6, 7, 5}}) {
            CAPTURE(shape_str(s));
            const Tensor positive = abs(random(s, dt, gen)) + 0.25;
            for (UnaryOp op : unary_ops) {
                const bool needs_positive = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt ||
                                            op == UnaryOp::pow;
                const Tensor in = needs_positive ? positive : random(s, dt, gen);
                compare("unary " + std::to_string(int(op)), {zeros(s, dt), in}, {0},
                        [op](const Backend& be, const std::vector<View>& v) { be.unary(op, v[0], v[1], 1.7); },
                        tolerance(dt));
            }
            for (BinaryOp op : binary_ops) {
                compare("binary " + std::to_string(int(op)), {zeros(s, dt), random(s, dt, gen), positive}, {0},
                        [op](const Backend& be, const std::vector<View>& v) { be.binary(op, v[0], v[1], v[2]); },
                        tolerance(dt));
            }
        }
        // strided and broadcast operands
        const Tensor a = strided({4, 6}, dt, gen), row = random({6}, dt, gen).unsqueeze(0).expand({4, 6});
        for (BinaryOp op : binary_ops)
            compare("binary (strided, broadcast) " + std::to_string(int(op)), {zeros({4, 6}, dt), a, row}, {0},
                    [op](const Backend& be, const std::vector<View>& v) { be.binary(op, v[0], v[1], v[2]); },
                    tolerance(dt));
        compare("where (broadcast condition)",
                {zeros({4, 6}, dt), gt(random({1, 6}, dt, gen), zeros({1, 6}, dt)).expand({4, 6}), a, row}, {0},
                [](const Backend& be, const std::vector<View>& v) { be.where(v[0], v[1], v[2], v[3]); }, 0);
    }
    const Tensor ints = randint(-50, 50, {7, 5}, gen), more = randint(-50, 50, {7, 5}, gen) + 100;
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::maximum, BinaryOp::lt})
        compare("int64 binary " + std::to_string(int(op)), {zeros({7, 5}, DType::i64), ints, more}, {0},
                [op](const Backend& be, const std::vector<View>& v) { be.binary(op, v[0], v[1], v[2]); }, 0);
}

TEST_CASE("table: reductions and the sum of squares") {
    Generator gen(3);
    struct Block {
        int64_t outer, R, inner;
    };
    for (DType dt : {DType::f32, DType::f64, DType::i64}) {
        for (Block b : {Block{1, 1, 1}, Block{3, 0, 2}, Block{1, 1000, 1}, Block{5, 37, 3}, Block{2, 7, 129}}) {
            CAPTURE(b.outer);
            CAPTURE(b.R);
            CAPTURE(b.inner);
            const Tensor in = dt == DType::i64 ? randint(-9, 9, {b.outer, b.R, b.inner}, gen)
                                               : random({b.outer, b.R, b.inner}, dt, gen);
            for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
                if (op != ReduceOp::sum && b.R == 0) continue;  // an error on every device
                compare("reduce " + std::to_string(int(op)), {zeros({b.outer, b.inner}, dt), in}, {0},
                        [op, b](const Backend& be, const std::vector<View>& v) {
                            be.reduce(op, v[0], v[1], b.outer, b.R, b.inner);
                        },
                        dt == DType::i64 ? 0 : tolerance(dt));
            }
        }
    }
    for (DType dt : kFloats)
        for (int64_t n : {0, 1, 1000, 4099}) {
            compare("sum_squares", {full({}, 1.5, DType::f64), random({n}, dt, gen)}, {0},
                    [](const Backend& be, const std::vector<View>& v) { be.sum_squares(v[0], {&v[1], 1}); }, 1e-12);
        }
    // A list in one call: f32 and f64 mixed, an empty tensor, a view one element in (no packs),
    // and one tensor of several chunks (cuda/tensor_list.h) with a tail that fills no pack.
    compare("sum_squares of a list",
            {full({}, 1.5, DType::f64), random({7}, DType::f32, gen), random({0}, DType::f64, gen),
             random({1001}, DType::f32, gen).narrow(0, 1, 1000), random({40003}, DType::f32, gen),
             random({33}, DType::f64, gen)},
            {0}, [](const Backend& be, const std::vector<View>& v) { be.sum_squares(v[0], {&v[1], v.size() - 1}); },
            1e-12);
}

TEST_CASE("table: softmax, log_softmax and their backward") {
    Generator gen(4);
    for (DType dt : kFloats)
        for (bool log : {false, true})
            for (const Shape& s : {Shape{1, 1}, Shape{3, 7}, Shape{2, 257}, Shape{0, 5}, Shape{4, 1100}}) {
                CAPTURE(shape_str(s));
                const Tensor x = random(s, dt, gen) * 4.0;
                compare("softmax", {zeros(s, dt), x}, {0},
                        [&](const Backend& be, const std::vector<View>& v) { be.softmax(v[0], v[1], s[0], s[1], log); },
                        tolerance(dt));
                const Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
                compare("softmax_backward", {zeros(s, dt), y, random(s, dt, gen)}, {0},
                        [&](const Backend& be, const std::vector<View>& v) {
                            be.softmax_backward(v[0], v[1], v[2], s[0], s[1], log);
                        },
                        tolerance(dt));
            }
}

TEST_CASE("table: cross-entropy, the loss alone and with its gradient, with ignored rows") {
    Generator gen(5);
    for (DType dt : kFloats)
        for (const Shape& s : {Shape{1, 3}, Shape{9, 257}, Shape{0, 4}, Shape{5, 1030}}) {
            CAPTURE(shape_str(s));
            std::vector<int64_t> targets(s[0]);
            for (int64_t i = 0; i < s[0]; ++i) targets[i] = i % 3 == 1 ? -100 : gen.randint(0, s[1]);
            const Tensor x = random(s, dt, gen) * 3.0, t = from_vector(targets, {s[0]});
            compare("cross_entropy", {zeros({s[0]}, dt), x, t}, {0},
                    [](const Backend& be, const std::vector<View>& v) {
                        be.cross_entropy(v[0], View{}, v[1], v[2], View{}, -100);
                    },
                    tolerance(dt));
            // Ignored rows get a zero gradient row whatever their scale says.
            compare("cross_entropy with its gradient", {zeros({s[0]}, dt), zeros(s, dt), x, t, rand({s[0]}, gen, dt)},
                    {0, 1},
                    [](const Backend& be, const std::vector<View>& v) {
                        be.cross_entropy(v[0], v[1], v[2], v[3], v[4], -100);
                    },
                    tolerance(dt));
        }
}

TEST_CASE("table: cross-entropy refuses logits that are not (N, V) or targets that are not int64 (N)") {
    // The entries read N and V from the views: a flat view would send a kernel past the rows.
    // Every device refuses before reading (views of host memory: nothing is dereferenced).
    std::vector<float> x(64), loss(16);
    std::vector<int64_t> t(16);
    std::vector<double> t_f64(16);
    const View flat = make_view(x.data(), DType::f32, {64}, {1}), logits = make_view(x.data(), DType::f32, {16, 4}, {4, 1});
    const View targets = make_view(t.data(), DType::i64, {16}, {1}), out = make_view(loss.data(), DType::f32, {16}, {1});
    std::vector<std::pair<std::string, const Backend*>> all = devices();
    all.emplace_back("cpu", &backend(Device::CPU));
    for (const auto& device : all) {  // no structured binding: clang 14 cannot CAPTURE one
        const std::string& name = device.first;
        const Backend* be = device.second;
        CAPTURE(name);
        CHECK_THROWS_WITH_AS(be->cross_entropy(out, View{}, flat, targets, View{}, -100),
                             "cross_entropy: logits must be (N, V) and targets int64 (N), got logits (64) and int64 "
                             "targets (16)",
                             std::invalid_argument);
        CHECK_THROWS_AS(be->cross_entropy(out, View{}, logits, make_view(t.data(), DType::i64, {8}, {1}), View{}, -100),
                        std::invalid_argument);
        CHECK_THROWS_AS(be->cross_entropy(out, logits, logits, make_view(t_f64.data(), DType::f64, {16}, {1}), out, -100),
                        std::invalid_argument);
    }
}

TEST_CASE("table: embedding rows, gather/scatter along the last dim, top-k") {
    Generator gen(6);
    for (DType dt : kFloats) {
        for (int64_t N : {0, 1, 50}) {
            const Tensor table = random({13, 7}, dt, gen), ids = randint(0, 13, {N}, gen);
            compare("index_select_rows", {zeros({N, 7}, dt), table, ids}, {0},
                    [](const Backend& be, const std::vector<View>& v) { be.index_select_rows(v[0], v[1], v[2]); }, 0);
            compare(
                "index_add_rows (repeated ids add up)",
                {table.clone(), randint(0, 4, {N}, gen), random({N, 7}, dt, gen)}, {0},
                [](const Backend& be, const std::vector<View>& v) { be.index_add_rows(v[0], v[1], v[2]); },
                tolerance(dt));
        }
        const Tensor in = random({6, 19}, dt, gen), idx = randint(0, 19, {6, 3}, gen);
        compare("gather_last", {zeros({6, 3}, dt), in, idx}, {0},
                [](const Backend& be, const std::vector<View>& v) { be.gather_last(v[0], v[1], v[2]); }, 0);
        compare("scatter_add_last", {zeros({6, 19}, dt), idx, random({6, 3}, dt, gen)}, {0},
                [](const Backend& be, const std::vector<View>& v) { be.scatter_add_last(v[0], v[1], v[2]); },
                tolerance(dt));
        for (int64_t k : {1, 4, 19}) {
            // Ties: a few repeated values, so the lower index must come first everywhere.
            const Tensor x = randint(0, 4, {5, 19}, gen).to(dt);
            compare("topk_last k=" + std::to_string(k), {zeros({5, k}, dt), zeros({5, k}, DType::i64), x}, {0, 1},
                    [k](const Backend& be, const std::vector<View>& v) { be.topk_last(v[0], v[1], v[2], k); }, 0);
        }
    }
}

TEST_CASE("table: RMSNorm forward and backward") {
    Generator gen(7);
    for (DType dt : kFloats)
        for (const Shape& s : {Shape{1, 1}, Shape{3, 7}, Shape{17, 64}, Shape{0, 8}, Shape{2, 1031}}) {
            CAPTURE(shape_str(s));
            const Tensor x = random(s, dt, gen), w = random({s[1]}, dt, gen);
            compare("rms_norm_forward", {zeros(s, dt), zeros({s[0]}, dt), x, w}, {0, 1},
                    [&](const Backend& be, const std::vector<View>& v) {
                        be.rms_norm_forward(v[0], v[1], v[2], v[3], s[0], s[1], 1e-6);
                    },
                    tolerance(dt));
            const Tensor rstd = rsqrt(mean(x * x, {-1}) + 1e-6);
            compare("rms_norm_backward", {zeros(s, dt), zeros({s[1]}, dt), random(s, dt, gen), x, w, rstd}, {0, 1},
                    [&](const Backend& be, const std::vector<View>& v) {
                        be.rms_norm_backward(v[0], v[1], v[2], v[3], v[4], v[5], s[0], s[1]);
                    },
                    tolerance(dt));
        }
}

TEST_CASE("table: SwiGLU and the sigmoid gate forward and backward, RoPE each way") {
    Generator gen(11);
    // Each gating entry with its operands: y, x, z forward; dx, dz, dy, x, z backward.
    struct Gating {
        const char* name;
        bool backward;
        Entry entry;
    };
    const Gating gatings[] = {
        {"swiglu_forward", false,
         [](const Backend& be, const std::vector<View>& v) { be.swiglu_forward(v[0], v[1], v[2]); }},
        {"swiglu_backward", true,
         [](const Backend& be, const std::vector<View>& v) { be.swiglu_backward(v[0], v[1], v[2], v[3], v[4]); }},
        {"sigmoid_gate_forward", false,
         [](const Backend& be, const std::vector<View>& v) { be.sigmoid_gate_forward(v[0], v[1], v[2]); }},
        {"sigmoid_gate_backward", true,
         [](const Backend& be, const std::vector<View>& v) {
             be.sigmoid_gate_backward(v[0], v[1], v[2], v[3], v[4]);
         }},
    };
    // The outputs dense, or as x and z are when x is given as a slice: the two halves of one
    // (rows, 2C + 1) buffer.
    const auto operands = [](const Gating& g, const Tensor& dy, const Tensor& x, const Tensor& z) {
        const int64_t C = dy.size(-1);
        const Tensor wide = x.is_contiguous() ? Tensor() : zeros({dy.size(0), 2 * C + 1}, dy.dtype());
        const Tensor out = wide.defined() ? wide.narrow(1, 0, C) : zeros(dy.shape(), dy.dtype()),
                     more = wide.defined() ? wide.narrow(1, C + 1, C) : zeros(dy.shape(), dy.dtype());
        return g.backward ? std::vector<Tensor>{out, more, dy, x, z} : std::vector<Tensor>{out, x, z};
    };
    const auto outputs = [](const Gating& g) {
        return g.backward ? std::vector<size_t>{0, 1} : std::vector<size_t>{0};
    };
    for (DType dt : kFloats) {
        for (int64_t n : {0, 1, 5, 1027}) {
            const Tensor a = random({n}, dt, gen), b = random({n}, dt, gen), dy = random({n}, dt, gen);
            for (const Gating& g : gatings) compare(g.name, operands(g, dy, a, b), outputs(g), g.entry, tolerance(dt));
        }
        // Inputs and outputs as the (rows, C) halves of one (rows, 2C + 1) buffer, rows 2C + 1
        // apart: the table agrees across devices, and with itself on contiguous ones.
        for (const auto& [rows, C] : {std::pair<int64_t, int64_t>{7, 5}, {1, 3}, {0, 4}}) {
            const Tensor wide = random({rows, 2 * C + 1}, dt, gen), dy = random({rows, C}, dt, gen);
            const Tensor a = wide.narrow(1, 0, C), b = wide.narrow(1, C + 1, C);
            for (const Gating& g : gatings) {
                CAPTURE(g.name);
                compare(std::string(g.name) + " on slices", operands(g, dy, a, b), outputs(g), g.entry, tolerance(dt));
                const std::vector<Tensor> sliced = operands(g, dy, a, b),
                                          dense = operands(g, dy, a.contiguous(), b.contiguous());
                const auto views = [](const std::vector<Tensor>& ts) {
                    std::vector<View> v;
                    for (const Tensor& t : ts) v.push_back(t.view_desc());
                    return v;
                };
                g.entry(backend(Device::CPU), views(sliced));
                g.entry(backend(Device::CPU), views(dense));
                for (size_t i : outputs(g))
                    check_close(std::string(g.name) + " on slices, on the CPU", sliced[i], dense[i], 0);
            }
        }
        // x and out (B, H, T, D): contiguous, the (B, H, T, D) view of a (B, T, H, D) tensor, and
        // empty. Into either out the CPU writes the same values.
        for (const Shape& s : {Shape{2, 3, 5, 8}, Shape{1, 1, 1, 2}, Shape{0, 2, 3, 4}}) {
            CAPTURE(shape_str(s));
            const Tensor cos = random({s[2], s[3]}, dt, gen), sin = random({s[2], s[3]}, dt, gen);
            const auto token_major = [&](const Tensor& t) { return t.view({s[0], s[2], s[1], s[3]}).transpose(1, 2); };
            for (const Tensor& x : {random(s, dt, gen), token_major(random(s, dt, gen))})
                for (bool transpose : {false, true}) {
                    const auto rope = [transpose](const Backend& be, const std::vector<View>& v) {
                        be.rope(v[0], v[1], v[2], v[3], transpose);
                    };
                    const std::string what = std::string("rope") + (transpose ? " (transposed)" : "");
                    const Tensor out = zeros(s, dt), out_token_major = token_major(zeros(s, dt));
                    compare(what, {out, x, cos, sin}, {0}, rope, tolerance(dt));
                    compare(what + " into a token-major out", {out_token_major, x, cos, sin}, {0}, rope, tolerance(dt));
                    rope(backend(Device::CPU), {out.view_desc(), x.view_desc(), cos.view_desc(), sin.view_desc()});
                    rope(backend(Device::CPU),
                         {out_token_major.view_desc(), x.view_desc(), cos.view_desc(), sin.view_desc()});
                    check_close(what + " into a token-major out, on the CPU", out_token_major, out, 0);
                }
        }
    }
}

TEST_CASE("table: AdamW and SGD steps") {
    Generator gen(8);
    for (DType dt : kFloats)
        for (int64_t n : {0, 1, 5, 1027}) {
            const AdamWStep adamw{1e-2, 0.9, 0.95, 1e-8, 0.1, 1 - std::pow(0.9, 3), 1 - std::pow(0.95, 3)};
            compare(
                "adamw_step",
                {random({n}, dt, gen), random({n}, dt, gen), random({n}, dt, gen) * 0.1, abs(random({n}, dt, gen))},
                {0, 2, 3},
                [&](const Backend& be, const std::vector<View>& v) {
                    const AdamWTensors param{adamw, v[0], v[1], v[2], v[3]};
                    be.adamw_step({&param, 1});
                },
                tolerance(dt));
            for (double momentum : {0.0, 0.9}) {
                const SGDStep sgd{0.1, momentum, 1e-3};
                compare("sgd_step", {random({n}, dt, gen), random({n}, dt, gen), random({n}, dt, gen)}, {0, 2},
                        [&](const Backend& be, const std::vector<View>& v) {
                            be.sgd_step(sgd, v[0], v[1], momentum == 0 ? View{} : v[2]);
                        },
                        tolerance(dt));
            }
        }
}

TEST_CASE("table: one AdamW step over a list of parameters") {
    // f32 and f64 in one call, each parameter with its own step count; a view one element in
    // (no packs), a parameter of several chunks (cuda/tensor_list.h) and small ones around it.
    Generator gen(18);
    std::vector<Tensor> operands;
    std::vector<AdamWStep> steps;
    for (const auto& item : {std::tuple{5, DType::f32, false}, {40003, DType::f32, false}, {1000, DType::f32, true},
                             {0, DType::f64, false}, {77, DType::f64, false}, {1, DType::f64, true}}) {
        // Plain variables, not a structured binding: the lambda below reads them.
        const int n = std::get<0>(item);
        const DType dt = std::get<1>(item);
        const bool misaligned = std::get<2>(item);
        const auto make = [&](const Tensor& t) { return misaligned ? t.narrow(0, 1, n) : t.narrow(0, 0, n); };
        const int64_t size = n + 1;
        operands.push_back(make(random({size}, dt, gen)));
        operands.push_back(make(random({size}, dt, gen)));
        operands.push_back(make(random({size}, dt, gen) * 0.1));
        operands.push_back(make(abs(random({size}, dt, gen))));
        const double t = double(steps.size() + 1);
        steps.push_back({1e-2, 0.9, 0.95, 1e-8, 0.1, 1 - std::pow(0.9, t), 1 - std::pow(0.95, t)});
    }
    std::vector<size_t> outputs;
    for (size_t i = 0; i < operands.size(); i += 4) outputs.insert(outputs.end(), {i, i + 2, i + 3});
    compare("adamw_step of a list", operands, outputs,
            [&](const Backend& be, const std::vector<View>& v) {
                std::vector<AdamWTensors> params;
                for (size_t i = 0; i < steps.size(); ++i)
                    params.push_back({steps[i], v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]});
                be.adamw_step(params);
            },
            tolerance(DType::f32));
}

TEST_CASE("table: scaling a list of tensors in place (the clipping of gradients)") {
    // f32, f64 and bf16 in one call: many small tensors, an empty one, a view one element in
    // of each dtype (no packs), and one tensor of several chunks (cuda/tensor_list.h) with a
    // tail that fills no pack. Every element is one product in the same type on every
    // backend, so the results match exactly.
    Generator gen(21);
    std::vector<Tensor> operands{random({40003}, DType::f32, gen), random({0}, DType::f64, gen),
                                 random({1001}, DType::f32, gen).narrow(0, 1, 1000),
                                 random({34}, DType::f64, gen).narrow(0, 1, 33),
                                 random({20}, DType::f32, gen).to(DType::bf16).narrow(0, 1, 19)};
    const DType dtypes[] = {DType::f32, DType::f64, DType::bf16};
    for (int i = 0; i < 300; ++i) operands.push_back(random({1 + i % 9}, DType::f32, gen).to(dtypes[i % 3]));
    std::vector<size_t> outputs;
    for (size_t i = 0; i < operands.size(); ++i) outputs.push_back(i);
    compare("scale_list", operands, outputs,
            [](const Backend& be, const std::vector<View>& v) { be.scale_list(0.37, v); }, 0);
}

TEST_CASE("table: scale_list refuses a strided view and a non-float tensor, naming the op and the tensor") {
    Generator gen(22);
    const Tensor ok = random({4}, DType::f32, gen), transposed = random({3, 5}, DType::f32, gen).t(),
                 integers = zeros({3}, DType::i64);
    const std::vector<View> strided_list{ok.view_desc(), transposed.view_desc()};
    const std::vector<View> integer_list{integers.view_desc()};
    std::vector<std::pair<std::string, const Backend*>> tables{{"cpu", &backend(Device::CPU)}};
    for (const auto& device : devices()) tables.push_back(device);
    for (const auto& table : tables) {
        CAPTURE(table.first);
        CHECK_THROWS_WITH_AS(table.second->scale_list(0.5, strided_list),
                             "scale_list: tensor 1 (float32 (5,3), strides (1,5)) must be a contiguous f32, f64 or bf16 "
                             "tensor",
                             std::invalid_argument);
        CHECK_THROWS_WITH_AS(table.second->scale_list(0.5, integer_list), doctest::Contains("scale_list: tensor 0 (int64"),
                             std::invalid_argument);
    }
}

TEST_CASE("table: GEMM, every transpose, batched with strides") {
    Generator gen(9);
    struct Case {
        int64_t batch, M, N, K;
        bool ta, tb;
    };
    for (DType dt : kFloats)
        for (Case c :
             {Case{1, 1, 1, 1, false, false}, Case{1, 7, 33, 5, false, true}, Case{3, 17, 9, 65, true, false},
              Case{2, 40, 31, 18, true, true}, Case{1, 5, 0, 3, false, false}, Case{1, 4, 6, 0, false, false},
              // Large enough for the CPU to split C's rows over threads, with A read transposed.
              Case{1, 301, 40, 50, true, false}, Case{1, 301, 40, 50, false, true}}) {
            CAPTURE(c.batch);
            CAPTURE(c.M);
            CAPTURE(c.N);
            CAPTURE(c.K);
            CAPTURE(c.ta);
            CAPTURE(c.tb);
            const Shape a_shape = c.ta ? Shape{c.batch, c.K, c.M} : Shape{c.batch, c.M, c.K};
            const Shape b_shape = c.tb ? Shape{c.batch, c.N, c.K} : Shape{c.batch, c.K, c.N};
            // BLAS leading dimensions are at least 1, even for an empty row.
            const int64_t lda = std::max<int64_t>(a_shape[2], 1), ldb = std::max<int64_t>(b_shape[2], 1);
            const int64_t ldc = std::max<int64_t>(c.N, 1);
            for (double beta : {0.0, 0.5}) {
                const Tensor C = beta == 0 ? full({c.batch, c.M, c.N}, NAN, dt) : random({c.batch, c.M, c.N}, dt, gen);
                compare("gemm", {random(a_shape, dt, gen), random(b_shape, dt, gen), C}, {2},
                        [&](const Backend& be, const std::vector<View>& v) {
                            be.gemm(dt, c.batch, c.ta, c.tb, c.M, c.N, c.K, 1.5, v[0].data, lda, a_shape[1] * lda,
                                    v[1].data, ldb, b_shape[1] * ldb, beta, v[2].data, ldc, c.M * c.N);
                        },
                        tolerance(dt) * 4);
            }
        }
}

TEST_CASE("table: attention forward and backward (causal, window, exclude_self, GQA, KV cache)") {
    Generator gen(10);
    struct Case {
        int64_t B, H, Hkv, Tq, Tk, D;
        bool causal;
        int64_t window;
        bool exclude_self;
    };
    for (DType dt : kFloats)
        for (Case c : {Case{1, 1, 1, 1, 1, 1, true, 0, false}, Case{2, 4, 2, 9, 9, 8, true, 0, false},
                       Case{1, 2, 1, 7, 7, 5, true, 3, false}, Case{1, 2, 2, 6, 6, 4, true, 0, true},
                       Case{1, 4, 1, 3, 11, 16, true, 0, false}, Case{1, 1, 1, 5, 8, 3, false, 0, false}}) {
            CAPTURE(c.H);
            CAPTURE(c.Hkv);
            CAPTURE(c.Tq);
            CAPTURE(c.Tk);
            CAPTURE(c.D);
            const AttentionShape s{c.B, c.H, c.Hkv, c.Tq, c.Tk, c.D, c.causal, c.window, 1 / std::sqrt(double(c.D)),
                                   c.exclude_self};
            const Tensor Q = random({c.B, c.H, c.Tq, c.D}, dt, gen), K = random({c.B, c.Hkv, c.Tk, c.D}, dt, gen),
                         V = random({c.B, c.Hkv, c.Tk, c.D}, dt, gen);
            const Tensor O = zeros({c.B, c.H, c.Tq, c.D}, dt), lse = zeros({c.B, c.H, c.Tq}, dt),
                         probs = zeros({c.B, c.H, c.Tq, c.Tk}, dt);
            compare("attention_forward", {O, lse, probs, Q, K, V}, {0, 1, 2},
                    [&](const Backend& be, const std::vector<View>& v) {
                        be.attention_forward(s, v[0], v[1], v[2], v[3], v[4], v[5], View{});
                    },
                    tolerance(dt));
            // The backward from the CPU's own forward results, recomputing the probabilities and
            // reading the ones forward kept.
            const Tensor O_cpu = zeros({c.B, c.H, c.Tq, c.D}, dt), lse_cpu = zeros({c.B, c.H, c.Tq}, dt),
                         probs_cpu = zeros({c.B, c.H, c.Tq, c.Tk}, dt);
            backend(Device::CPU).attention_forward(s, O_cpu.view_desc(), lse_cpu.view_desc(), probs_cpu.view_desc(),
                                                   Q.view_desc(), K.view_desc(), V.view_desc(), View{});
            const Tensor dO = random(O.shape(), dt, gen);
            for (bool kept : {false, true})
                compare(
                    kept ? "attention_backward (probabilities kept)" : "attention_backward",
                    {zeros(Q.shape(), dt), zeros(K.shape(), dt), zeros(V.shape(), dt), dO, Q, K, V, O_cpu, lse_cpu,
                     probs_cpu},
                    {0, 1, 2},
                    [&](const Backend& be, const std::vector<View>& v) {
                        be.attention_backward(s, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                                              kept ? v[9] : View{});
                    },
                    tolerance(dt) * 4);
        }
}

// ---- bfloat16 rows ----
//
// The device entries that take bf16 against the CPU's f32 entry on the same values: each
// operand listed in `as_bf16` is rounded to bf16 (its whole storage) for both sides; the CPU
// runs its f32 entry on the rounded values and its result is rounded to bf16 once, which is
// what a bf16 entry that loads as float, computes in float and rounds once on the way out
// should store. The device gets the bf16 bits; other operands (int64 targets, f32/f64 copy
// sources and destinations) travel as they are.
//
// Tolerance, for an output element whose rounded reference is w: bf16 keeps 8 significant
// bits, so the device's own rounding of a float result that differs from the CPU's in its last
// f32 bits (another order of additions, another maths library) can land on the neighbouring
// bf16 value, one ulp: at most 2⁻⁷·|w|. On top of that, the f32 table's own 2e-5·max(1, |w|)
// for the differences before rounding. Outputs that stay f32 or f64 use the f32 tolerance.
// An entry whose device kernels round intermediate terms to bf16 (attention on the tensor cores
// rounds P, and dS, before their products) errs by a few ulps of the sums' terms, not of each
// result: its rows pass `term_ulps`, and get term_ulps · 2⁻⁷ · max|w| over the output on top.

namespace {

const double kBf16Ulp = std::ldexp(1.0, -7);

// A device buffer that frees itself.
struct DeviceBuffer {
    const Backend& be;
    void* data;
    size_t bytes;
    DeviceBuffer(const Backend& be, size_t bytes) : be(be), data(be.allocate(bytes)), bytes(bytes) {}
    ~DeviceBuffer() { be.deallocate(data, bytes); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

int64_t storage_elements(const Tensor& t) {
    return static_cast<int64_t>(t.impl()->storage->nbytes / dtype_size(t.dtype()));
}

void compare_bf16(const std::string& what, const std::vector<Tensor>& operands, const std::vector<size_t>& as_bf16,
                  const std::vector<size_t>& outputs, const Entry& entry, double term_ulps = 0) {
    const auto is_bf16 = [&](size_t k) { return std::find(as_bf16.begin(), as_bf16.end(), k) != as_bf16.end(); };
    std::vector<Tensor> cpu;
    std::vector<View> cpu_views;
    std::vector<std::vector<bfloat16>> bits(operands.size());
    for (size_t k = 0; k < operands.size(); ++k) {
        const Tensor& t = operands[k];
        const Tensor storage = Tensor::empty({storage_elements(t)}, t.dtype());
        if (t.impl()->storage->nbytes)
            std::memcpy(storage.impl()->storage->data, t.impl()->storage->data, t.impl()->storage->nbytes);
        if (is_bf16(k)) {
            REQUIRE(t.dtype() == DType::f32);
            float* p = static_cast<float*>(storage.impl()->storage->data);
            for (int64_t i = 0; i < storage_elements(t); ++i) {
                bits[k].push_back(bfloat16(p[i]));
                p[i] = float(bits[k].back());
            }
        }
        cpu.push_back(storage.alias(t.shape(), t.strides(), t.offset()));
        cpu_views.push_back(cpu.back().view_desc());
    }
    entry(backend(Device::CPU), cpu_views);
    for (const auto& [name, be] : devices()) {
        std::vector<std::unique_ptr<DeviceBuffer>> buffers;
        std::vector<View> views;
        for (size_t k = 0; k < operands.size(); ++k) {
            const Tensor& t = operands[k];
            const size_t element = is_bf16(k) ? sizeof(bfloat16) : dtype_size(t.dtype());
            const size_t bytes = size_t(storage_elements(t)) * element;
            buffers.push_back(std::make_unique<DeviceBuffer>(*be, bytes));
            const void* host = is_bf16(k) ? static_cast<const void*>(bits[k].data()) : t.impl()->storage->data;
            if (bytes) be->from_host(buffers.back()->data, host, bytes);
            View v = t.view_desc();
            if (is_bf16(k)) v.dtype = DType::bf16;
            v.data = static_cast<char*>(buffers.back()->data) + t.offset() * int64_t(element);
            views.push_back(v);
        }
        entry(*be, views);
        be->synchronize();
        for (size_t k : outputs) {
            const std::string label = what + " on " + name;
            if (!is_bf16(k)) {
                const Tensor got = Tensor::empty({storage_elements(cpu[k])}, cpu[k].dtype());
                if (buffers[k]->bytes) be->to_host(got.impl()->storage->data, buffers[k]->data, buffers[k]->bytes);
                check_close(label, got.alias(cpu[k].shape(), cpu[k].strides(), cpu[k].offset()), cpu[k], 2e-5);
                continue;
            }
            std::vector<bfloat16> got(static_cast<size_t>(storage_elements(cpu[k])));
            if (buffers[k]->bytes) be->to_host(got.data(), buffers[k]->data, buffers[k]->bytes);
            const float* want = static_cast<const float*>(cpu[k].impl()->storage->data);
            double largest = 0;
            for (size_t i = 0; i < got.size(); ++i) largest = std::max(largest, double(std::abs(want[i])));
            for (size_t i = 0; i < got.size(); ++i) {
                const double g = float(got[i]), w = round_to_bf16(want[i]);
                const bool ok = std::isnan(w) ? std::isnan(g)
                                              : std::abs(g - w) <= kBf16Ulp * (std::abs(w) + term_ulps * largest) +
                                                                       2e-5 * std::max(1.0, std::abs(w));
                if (!ok) {
                    FAIL_CHECK(label << ": bf16 element " << i << " is " << g << ", the CPU's f32 rounded to bf16 is "
                                     << w);
                    break;
                }
            }
        }
    }
}

}  // namespace

TEST_CASE("table bf16: fill, arange, and copy between bf16 and f32, f64, int64") {
    Generator gen(21);
    for (const Shape& s : {Shape{0}, Shape{1}, Shape{7, 13}, Shape{2, 3, 5, 7}}) {
        CAPTURE(shape_str(s));
        for (double value : {2.5, 0.1, -1e30})
            compare_bf16("fill", {zeros(s, DType::f32)}, {0}, {0},
                         [value](const Backend& be, const std::vector<View>& v) { be.fill(v[0], value); });
        compare_bf16("arange", {zeros({shape_numel(s)}, DType::f32)}, {0}, {0},
                     [](const Backend& be, const std::vector<View>& v) { be.arange(v[0], -3, 0.37); });
    }
    const Tensor in = randn({5, 9, 4}, gen, DType::f64) * 10;
    for (DType other : {DType::f32, DType::f64, DType::i64}) {
        CAPTURE(dtype_name(other));
        const Tensor source = other == DType::i64 ? (in * 100).to(other) : in.to(other);
        // other → bf16: contiguous (packs where aligned), permuted, into a strided view
        compare_bf16("copy to bf16", {zeros({5, 9, 4}, DType::f32), source}, {0}, {0},
                     [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); });
        compare_bf16("copy to bf16, permuted", {zeros({9, 4, 5}, DType::f32), source.permute({1, 2, 0})}, {0}, {0},
                     [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); });
        compare_bf16("copy to bf16, strided", {zeros({5, 12}, DType::f32).narrow(1, 2, 9), source.select(2, 1)}, {0},
                     {0}, [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); });
        // bf16 → other
        compare_bf16("copy from bf16", {zeros({5, 9, 4}, other), in.to(DType::f32)}, {1}, {0},
                     [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); });
        compare_bf16("copy from bf16, permuted", {zeros({9, 4, 5}, other), in.to(DType::f32).permute({1, 2, 0})},
                     {1}, {0}, [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); });
    }
    compare_bf16("copy bf16 to bf16, strided", {zeros({5, 12}, DType::f32).narrow(1, 2, 9), in.to(DType::f32).select(2, 1)},
                 {0, 1}, {0}, [](const Backend& be, const std::vector<View>& v) { be.copy(v[0], v[1]); });
}

TEST_CASE("table bf16: f64 → bf16 rounds once, not through a float") {
    // 1 + 2⁻⁸ + 2⁻³⁰ is just above the tie between the bf16 values 1 and 1 + 2⁻⁷; rounded to a
    // float first it would land on the tie and go to the even 1. The right answer is 1 + 2⁻⁷.
    const double x = 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
    const Backend& be = cuda::emulated::backend_table();
    DeviceBuffer in(be, sizeof(double)), out(be, sizeof(bfloat16));
    be.from_host(in.data, &x, sizeof x);
    View src = full({1}, 0.0, DType::f64).view_desc(), dst = src;
    src.data = in.data, dst.data = out.data, dst.dtype = DType::bf16;
    be.copy(dst, src);
    bfloat16 got;
    be.to_host(&got, out.data, sizeof got);
    CHECK(float(got) == 1 + std::ldexp(1.0f, -7));
}

TEST_CASE("table bf16: unary, binary and where, contiguous, strided and broadcast") {
    Generator gen(22);
    const DType f32 = DType::f32;
    for (const Shape& s : {Shape{1}, Shape{33}, Shape{6, 7, 5}}) {
        CAPTURE(shape_str(s));
        const Tensor positive = abs(random(s, f32, gen)) + 0.25;
        for (UnaryOp op : {UnaryOp::neg, UnaryOp::exp, UnaryOp::log, UnaryOp::sqrt, UnaryOp::rsqrt, UnaryOp::tanh,
                           UnaryOp::sigmoid, UnaryOp::relu, UnaryOp::silu, UnaryOp::gelu, UnaryOp::erf, UnaryOp::abs,
                           UnaryOp::pow}) {
            const bool needs_positive =
                op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt || op == UnaryOp::pow;
            compare_bf16("unary " + std::to_string(int(op)), {zeros(s, f32), needs_positive ? positive : random(s, f32, gen)},
                         {0, 1}, {0}, [op](const Backend& be, const std::vector<View>& v) { be.unary(op, v[0], v[1], 1.7); });
        }
        for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div, BinaryOp::maximum,
                            BinaryOp::minimum, BinaryOp::eq, BinaryOp::ne, BinaryOp::lt, BinaryOp::le, BinaryOp::gt,
                            BinaryOp::ge})
            compare_bf16("binary " + std::to_string(int(op)), {zeros(s, f32), random(s, f32, gen), positive}, {0, 1, 2},
                         {0}, [op](const Backend& be, const std::vector<View>& v) { be.binary(op, v[0], v[1], v[2]); });
    }
    const Tensor a = strided({4, 6}, f32, gen), row = random({6}, f32, gen).unsqueeze(0).expand({4, 6});
    compare_bf16("binary (strided, broadcast)", {zeros({4, 6}, f32), a, row}, {0, 1, 2}, {0},
                 [](const Backend& be, const std::vector<View>& v) { be.binary(BinaryOp::mul, v[0], v[1], v[2]); });
    compare_bf16("where (broadcast condition)",
                 {zeros({4, 6}, f32), gt(random({1, 6}, f32, gen), zeros({1, 6}, f32)).expand({4, 6}), a, row},
                 {0, 1, 2, 3}, {0},
                 [](const Backend& be, const std::vector<View>& v) { be.where(v[0], v[1], v[2], v[3]); });
}

TEST_CASE("table bf16: softmax, log_softmax, cross-entropy, RMSNorm, each way") {
    Generator gen(23);
    const DType f32 = DType::f32;
    // 256 columns take 8-wide bf16 packs, 257 one element at a time; 1100 a block per row.
    for (const Shape& s : {Shape{3, 7}, Shape{2, 256}, Shape{2, 257}, Shape{4, 1100}}) {
        CAPTURE(shape_str(s));
        for (bool log : {false, true}) {
            const Tensor x = random(s, f32, gen) * 4.0;
            compare_bf16("softmax", {zeros(s, f32), x}, {0, 1}, {0}, [&](const Backend& be, const std::vector<View>& v) {
                be.softmax(v[0], v[1], s[0], s[1], log);
            });
            const Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
            compare_bf16("softmax_backward", {zeros(s, f32), y, random(s, f32, gen)}, {0, 1, 2}, {0},
                         [&](const Backend& be, const std::vector<View>& v) {
                             be.softmax_backward(v[0], v[1], v[2], s[0], s[1], log);
                         });
        }
        std::vector<int64_t> targets(static_cast<size_t>(s[0]));
        for (int64_t i = 0; i < s[0]; ++i) targets[static_cast<size_t>(i)] = i % 3 == 1 ? -100 : gen.randint(0, s[1]);
        const Tensor x = random(s, f32, gen) * 3.0, t = from_vector(targets, {s[0]});
        compare_bf16("cross_entropy", {zeros({s[0]}, f32), x, t}, {0, 1}, {0},
                     [](const Backend& be, const std::vector<View>& v) {
                         be.cross_entropy(v[0], View{}, v[1], v[2], View{}, -100);
                     });
        const Tensor scale = rand({s[0]}, gen, f32);
        compare_bf16("cross_entropy with its gradient", {zeros({s[0]}, f32), zeros(s, f32), x, t, scale},
                     {0, 1, 2, 4}, {0, 1}, [](const Backend& be, const std::vector<View>& v) {
                         be.cross_entropy(v[0], v[1], v[2], v[3], v[4], -100);
                     });
        const Tensor w = random({s[1]}, f32, gen);
        compare_bf16("rms_norm_forward", {zeros(s, f32), zeros({s[0]}, f32), x, w}, {0, 2, 3}, {0, 1},
                     [&](const Backend& be, const std::vector<View>& v) {
                         be.rms_norm_forward(v[0], v[1], v[2], v[3], s[0], s[1], 1e-6);
                     });
        const Tensor rstd = rsqrt(mean(x * x, {-1}) + 1e-6);
        compare_bf16("rms_norm_backward", {zeros(s, f32), zeros({s[1]}, f32), random(s, f32, gen), x, w, rstd},
                     {0, 1, 2, 3, 4}, {0, 1}, [&](const Backend& be, const std::vector<View>& v) {
                         be.rms_norm_backward(v[0], v[1], v[2], v[3], v[4], v[5], s[0], s[1]);
                     });
    }
}

TEST_CASE("table bf16: GEMM on the tensor cores, every transpose, batched with strides") {
    Generator gen(24);
    struct Case {
        int64_t batch, M, N, K;
        bool ta, tb;
    };
    for (Case c : {Case{1, 1, 1, 1, false, false}, Case{1, 7, 33, 5, false, true}, Case{3, 17, 9, 65, true, false},
                   Case{2, 40, 31, 18, true, true}, Case{1, 5, 0, 3, false, false}, Case{1, 4, 6, 0, false, false}}) {
        CAPTURE(c.batch);
        CAPTURE(c.M);
        CAPTURE(c.N);
        CAPTURE(c.K);
        const Shape a_shape = c.ta ? Shape{c.batch, c.K, c.M} : Shape{c.batch, c.M, c.K};
        const Shape b_shape = c.tb ? Shape{c.batch, c.N, c.K} : Shape{c.batch, c.K, c.N};
        const int64_t lda = std::max<int64_t>(a_shape[2], 1), ldb = std::max<int64_t>(b_shape[2], 1);
        const int64_t ldc = std::max<int64_t>(c.N, 1);
        for (double beta : {0.0, 0.5}) {
            const Tensor C = beta == 0 ? full({c.batch, c.M, c.N}, NAN, DType::f32)
                                       : random({c.batch, c.M, c.N}, DType::f32, gen);
            compare_bf16("gemm", {random(a_shape, DType::f32, gen), random(b_shape, DType::f32, gen), C}, {0, 1, 2},
                         {2}, [&](const Backend& be, const std::vector<View>& v) {
                             be.gemm(v[2].dtype, c.batch, c.ta, c.tb, c.M, c.N, c.K, 1.5, v[0].data, lda,
                                     a_shape[1] * lda, v[1].data, ldb, b_shape[1] * ldb, beta, v[2].data, ldc,
                                     c.M * c.N);
                         });
        }
    }
}

// The rows above have tight leading dimensions, none a multiple of 8, so they take the
// element-by-element path. Here every leading dimension and batch stride is a whole number of
// 16-byte chunks (8 bf16) and every operand starts on 16 bytes: the 4-stage cp.async pipeline
// (cuda/gemm_bf16.cu), asserted through the host's own choice (gemm_bf16_pipelines). The sizes
// stay off 8, off the 64×64 tile and the 32-wide K slice, so chunks past an edge are zero-filled,
// whole and in part; the padding between rows holds random values the kernel must not add in.
TEST_CASE("table bf16: GEMM through the cp.async pipeline, leading dimensions of whole chunks, edges zero-filled") {
    Generator gen(27);
    struct Case {
        int64_t batch, M, N, K;
        bool ta, tb;
    };
    const auto whole_chunks = [](int64_t cols) { return (cols + 7) / 8 * 8; };
    for (Case c : {Case{1, 7, 33, 65, false, true}, Case{2, 70, 20, 41, true, false}, Case{3, 64, 64, 32, false, false},
                   Case{1, 130, 9, 200, true, true}}) {
        CAPTURE(c.batch);
        CAPTURE(c.M);
        CAPTURE(c.N);
        CAPTURE(c.K);
        const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
        const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
        const int64_t lda = whole_chunks(a_cols), ldb = whole_chunks(b_cols) + 8, ldc = c.N + 3;
        const Tensor A = random({c.batch, a_rows, lda}, DType::f32, gen), B = random({c.batch, b_rows, ldb}, DType::f32, gen);
        for (double beta : {0.0, 0.5}) {
            const Tensor C = beta == 0 ? full({c.batch, c.M, ldc}, NAN, DType::f32)
                                       : random({c.batch, c.M, ldc}, DType::f32, gen);
            compare_bf16("gemm (cp.async)", {A, B, C}, {0, 1, 2}, {2}, [&](const Backend& be, const std::vector<View>& v) {
                const auto* a = static_cast<const bfloat16*>(v[0].data);
                const auto* b = static_cast<const bfloat16*>(v[1].data);
                CHECK(cuda::emulated::gemm_bf16_pipelines(c.batch, a, lda, a_rows * lda, b, ldb, b_rows * ldb));
                be.gemm(v[2].dtype, c.batch, c.ta, c.tb, c.M, c.N, c.K, 1.5, a, lda, a_rows * lda, b, ldb,
                        b_rows * ldb, beta, v[2].data, ldc, c.M * ldc);
            });
        }
    }
}

TEST_CASE("table bf16: reductions, the sum of squares, embedding rows, routing, SwiGLU and RoPE") {
    Generator gen(25);
    const DType f32 = DType::f32;
    struct Block {
        int64_t outer, R, inner;
    };
    for (Block b : {Block{1, 1, 1}, Block{3, 0, 2}, Block{1, 1000, 1}, Block{5, 37, 3}, Block{2, 7, 129}}) {
        CAPTURE(b.R);
        CAPTURE(b.inner);
        const Tensor in = random({b.outer, b.R, b.inner}, f32, gen);
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
            if (op != ReduceOp::sum && b.R == 0) continue;
            compare_bf16("reduce " + std::to_string(int(op)), {zeros({b.outer, b.inner}, f32), in}, {0, 1}, {0},
                         [op, b](const Backend& be, const std::vector<View>& v) {
                             be.reduce(op, v[0], v[1], b.outer, b.R, b.inner);
                         });
        }
    }
    // The sum of squares of bf16 values into an f64 accumulator: packs of 8 (4099 is not a
    // multiple), and one element at a time from a view one element in.
    for (int64_t n : {1, 1000, 4099}) {
        compare_bf16("sum_squares", {full({}, 1.5, DType::f64), random({n}, f32, gen)}, {1}, {0},
                     [](const Backend& be, const std::vector<View>& v) { be.sum_squares(v[0], {&v[1], 1}); });
        compare_bf16("sum_squares, misaligned", {full({}, 1.5, DType::f64), random({n + 1}, f32, gen).narrow(0, 1, n)},
                     {1}, {0}, [](const Backend& be, const std::vector<View>& v) { be.sum_squares(v[0], {&v[1], 1}); });
    }
    for (int64_t n : {1, 5, 1027}) {
        const Tensor a = random({n}, f32, gen), b = random({n}, f32, gen);
        compare_bf16("swiglu_forward", {zeros({n}, f32), a, b}, {0, 1, 2}, {0},
                     [](const Backend& be, const std::vector<View>& v) { be.swiglu_forward(v[0], v[1], v[2]); });
        compare_bf16("swiglu_backward", {zeros({n}, f32), zeros({n}, f32), random({n}, f32, gen), a, b},
                     {0, 1, 2, 3, 4}, {0, 1}, [](const Backend& be, const std::vector<View>& v) {
                         be.swiglu_backward(v[0], v[1], v[2], v[3], v[4]);
                     });
        compare_bf16("sigmoid_gate_forward", {zeros({n}, f32), a, b}, {0, 1, 2}, {0},
                     [](const Backend& be, const std::vector<View>& v) { be.sigmoid_gate_forward(v[0], v[1], v[2]); });
        compare_bf16("sigmoid_gate_backward", {zeros({n}, f32), zeros({n}, f32), random({n}, f32, gen), a, b},
                     {0, 1, 2, 3, 4}, {0, 1}, [](const Backend& be, const std::vector<View>& v) {
                         be.sigmoid_gate_backward(v[0], v[1], v[2], v[3], v[4]);
                     });
    }
    // Embedding rows: a gather (copied as 2-byte words) and a scatter-add with repeated ids.
    const Tensor table = random({11, 13}, f32, gen), ids = from_vector(std::vector<int64_t>{3, 0, 10, 3, 7, 3}, {6});
    compare_bf16("index_select_rows", {zeros({6, 13}, f32), table, ids}, {0, 1}, {0},
                 [](const Backend& be, const std::vector<View>& v) { be.index_select_rows(v[0], v[1], v[2]); });
    compare_bf16("index_add_rows", {table, ids, random({6, 13}, f32, gen)}, {0, 2}, {0},
                 [](const Backend& be, const std::vector<View>& v) { be.index_add_rows(v[0], v[1], v[2]); });
    // Routing along the last dim: gather, scatter-add with repeated columns, top-k with ties.
    const Tensor in = random({6, 19}, f32, gen), idx = randint(0, 19, {6, 3}, gen);
    compare_bf16("gather_last", {zeros({6, 3}, f32), in, idx}, {0, 1}, {0},
                 [](const Backend& be, const std::vector<View>& v) { be.gather_last(v[0], v[1], v[2]); });
    const Tensor repeats = from_vector(std::vector<int64_t>{2, 2, 5, 2, 0, 1, 1, 7}, {2, 4});
    compare_bf16("scatter_add_last", {random({2, 9}, f32, gen), repeats, random({2, 4}, f32, gen)}, {0, 2}, {0},
                 [](const Backend& be, const std::vector<View>& v) { be.scatter_add_last(v[0], v[1], v[2]); });
    for (int64_t k : {1, 4, 19}) {
        const Tensor x = randint(0, 4, {5, 19}, gen).to(f32) * 0.3;  // ties after rounding too
        compare_bf16("topk_last k=" + std::to_string(k), {zeros({5, k}, f32), zeros({5, k}, DType::i64), x}, {0, 2},
                     {0, 1}, [k](const Backend& be, const std::vector<View>& v) { be.topk_last(v[0], v[1], v[2], k); });
    }
    for (const Shape& s : {Shape{2, 3, 5, 8}, Shape{1, 1, 1, 2}}) {
        CAPTURE(shape_str(s));
        const Tensor cos = random({s[2], s[3]}, f32, gen), sin = random({s[2], s[3]}, f32, gen);
        const Tensor transposed = random({s[0], s[2], s[1], s[3]}, f32, gen).transpose(1, 2);
        for (const Tensor& x : {random(s, f32, gen), transposed})
            for (bool transpose : {false, true})
                compare_bf16("rope", {zeros(s, f32), x, cos, sin}, {0, 1, 2, 3}, {0},
                             [transpose](const Backend& be, const std::vector<View>& v) {
                                 be.rope(v[0], v[1], v[2], v[3], transpose);
                             });
    }
}

TEST_CASE("table bf16: attention forward and backward (bf16 Q, K, V, O; lse in f32)") {
    Generator gen(26);
    const DType f32 = DType::f32;
    struct Case {
        int64_t B, H, Hkv, Tq, Tk, D;
        bool causal;
        int64_t window;
    };
    // D 8: 8-byte packs of 4 bf16; D 5: one value at a time; 70 rows: two tiles of 64. D 16 and
    // 32 take the tensor-core kernels, which round P (and dS) to bf16 before their products: up
    // to two roundings of each term, 4 ulps of the largest output to spare.
    const double term_ulps = 4;
    for (Case c : {Case{2, 4, 2, 9, 9, 8, true, 0}, Case{1, 2, 1, 7, 7, 5, true, 3}, Case{1, 4, 1, 3, 11, 16, true, 0},
                   Case{1, 1, 1, 70, 70, 32, true, 0}, Case{1, 1, 1, 5, 8, 3, false, 0}}) {
        CAPTURE(c.Tq);
        CAPTURE(c.D);
        const AttentionShape s{c.B, c.H, c.Hkv, c.Tq, c.Tk, c.D, c.causal, c.window, 1 / std::sqrt(double(c.D)), false};
        const Tensor Q = random({c.B, c.H, c.Tq, c.D}, f32, gen), K = random({c.B, c.Hkv, c.Tk, c.D}, f32, gen),
                     V = random({c.B, c.Hkv, c.Tk, c.D}, f32, gen);
        compare_bf16("attention_forward",
                     {zeros({c.B, c.H, c.Tq, c.D}, f32), zeros({c.B, c.H, c.Tq}, f32),
                      zeros({c.B, c.H, c.Tq, c.Tk}, f32), Q, K, V},
                     {0, 2, 3, 4, 5}, {0, 1, 2}, [&](const Backend& be, const std::vector<View>& v) {
                         be.attention_forward(s, v[0], v[1], v[2], v[3], v[4], v[5], View{});
                     },
                     term_ulps);
        // The backward from the CPU's forward on the same (rounded) inputs; O rounded too.
        const Tensor O_cpu = zeros({c.B, c.H, c.Tq, c.D}, f32), lse_cpu = zeros({c.B, c.H, c.Tq}, f32);
        std::vector<float> rounded[3];
        const Tensor* inputs[3] = {&Q, &K, &V};
        std::vector<Tensor> bf16_inputs;
        for (int i = 0; i < 3; ++i) {
            rounded[i] = inputs[i]->to_vector<float>();
            for (float& x : rounded[i]) x = round_to_bf16(x);
            bf16_inputs.push_back(from_vector(rounded[i], inputs[i]->shape()));
        }
        backend(Device::CPU).attention_forward(s, O_cpu.view_desc(), lse_cpu.view_desc(), View{},
                                               bf16_inputs[0].view_desc(), bf16_inputs[1].view_desc(),
                                               bf16_inputs[2].view_desc(), View{});
        compare_bf16("attention_backward",
                     {zeros(Q.shape(), f32), zeros(K.shape(), f32), zeros(V.shape(), f32), random(Q.shape(), f32, gen),
                      Q, K, V, O_cpu, lse_cpu},
                     {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2}, [&](const Backend& be, const std::vector<View>& v) {
                         be.attention_backward(s, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], View{});
                     },
                     term_ulps);
    }
    // lse in bf16 would spoil every recomputed probability: refused, naming the dtypes.
    const Backend& be = cuda::emulated::backend_table();
    const AttentionShape s{1, 1, 1, 2, 2, 4, true, 0, 0.5, false};
    DeviceBuffer buffer(be, 256);
    View x = zeros({1, 1, 2, 4}, f32).view_desc(), lse = zeros({1, 1, 2}, f32).view_desc();
    x.data = lse.data = buffer.data, x.dtype = lse.dtype = DType::bf16;
    CHECK_THROWS_WITH_AS(be.attention_forward(s, x, lse, View{}, x, x, x, View{}),
                         "attention_forward: lse is bfloat16; with bfloat16 Q, K, V it must be float32",
                         std::invalid_argument);
}

TEST_CASE("table bf16: the optimisers refuse bf16, naming it: they update f32 master weights") {
    const Backend& be = cuda::emulated::backend_table();
    DeviceBuffer buffer(be, 64 * sizeof(float));
    View v = zeros({8}, DType::f32).view_desc();
    v.data = buffer.data, v.dtype = DType::bf16;
    const AdamWTensors param{AdamWStep{}, v, v, v, v};
    CHECK_THROWS_WITH_AS(be.adamw_step({&param, 1}),
                         doctest::Contains("adamw_step: parameter bfloat16, gradient bfloat16: the optimisers take "
                                           "f32 or f64 master weights"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(be.sgd_step(SGDStep{}, v, v, v), doctest::Contains("sgd_step"), std::invalid_argument);
}

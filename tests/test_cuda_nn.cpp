// test_cuda_nn.cpp — the CUDA kernels of the nn families (reduce, softmax, cross_entropy,
// embedding, routing, rms_norm, optim) against the CPU backend on the same inputs, in the
// emulator (cuda/emulator/) and, where one answers, on the GPU (tests/cuda_targets.h): odd sizes,
// sizes off the warp and block shapes, empty dims, f32 and f64 (and int64 where the entry
// takes it), reruns that must be bitwise identical, and index errors that must read as the
// CPU's. The row kernels that read rows in 16-byte packs (cuda/packs.h) run on rows that allow
// them and, one array at a time, on arrays that start one element off the alignment, which
// must send them back to one element a load.
//
// The inputs are host arrays (Array below); a call on a target sees them through OnTarget:
// the arrays themselves on the emulator, whose device memory is host memory, copies in device
// memory on the GPU, whose values come back before the checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/cuda_targets.h"
#include "tensor/backend.h"

using gg::testing::CudaTarget;
using gg::testing::cuda_targets;
using gg::DType;
using gg::ReduceOp;
using gg::Shape;
using gg::View;

namespace {

const gg::Backend& cpu() { return gg::backend(gg::Device::CPU); }

template <class T>
constexpr DType kDType = std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, double> ? DType::f64 : DType::i64;

// Relative above 1, absolute below: the brief's tolerances; integers must be exact.
template <class T>
constexpr double kTol = std::is_same_v<T, float> ? 1e-5 : std::is_same_v<T, double> ? 1e-12 : 0;

// A host array with a shape, from element `offset` of data.
template <class T>
struct Array {
    Shape shape;
    std::vector<T> data;
    int64_t offset = 0;
    View view() { return gg::make_view(data.data() + offset, kDType<T>, shape, gg::contiguous_strides(shape)); }
};

// a, one element further into its storage: 4 or 8 bytes off the 16-byte alignment of the
// allocation, so a row kernel must not read it in packs (cuda/packs.h).
template <class T>
Array<T> shifted(Array<T> a) {
    a.data.insert(a.data.begin(), T(7));
    a.offset = 1;
    return a;
}

// Hands back each array of a call in turn, shifted() if it is the `which`-th (−1: none): a
// row kernel that reads in packs must check every one of its pointers.
template <class T>
struct ShiftOne {
    int which, next = 0;
    Array<T> operator()(Array<T> a) { return next++ == which ? shifted(std::move(a)) : a; }
};

std::mt19937_64& rng() {
    static std::mt19937_64 generator(2505);
    return generator;
}

// Uniform: reals in [lo, hi) for floating T, integers in [lo, hi] for int64.
template <class T>
Array<T> random_array(const Shape& shape, double lo = -3, double hi = 3) {
    Array<T> a{shape, std::vector<T>(gg::shape_numel(shape))};
    std::uniform_int_distribution<int64_t> integer{int64_t(lo), int64_t(hi)};
    std::uniform_real_distribution<double> real(lo, hi);
    for (T& x : a.data) x = std::is_integral_v<T> ? T(integer(rng())) : T(real(rng()));
    return a;
}

// Outputs start at a value no kernel writes, so that an element left unwritten shows.
template <class T>
Array<T> filled(const Shape& shape, T value = T(7)) {
    return {shape, std::vector<T>(gg::shape_numel(shape), value)};
}

// Ids in [0, limit).
Array<int64_t> random_ids(const Shape& shape, int64_t limit) {
    return random_array<int64_t>(shape, 0, double(limit - 1));
}

// "" when got holds expected within tol (NaN matches NaN), else the first difference.
template <class T>
std::string mismatch(const std::vector<T>& got, const std::vector<T>& expected, double tol = kTol<T>) {
    if (got.size() != expected.size()) return "sizes differ";
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = double(got[i]), e = double(expected[i]);
        if (g == e || (std::isnan(g) && std::isnan(e))) continue;
        if (!(std::abs(g - e) <= tol * std::max(1.0, std::abs(e))))
            return "element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " + std::to_string(e);
    }
    return "";
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The message of the std::out_of_range that `call` on `table` raised, at once (the CPU) or
// when the table next synchronizes and checks its device error record; "" when there was none.
template <class F>
std::string out_of_range_message(const gg::Backend& table, F&& call) {
    try {
        call();
        table.synchronize();
    } catch (const std::out_of_range& e) {
        return e.what();
    }
    return "";
}

// Sizes and offsets of the tensors of a list (AdamW, sum_squares): 1001 elements (packs of 4
// f32 or 2 f64 and a left-over tail), the same one element in (misaligned: one element at a
// time), 7, none, forty small ones of 1 to 40 elements, every third misaligned, and one of
// several 16384-element chunks (cuda/tensor_list.h) with a tail.
std::vector<std::pair<int64_t, int64_t>> list_sizes() {
    std::vector<std::pair<int64_t, int64_t>> sizes{{1001, 0}, {1001, 1}, {7, 0}, {0, 0}};
    for (int64_t n = 1; n <= 40; ++n) sizes.push_back({n, n % 3 == 0});
    sizes.push_back({50003, 0});
    return sizes;
}

// n elements from element `offset` of a's storage.
template <class T>
View at(Array<T>& a, int64_t n, int64_t offset) {
    return gg::make_view(a.data.data() + offset, kDType<T>, {n}, {1});
}

// The arrays of some calls on target t. on(a) is the view t computes on: a's own storage on
// the emulator, a copy in device memory on the GPU (copied there when first handed out, so an
// array must be filled before). done() waits for t, throws the index error a kernel reported,
// and brings every array handed out back from t: after it, the host arrays hold t's results.
class OnTarget {
public:
    explicit OnTarget(const CudaTarget& t) : t_(t), mirror_(t) {}
    template <class T>
    View operator()(Array<T>& a) {
        return gg::make_view(place(a) + a.offset, kDType<T>, a.shape, gg::contiguous_strides(a.shape));
    }
    template <class T>
    View at(Array<T>& a, int64_t n, int64_t offset) {  // as at() above
        return gg::make_view(place(a) + offset, kDType<T>, {n}, {1});
    }
    void done() {
        t_.table->synchronize();
        for (const auto& back : backs_) back();
    }

private:
    template <class T>
    T* place(Array<T>& a) {
        if (placed_.insert(a.data.data()).second) backs_.push_back([this, &a] { mirror_.back(a.data); });
        return mirror_.on(a.data);
    }
    const CudaTarget& t_;
    gg::testing::Mirror mirror_;
    std::set<const void*> placed_;
    std::vector<std::function<void()>> backs_;
};

// ---- reduce, sum_squares --------------------------------------------------------------------

struct ReduceShape {
    int64_t outer, R, inner;
};

TEST_CASE_TEMPLATE("reduce: sum, max and min over the middle axis match the CPU, bitwise on a rerun", T, float, double,
                   int64_t) {
    // Warp rows, a block row (R > 1024), strided rows (inner < 32), column blocks (inner ≥ 32,
    // off multiples of 32, R above and below 16), tall columns cut into row chunks (2 chunks
    // for each of 2 outputs, 3 chunks of 334 rows with a shorter last one), an empty reduced
    // dim, empty outputs.
    for (const auto& [outer, R, inner] : {ReduceShape{3, 5, 1}, {2, 37, 1}, {1, 1500, 1}, {4, 7, 3}, {2, 5, 33},
                                          {3, 40, 70}, {2, 600, 40}, {1, 1000, 32}, {2, 0, 4}, {2, 0, 40}, {0, 4, 3},
                                          {3, 4, 0}})
        for (const ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
            if (op != ReduceOp::sum && R == 0) continue;
            CAPTURE(outer); CAPTURE(R); CAPTURE(inner); CAPTURE(int(op));
            Array<T> in = random_array<T>({outer, R, inner}, -50, 50);
            Array<T> want = filled<T>({outer, inner});
            cpu().reduce(op, want.view(), in.view(), outer, R, inner);
            for (const CudaTarget& t : cuda_targets()) {
                CAPTURE(t.name);
                Array<T> got = filled<T>({outer, inner}), again = got;
                OnTarget on(t);
                t.table->reduce(op, on(got), on(in), outer, R, inner);
                t.table->reduce(op, on(again), on(in), outer, R, inner);
                on.done();
                CHECK(mismatch(got.data, want.data) == "");
                CHECK(bitwise_equal(got.data, again.data));
            }
        }
}

TEST_CASE("reduce: max and min propagate NaN as the CPU does; over an empty dim they are an error") {
    for (const auto& [outer, R, inner] : {ReduceShape{3, 40, 1}, {2, 6, 35}, {2, 600, 35}})  // the last: 2 chunks
        for (const ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
            Array<float> in = random_array<float>({outer, R, inner});
            in.data[R * inner + 5 * inner] = NAN;  // outer 1, r = 5, j = 0
            in.data[2 * inner + inner - 1] = NAN;  // outer 0, r = 2, j = inner − 1
            Array<float> want = filled<float>({outer, inner});
            cpu().reduce(op, want.view(), in.view(), outer, R, inner);
            for (const CudaTarget& t : cuda_targets()) {
                CAPTURE(t.name);
                Array<float> got = filled<float>({outer, inner});
                OnTarget on(t);
                t.table->reduce(op, on(got), on(in), outer, R, inner);
                on.done();
                CHECK(std::isnan(got.data[inner]));
                CHECK(mismatch(got.data, want.data) == "");
            }
        }
    for (const CudaTarget& t : cuda_targets()) {
        CAPTURE(t.name);
        Array<float> in = filled<float>({2, 0, 3}), out = filled<float>({2, 3});
        OnTarget on(t);
        CHECK_THROWS_WITH_AS(t.table->reduce(ReduceOp::max, on(out), on(in), 2, 0, 3),
                             "reduce: max/min over an empty dim", std::invalid_argument);
    }
}

TEST_CASE_TEMPLATE("sum_squares adds Σ x² to a float64 accumulator like the CPU, the same on every run", T, float,
                   double) {
    // No chunk, one partial chunk, five chunks (cuda/tensor_list.h) with 3 floats left over; and
    // x one element into its storage: misaligned, one element a load.
    for (const int64_t n : {0, 1, 300, 70003})
        for (const int which : {-1, 0}) {
            CAPTURE(n); CAPTURE(which);
            Array<T> x = ShiftOne<T>{which}(random_array<T>({n}));
            Array<double> want{{}, {1.5}};
            cpu().sum_squares(want.view(), std::vector<View>{x.view()});
            for (const CudaTarget& t : cuda_targets()) {
                CAPTURE(t.name);
                Array<double> got{{}, {1.5}}, again = got;
                OnTarget on(t);
                const std::vector<View> xs{on(x)};
                t.table->sum_squares(on(got), xs);
                t.table->sum_squares(on(again), xs);
                on.done();
                CHECK(mismatch(got.data, want.data, 1e-12) == "");
                CHECK(bitwise_equal(got.data, again.data));
            }
        }
}

TEST_CASE("sum_squares of a list: many small tensors and one large, f32 and f64, in one call") {
    // Alternate the types by size, so that both run misaligned and in packs. (A deque would
    // do; reserving keeps the arrays where the views point.)
    const auto sizes = list_sizes();
    std::vector<Array<float>> floats;
    std::vector<Array<double>> doubles;
    floats.reserve(sizes.size()), doubles.reserve(sizes.size());
    for (const auto& [n, offset] : sizes) {
        if (n % 2 == 0) floats.push_back(random_array<float>({n + offset}));
        else doubles.push_back(random_array<double>({n + offset}));
    }
    // The list's views, each of its n elements from `offset`, through `view(array, n, offset)`.
    const auto list = [&](auto&& view) {
        std::vector<View> xs;
        size_t f = 0, d = 0;
        for (const auto& [n, offset] : sizes)
            xs.push_back(n % 2 == 0 ? view(floats[f++], n, offset) : view(doubles[d++], n, offset));
        return xs;
    };
    Array<double> want{{}, {1.5}};
    cpu().sum_squares(want.view(), list([](auto& a, int64_t n, int64_t offset) { return at(a, n, offset); }));
    for (const CudaTarget& t : cuda_targets()) {
        CAPTURE(t.name);
        Array<double> got{{}, {1.5}}, again = got;
        OnTarget on(t);
        const std::vector<View> xs = list([&](auto& a, int64_t n, int64_t offset) { return on.at(a, n, offset); });
        t.table->sum_squares(on(got), xs);
        t.table->sum_squares(on(again), xs);
        on.done();
        CHECK(mismatch(got.data, want.data, 1e-12) == "");
        CHECK(bitwise_equal(got.data, again.data));
        CHECK(got.data[0] > 1.5 + 1000);  // the large tensor's ~50000 squares of mean 3 are in it
    }
}

// ---- softmax, cross_entropy -----------------------------------------------------------------

struct RowShape {
    int64_t rows, cols;
};
// Warp rows (8 per block; 9 rows leave a block part-empty), block rows (cols > 1024), empty;
// rows in packs (cols a multiple of 4): 9 packs on a warp, 257 on a block (its first thread
// takes two), 500.
constexpr RowShape kRowShapes[] = {{5, 7}, {9, 33}, {3, 1025}, {9, 36}, {3, 1028}, {2, 2000}, {0, 5}};

TEST_CASE_TEMPLATE("softmax and log_softmax, forward and backward, match the CPU", T, float, double) {
    for (const auto& [rows, cols] : kRowShapes)
        for (const bool log : {false, true})
            for (int which = -1; which < 4; ++which) {  // x, y, dy or dx shifted
                CAPTURE(rows); CAPTURE(cols); CAPTURE(log); CAPTURE(which);
                ShiftOne<T> place{which};
                Array<T> x = place(random_array<T>({rows, cols}, -5, 5));
                if (rows * cols > 1) x.data[1] = -INFINITY;  // a masked position
                Array<T> want = place(filled<T>({rows, cols})), start = want;
                cpu().softmax(want.view(), x.view(), rows, cols, log);
                Array<T> dy = place(random_array<T>({rows, cols}));
                Array<T> dx_want = place(filled<T>({rows, cols})), dx_start = dx_want;
                cpu().softmax_backward(dx_want.view(), want.view(), dy.view(), rows, cols, log);
                for (const CudaTarget& t : cuda_targets()) {
                    CAPTURE(t.name);
                    Array<T> got = start, again = start, dx_got = dx_start;
                    OnTarget on(t);
                    t.table->softmax(on(got), on(x), rows, cols, log);
                    t.table->softmax(on(again), on(x), rows, cols, log);
                    t.table->softmax_backward(on(dx_got), on(want), on(dy), rows, cols, log);  // from the CPU's y
                    on.done();
                    CHECK(mismatch(got.data, want.data) == "");
                    CHECK(bitwise_equal(got.data, again.data));
                    CHECK(mismatch(dx_got.data, dx_want.data) == "");
                }
            }
}

TEST_CASE_TEMPLATE("cross_entropy and its gradient match the CPU, ignored rows included", T, float, double) {
    // V = 36 and 1500: rows in packs of 4 f32 (10: of 2 f64). Each thread keeps 8 packs of its
    // row in registers for the gradient: 257 and 700 columns on a warp and 2500 on a block
    // read the rest again (one a load, or f64 packs of 2), 9000 in f32 packs.
    for (const auto& [N, V] :
         {RowShape{6, 10}, {11, 37}, {9, 36}, {3, 1500}, {0, 5}, {5, 257}, {3, 700}, {2, 2500}, {2, 9000}})
        for (const int64_t ignore_index : {int64_t(-100), int64_t(2)})  // outside and inside [0, V)
            for (int which = -1; which < 2; ++which) {  // logits or dlogits shifted
                CAPTURE(N); CAPTURE(V); CAPTURE(ignore_index); CAPTURE(which);
                ShiftOne<T> place{which};
                Array<T> logits = place(random_array<T>({N, V}, -6, 6));
                Array<int64_t> targets = random_ids({N}, V);
                Array<T> row_scale = random_array<T>({N}, 0.5, 1.5);
                if (N > 1) targets.data[1] = ignore_index, row_scale.data[1] = 0;
                // The loss alone (no gradient asked for), then the loss and its gradient.
                Array<T> want = filled<T>({N});
                cpu().cross_entropy(want.view(), View{}, logits.view(), targets.view(), View{}, ignore_index);
                Array<T> dx_want = place(filled<T>({N, V})), dx_start = dx_want, loss_again = filled<T>({N});
                cpu().cross_entropy(loss_again.view(), dx_want.view(), logits.view(), targets.view(), row_scale.view(),
                                    ignore_index);
                for (const CudaTarget& t : cuda_targets()) {
                    CAPTURE(t.name);
                    Array<T> got = filled<T>({N}), again = got, fused = got, dx_got = dx_start;
                    OnTarget on(t);
                    t.table->cross_entropy(on(got), View{}, on(logits), on(targets), View{}, ignore_index);
                    t.table->cross_entropy(on(again), View{}, on(logits), on(targets), View{}, ignore_index);
                    t.table->cross_entropy(on(fused), on(dx_got), on(logits), on(targets), on(row_scale),
                                           ignore_index);
                    on.done();
                    CHECK(mismatch(got.data, want.data) == "");
                    CHECK(bitwise_equal(got.data, again.data));
                    // The same loss with the gradient asked for; bitwise, unless a misaligned
                    // dlogits (which == 1) sends the row to one column a load: another sum order.
                    if (which == 1) CHECK(mismatch(fused.data, got.data) == "");
                    else CHECK(bitwise_equal(fused.data, got.data));
                    CHECK(mismatch(dx_got.data, dx_want.data) == "");
                }
            }
}

// The f32 row kernels compute in float with one online pass (cuda/row_reduce.h:
// row_max_sum_exp). The comparison with the CPU above (which sums in double) uses short rows
// of small values and a fixed tolerance, which float passes easily. These rows are wider:
// values of ±80 (exp spans 1e±69 and underflows float), ramps up and down (a rising ramp
// moves the running max at every element, so every element rescales the sum), −∞ entries,
// one column, and 50 000 columns (about 200 per thread of a 256-thread row group, in packs
// and one at a time). Against a double reference, each thread's part of the normaliser is
// off by at most about n · ε relative (n its elements: one rounding per add or rescale, a
// few ulps of expf each), the tree adds log2(group) more, and the output two or three; the
// bound used is k · ε with k = n + 2 log2(group) + 16, times 1 + |log p| (x − m is rounded
// on the scale of |x − m| ≤ |log p|, p the softmax value, so exp(x − m) is off by that many
// ε relative): relative to p for softmax and the gradient (plus float's smallest normal for
// results that underflow), absolute for log_softmax and the loss.
TEST_CASE("f32 softmax, log_softmax and cross_entropy against a double reference on wide rows") {
    constexpr double eps = std::numeric_limits<float>::epsilon(), tiny = std::numeric_limits<float>::min();
    for (const int64_t cols : {int64_t(1), int64_t(7), int64_t(1000), int64_t(1028), int64_t(50000), int64_t(50001)})
        for (const int which : {-1, 0}) {  // aligned, or x one element off (one column a load)
            CAPTURE(cols); CAPTURE(which);
            const int64_t rows = 4;
            ShiftOne<float> place{which};
            Array<float> x = place(random_array<float>({rows, cols}, -80, 80));
            float* xd = x.data.data() + x.offset;
            for (int64_t c = 0; c < cols; ++c) {
                const float ramp = cols == 1 ? 80.f : float(-80 + 160 * double(c) / double(cols - 1));
                xd[1 * cols + c] = ramp;   // rising: a new max at every element
                xd[2 * cols + c] = -ramp;  // falling
                if (c % 3 == 1) xd[3 * cols + c] = -INFINITY;  // masked entries; column 0 stays finite
            }
            // The double reference: max, log Σ exp(x − max).
            std::vector<double> m(rows, -INFINITY), lse(rows);
            for (int64_t r = 0; r < rows; ++r) {
                for (int64_t c = 0; c < cols; ++c) m[r] = std::max(m[r], double(xd[r * cols + c]));
                double z = 0;
                for (int64_t c = 0; c < cols; ++c) z += std::exp(double(xd[r * cols + c]) - m[r]);
                lse[r] = m[r] + std::log(z);
            }
            const int64_t group = cols <= 1024 ? 32 : 256, W = cols % 4 == 0 && which == -1 ? 4 : 1;
            const int64_t n = (cols + group * W - 1) / (group * W) * W;  // elements one thread sums
            const double tol = double(n + 2 * int64_t(std::log2(double(group))) + 16) * eps;
            CAPTURE(tol);

            for (const CudaTarget& t : cuda_targets()) {
                CAPTURE(t.name);
                for (const bool log : {false, true}) {
                    CAPTURE(log);
                    Array<float> y = filled<float>({rows, cols}), again = y;
                    OnTarget on(t);
                    t.table->softmax(on(y), on(x), rows, cols, log);
                    t.table->softmax(on(again), on(x), rows, cols, log);
                    on.done();
                    CHECK(bitwise_equal(y.data, again.data));
                    int bad = 0;
                    for (int64_t r = 0; r < rows; ++r)
                        for (int64_t c = 0; c < cols; ++c) {
                            const double want_log = double(xd[r * cols + c]) - lse[r];
                            const double got = y.data[r * cols + c], want = log ? want_log : std::exp(want_log);
                            const double err = std::abs(got - want);
                            const bool ok = std::isinf(want_log) ? got == want
                                            : log               ? err <= tol * (1 + std::abs(want))
                                                                : err <= tol * (1 - want_log) * want + tiny;
                            if (!ok && bad++ < 3)
                                FAIL_CHECK("row " << r << " col " << c << ": " << got << " vs " << want);
                        }
                    CHECK(bad == 0);
                }

                Array<int64_t> targets({{rows}, {0, cols / 2, cols - 1, 0}});  // column 0 is finite in row 3
                Array<float> loss = filled<float>({rows});
                Array<float> scale({{rows}, {1.f, 1.f, 1.f, 1.f}}), dx = filled<float>({rows, cols});
                OnTarget on(t);
                t.table->cross_entropy(on(loss), on(dx), on(x), on(targets), on(scale), -100);
                on.done();
                for (int64_t r = 0; r < rows; ++r) {
                    const double want = lse[r] - double(xd[r * cols + targets.data[r]]);
                    CHECK_MESSAGE(std::abs(loss.data[r] - want) <= tol * (1 + std::abs(want)), "row " << r);
                }
                int bad = 0;
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t c = 0; c < cols; ++c) {
                        const double log_p = double(xd[r * cols + c]) - lse[r], p = std::exp(log_p);
                        const double want = p - (c == targets.data[r] ? 1 : 0), got = dx.data[r * cols + c];
                        const double bound = tol * ((1 - log_p) * p + std::abs(want)) + tiny;
                        const bool ok = got == want || std::abs(got - want) <= bound;
                        if (!ok && bad++ < 3)
                            FAIL_CHECK("dlogits row " << r << " col " << c << ": " << got << " vs " << want);
                    }
                CHECK(bad == 0);
            }
        }
}

// ---- embedding ------------------------------------------------------------------------------

struct TableShape {
    int64_t V, D, N;
};

TEST_CASE_TEMPLATE("index_select_rows gathers the CPU's rows", T, float, double, int64_t) {
    for (const auto& [V, D, N] : {TableShape{11, 5, 17}, {4, 300, 9}, {3, 2, 0}}) {
        CAPTURE(V); CAPTURE(D); CAPTURE(N);
        Array<T> table = random_array<T>({V, D});
        Array<int64_t> ids = random_ids({N}, V);
        Array<T> want = filled<T>({N, D});
        cpu().index_select_rows(want.view(), table.view(), ids.view());
        for (const CudaTarget& t : cuda_targets()) {
            CAPTURE(t.name);
            Array<T> got = filled<T>({N, D});
            OnTarget on(t);
            t.table->index_select_rows(on(got), on(table), on(ids));
            on.done();
            CHECK(bitwise_equal(got.data, want.data));
        }
    }
}

TEST_CASE_TEMPLATE("index_add_rows adds repeated ids in position order: bitwise the CPU's, on every run", T, float,
                   double, int64_t) {
    // 300 positions over 7 ids: every id repeats across several 256-position chunks; 300
    // columns make two column tiles.
    for (const auto& [V, D, N] : {TableShape{11, 5, 17}, {7, 300, 300}, {5, 3, 0}}) {
        CAPTURE(V); CAPTURE(D); CAPTURE(N);
        Array<T> src = random_array<T>({N, D});
        Array<int64_t> ids = random_ids({N}, V);
        Array<T> want = random_array<T>({V, D}), start = want;
        cpu().index_add_rows(want.view(), ids.view(), src.view());
        for (const CudaTarget& t : cuda_targets()) {
            CAPTURE(t.name);
            Array<T> got = start, again = start;
            OnTarget on(t);
            t.table->index_add_rows(on(got), on(ids), on(src));
            t.table->index_add_rows(on(again), on(ids), on(src));
            on.done();
            CHECK(bitwise_equal(got.data, want.data));
            CHECK(bitwise_equal(again.data, want.data));
        }
    }
}

// ---- routing --------------------------------------------------------------------------------

struct RoutingShape {
    int64_t rows, C, k;
};

TEST_CASE_TEMPLATE("gather_last and scatter_add_last match the CPU; repeated indices add up in order", T, float,
                   double, int64_t) {
    for (const auto& [rows, C, k] : {RoutingShape{7, 9, 4}, {300, 5, 6}, {0, 4, 2}}) {
        CAPTURE(rows); CAPTURE(C); CAPTURE(k);
        Array<T> in = random_array<T>({rows, C});
        Array<int64_t> idx = random_ids({rows, k}, C);  // k = 6 > C = 5: repeats in every row
        Array<T> want = filled<T>({rows, k});
        cpu().gather_last(want.view(), in.view(), idx.view());
        Array<T> src = random_array<T>({rows, k});
        Array<T> sum_want = random_array<T>({rows, C}), sum_start = sum_want;
        cpu().scatter_add_last(sum_want.view(), idx.view(), src.view());
        for (const CudaTarget& t : cuda_targets()) {
            CAPTURE(t.name);
            Array<T> got = filled<T>({rows, k}), sum_got = sum_start;
            OnTarget on(t);
            t.table->gather_last(on(got), on(in), on(idx));
            t.table->scatter_add_last(on(sum_got), on(idx), on(src));
            on.done();
            CHECK(bitwise_equal(got.data, want.data));
            CHECK(bitwise_equal(sum_got.data, sum_want.data));
        }
    }
}

TEST_CASE_TEMPLATE("topk_last picks the CPU's values and indices, ties by lower index first", T, float, double,
                   int64_t) {
    // Warp rows (C ≤ 1024, 10 rows fill one block and part of another), a full sort (k = C),
    // block rows (C > 1024), k = 0, no rows, a single column.
    for (const auto& [rows, C, k] :
         {RoutingShape{10, 9, 3}, {9, 40, 40}, {3, 1500, 5}, {5, 8, 0}, {0, 4, 2}, {4, 1, 1}})
        for (const double spread : {2.0, 1e3}) {  // integers in [−2, 2] tie often; in [−1000, 1000] rarely
            CAPTURE(rows); CAPTURE(C); CAPTURE(k); CAPTURE(spread);
            Array<T> in = random_array<T>({rows, C}, -spread, spread);
            for (T& x : in.data) x = T(std::round(double(x)));
            Array<T> values_want = filled<T>({rows, k});
            Array<int64_t> indices_want = filled<int64_t>({rows, k});
            cpu().topk_last(values_want.view(), indices_want.view(), in.view(), k);
            for (const CudaTarget& t : cuda_targets()) {
                CAPTURE(t.name);
                Array<T> values_got = filled<T>({rows, k});
                Array<int64_t> indices_got = filled<int64_t>({rows, k});
                OnTarget on(t);
                t.table->topk_last(on(values_got), on(indices_got), on(in), k);
                on.done();
                CHECK(bitwise_equal(values_got.data, values_want.data));
                CHECK(indices_got.data == indices_want.data);
            }
        }
}

TEST_CASE("topk_last: -0.0 and 0.0 tie (lower index first); NaN ranks above +inf") {
    for (const CudaTarget& t : cuda_targets()) {
        CAPTURE(t.name);
        Array<float> in{{1, 5}, {0.0f, -0.0f, NAN, INFINITY, -0.0f}};
        Array<float> values = filled<float>({1, 5});
        Array<int64_t> indices = filled<int64_t>({1, 5});
        OnTarget on(t);
        t.table->topk_last(on(values), on(indices), on(in), 5);
        on.done();
        CHECK(indices.data == std::vector<int64_t>{2, 3, 0, 1, 4});
        CHECK(std::isnan(values.data[0]));
        CHECK(!std::signbit(values.data[2]));
        CHECK(std::signbit(values.data[3]));
    }
}

// ---- index errors ---------------------------------------------------------------------------

TEST_CASE("an index out of range is reported with the CPU's message, and the record is cleared") {
    const std::string embedding = "embedding: index 11 at position 2 is out of range [0, 11)";
    const std::string index_add = "index_add: index -1 at position 1 is out of range [0, 11)";
    const std::string gather = "gather: index 5 at position 4 is out of range [0, 5)";
    const std::string scatter_add = "scatter_add: index 5 at position 4 is out of range [0, 5)";
    const std::string cross_entropy = "cross_entropy: index 10 at position 2 is out of range [0, 10)";
    // The CPU first (it throws at once), then each target (at its next synchronize).
    std::vector<CudaTarget> all{{"cpu", &cpu(), gg::Device::CPU}};
    all.insert(all.end(), cuda_targets().begin(), cuda_targets().end());
    for (const CudaTarget& t : all) {
        CAPTURE(t.name);
        const gg::Backend& b = *t.table;
        OnTarget on(t);
        Array<float> table = random_array<float>({11, 4}), rows = filled<float>({4, 4});
        Array<int64_t> ids{{4}, {0, 3, 11, 1}}, ids2{{4}, {2, -1, 2, 0}};
        CHECK(out_of_range_message(b, [&] { b.index_select_rows(on(rows), on(table), on(ids)); }) == embedding);
        CHECK_NOTHROW(b.synchronize());  // the record is cleared
        CHECK(out_of_range_message(b, [&] { b.index_add_rows(on(table), on(ids2), on(rows)); }) == index_add);

        Array<float> in = random_array<float>({2, 5}), picked = filled<float>({2, 3});
        Array<int64_t> idx{{2, 3}, {0, 4, 1, 2, 5, 3}};
        CHECK(out_of_range_message(b, [&] { b.gather_last(on(picked), on(in), on(idx)); }) == gather);
        CHECK(out_of_range_message(b, [&] { b.scatter_add_last(on(in), on(idx), on(picked)); }) == scatter_add);

        Array<float> logits = random_array<float>({3, 10}), loss = filled<float>({3}), scale = filled<float>({3}, 1.0f);
        Array<int64_t> targets{{3}, {4, -100, 10}};
        Array<float> dlogits = filled<float>({3, 10});
        for (const bool gradient : {false, true}) {
            const View d = gradient ? on(dlogits) : View{}, s = gradient ? on(scale) : View{};
            CHECK(out_of_range_message(b, [&] {
                      b.cross_entropy(on(loss), d, on(logits), on(targets), s, -100);
                  }) == cross_entropy);
        }
        CHECK_NOTHROW(on.done());
        CHECK(rows.data[2 * 4] == 7.0f);  // the bad id's row was skipped
    }
}

// ---- rms_norm -------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("rms_norm forward and backward match the CPU; dweight is the same on every run", T, float, double) {
    // Warp rows, column blocks with rows above 16, dw's rows cut into 2 chunks (700 rows of 40
    // columns), block rows (cols > 1024); no rows: dw = 0. 40 and 1100 columns: rows in packs
    // of 4 f32 (70: of 2 f64). dx keeps 8 packs of each row per thread in registers, and dw
    // then comes from the same pass (row groups' partials); rows longer than that read the rest
    // again and take dw down the columns (1000 columns in f64 packs or one at a time on a
    // warp, 2500 one at a time and 8200 in f32 packs on a block).
    for (const auto& [rows, cols] :
         {RowShape{5, 7}, {9, 40}, {33, 70}, {700, 40}, {3, 1100}, {0, 6}, {4, 1000}, {2, 2500}, {1, 8200}})
        for (int which = -1; which < 5; ++which) {  // x, w, y, dy or dx shifted
            CAPTURE(rows); CAPTURE(cols); CAPTURE(which);
            ShiftOne<T> place{which};
            Array<T> x = place(random_array<T>({rows, cols})), w = place(random_array<T>({cols}, 0.5, 1.5));
            Array<T> y_want = place(filled<T>({rows, cols})), y_start = y_want;
            Array<T> rstd_want = filled<T>({rows});
            cpu().rms_norm_forward(y_want.view(), rstd_want.view(), x.view(), w.view(), rows, cols, 1e-5);
            Array<T> dy = place(random_array<T>({rows, cols}));
            Array<T> dx_want = place(filled<T>({rows, cols})), dx_start = dx_want;
            Array<T> dw_want = filled<T>({cols});
            cpu().rms_norm_backward(dx_want.view(), dw_want.view(), dy.view(), x.view(), w.view(), rstd_want.view(),
                                    rows, cols);
            for (const CudaTarget& t : cuda_targets()) {
                CAPTURE(t.name);
                Array<T> y_got = y_start, rstd_got = filled<T>({rows}), dx_got = dx_start;
                Array<T> dw_got = filled<T>({cols}), dw_again = dw_got;
                OnTarget on(t);
                t.table->rms_norm_forward(on(y_got), on(rstd_got), on(x), on(w), rows, cols, 1e-5);
                // The backward from the CPU's rstd, twice: dw must come back bitwise.
                t.table->rms_norm_backward(on(dx_got), on(dw_got), on(dy), on(x), on(w), on(rstd_want), rows, cols);
                t.table->rms_norm_backward(on(dx_got), on(dw_again), on(dy), on(x), on(w), on(rstd_want), rows, cols);
                on.done();
                CHECK(mismatch(y_got.data, y_want.data) == "");
                CHECK(mismatch(rstd_got.data, rstd_want.data) == "");
                CHECK(mismatch(dx_got.data, dx_want.data) == "");
                CHECK(mismatch(dw_got.data, dw_want.data) == "");
                CHECK(bitwise_equal(dw_got.data, dw_again.data));
            }
        }
}

TEST_CASE_TEMPLATE("rms_norm dweight's two-level tree: blocks of many rows, several slots, odd columns", T, float,
                   double) {
    // More rows than the kFillBlocks · 8 = 2112 row groups, so each group adds several rows
    // before its block folds them (4500 × 8 in packs, 4500 × 13 one at a time); 2300 × 136
    // f32 columns are two slots of 128 (a full one and one of 8); 600 × 1030 are block rows,
    // five slots of 256, on 264 blocks of two or three rows. dw is compared with a float64 sum
    // taken here and with the CPU, and must come back bitwise on a rerun.
    for (const auto& [rows, cols] : {RowShape{4500, 8}, {4500, 13}, {2300, 136}, {600, 1030}}) {
        CAPTURE(rows); CAPTURE(cols);
        Array<T> x = random_array<T>({rows, cols}), w = random_array<T>({cols}, 0.5, 1.5);
        Array<T> dy = random_array<T>({rows, cols});
        Array<T> y = filled<T>({rows, cols}), rstd = filled<T>({rows});
        cpu().rms_norm_forward(y.view(), rstd.view(), x.view(), w.view(), rows, cols, 1e-5);
        Array<T> dx_want = filled<T>({rows, cols}), dw_want = filled<T>({cols});
        cpu().rms_norm_backward(dx_want.view(), dw_want.view(), dy.view(), x.view(), w.view(), rstd.view(), rows, cols);
        auto dw_exact = std::vector<T>(size_t(cols));
        for (int64_t c = 0; c < cols; ++c) {
            long double sum = 0;
            for (int64_t r = 0; r < rows; ++r)
                sum += (long double)dy.data[r * cols + c] * x.data[r * cols + c] * rstd.data[r];
            dw_exact[c] = T(sum);
        }
        for (const CudaTarget& t : cuda_targets()) {
            CAPTURE(t.name);
            Array<T> dx_got = filled<T>({rows, cols}), dw_got = filled<T>({cols}), dw_again = dw_got;
            OnTarget on(t);
            t.table->rms_norm_backward(on(dx_got), on(dw_got), on(dy), on(x), on(w), on(rstd), rows, cols);
            t.table->rms_norm_backward(on(dx_got), on(dw_again), on(dy), on(x), on(w), on(rstd), rows, cols);
            on.done();
            CHECK(mismatch(dx_got.data, dx_want.data) == "");
            CHECK(mismatch(dw_got.data, dw_want.data) == "");
            CHECK(mismatch(dw_got.data, dw_exact) == "");
            CHECK(bitwise_equal(dw_got.data, dw_again.data));
        }
    }
}

// ---- optim ----------------------------------------------------------------------------------

// Within a few ulps: the same operations in the same order as the CPU.
template <class T>
constexpr double kUlps = 4 * std::numeric_limits<T>::epsilon();

TEST_CASE_TEMPLATE("adamw_step over a list follows the CPU's arithmetic over several steps", T, float, double) {
    struct Param {
        int64_t n, offset;
        Array<T> p, m, v;
    };
    const auto sizes = list_sizes();
    std::vector<Param> start;
    for (const auto& [n, offset] : sizes) {
        const Shape shape{n + offset};
        Array<T> p = random_array<T>(shape), m = filled<T>(shape, T(0));
        start.push_back({n, offset, p, m, m});
    }
    // Three steps' gradients, drawn before any step; each parameter counts its own steps.
    std::vector<std::vector<Array<T>>> grads(3);
    for (auto& step : grads)
        for (const Param& q : start) step.push_back(random_array<T>({q.n + q.offset}));
    const auto hyper = [](int step, size_t i) {
        const double t = double(step + 1 + i % 3);
        return gg::AdamWStep{1e-2, 0.9, 0.999, 1e-8, 0.1, 1 - std::pow(0.9, t), 1 - std::pow(0.999, t)};
    };
    // The three steps on `table`, its tensors' views through `view(array, n, offset)`.
    const auto run = [&](const gg::Backend& table, std::vector<Param>& params, auto&& view) {
        for (int step = 0; step < 3; ++step) {
            std::vector<gg::AdamWTensors> list;
            for (size_t i = 0; i < params.size(); ++i) {
                Param& q = params[i];
                const auto v = [&](Array<T>& a) { return view(a, q.n, q.offset); };
                list.push_back({hyper(step, i), v(q.p), v(grads[size_t(step)][i]), v(q.m), v(q.v)});
            }
            table.adamw_step(list);
        }
    };
    std::vector<Param> want = start;
    run(cpu(), want, [](Array<T>& a, int64_t n, int64_t offset) { return at(a, n, offset); });
    for (const CudaTarget& t : cuda_targets()) {
        CAPTURE(t.name);
        std::vector<Param> got = start;
        OnTarget on(t);
        run(*t.table, got, [&](Array<T>& a, int64_t n, int64_t offset) { return on.at(a, n, offset); });
        on.done();
        for (size_t i = 0; i < got.size(); ++i) {
            CAPTURE(got[i].n); CAPTURE(got[i].offset);
            CHECK(mismatch(got[i].p.data, want[i].p.data, kUlps<T>) == "");
            CHECK(mismatch(got[i].m.data, want[i].m.data, kUlps<T>) == "");
            CHECK(mismatch(got[i].v.data, want[i].v.data, kUlps<T>) == "");
        }
    }
}

TEST_CASE_TEMPLATE("sgd_step follows the CPU's arithmetic over several steps", T, float, double) {
    for (const auto& [n, offset] : {std::pair<int64_t, int64_t>{1001, 0}, {1001, 1}, {7, 0}, {0, 0}}) {
        CAPTURE(n); CAPTURE(offset);
        const Shape shape{n + offset};
        for (const double momentum : {0.0, 0.9}) {
            CAPTURE(momentum);
            const gg::SGDStep step{0.05, momentum, 0.01};
            const Array<T> q_start = random_array<T>(shape), buf_start = filled<T>(shape, T(0));
            std::vector<Array<T>> grads;
            for (int i = 0; i < 3; ++i) grads.push_back(random_array<T>(shape));
            // Three steps on `table` through `view(array)`; without momentum there is no
            // buffer: its data pointer is null.
            const auto run = [&](const gg::Backend& table, Array<T>& q, Array<T>& buf, auto&& view) {
                for (Array<T>& g : grads) table.sgd_step(step, view(q), view(g), momentum == 0 ? View{} : view(buf));
            };
            Array<T> q_cpu = q_start, buf_cpu = buf_start;
            run(cpu(), q_cpu, buf_cpu, [&](Array<T>& a) { return at(a, n, offset); });
            for (const CudaTarget& t : cuda_targets()) {
                CAPTURE(t.name);
                Array<T> q = q_start, buf = buf_start;
                OnTarget on(t);
                run(*t.table, q, buf, [&](Array<T>& a) { return on.at(a, n, offset); });
                on.done();
                CHECK(mismatch(q.data, q_cpu.data, kUlps<T>) == "");
                CHECK(mismatch(buf.data, buf_cpu.data, kUlps<T>) == "");
            }
        }
    }
}

}  // namespace

// dist: the process group's collectives against a serial sum, the gradient buckets, and
// data-parallel training against one process with the whole batch. Runs under
// `mpirun -np 2` (tests/meson.build); every rank runs every test case, in the same order.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "distributed/patience.h"
#include "gatedgrad.h"
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<dist::ProcessGroup> world() {
    static std::shared_ptr<dist::ProcessGroup> group = dist::init_mpi();  // one MPI_Init per process
    return group;
}

// What rank r holds at position i: different on every rank, not integers.
double value(int r, int64_t i) { return std::sin(0.37 * double(i) + 1.3 * r) * (r + 1) + 0.001 * double(i); }

Tensor filled(int r, int64_t n, DType dtype) {
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = value(r, i);
    return from_vector(v, {n}).to(dtype);
}

// ‖a − b‖∞ / ‖b‖∞ (‖a − b‖∞ when b is zero).
double relative_difference(const Tensor& a, const Tensor& b) {
    const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
    double diff = 0, size = 0;
    for (size_t i = 0; i < x.size(); ++i) diff = std::max(diff, std::abs(x[i] - y[i])), size = std::max(size, std::abs(y[i]));
    return size > 0 ? diff / size : diff;
}

TrainConfig small_config(int64_t batch, int64_t world_size) {
    TrainConfig c;
    c.model.d_model = 32, c.model.n_layers = 2, c.model.attn.n_heads = 4, c.model.max_len = 16;
    c.batch_size = batch, c.world_size = world_size, c.seq_len = 16, c.steps = 20, c.warmup = 3, c.lr = 3e-3;
    c.eval_every = 10, c.eval_batches = 3, c.probe_every = 0, c.ckpt_minutes = 0;
    return c;
}

}  // namespace

TEST_CASE("dist: two ranks, ranks 0 and 1") {
    REQUIRE(world()->world_size() == 2);
    CHECK(world()->rank() == dist::launcher_rank());
    CHECK(world()->backend_name() == "mpi");
}

TEST_CASE("dist: all_reduce sums and averages odd sizes of f32 and f64 as a serial sum does") {
    const auto g = world();
    for (DType dtype : {DType::f32, DType::f64})
        for (int64_t n : {1, 7, 1001, 65537}) {
            for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::mean}) {
                CAPTURE(dtype_name(dtype));
                CAPTURE(n);
                const Tensor x = filled(g->rank(), n, dtype);
                g->all_reduce(x, op);
                Tensor expected = filled(0, n, DType::f64);
                for (int r = 1; r < g->world_size(); ++r) expected = expected + filled(r, n, DType::f64);
                if (op == dist::ReduceOp::mean) expected = expected * (1.0 / g->world_size());
                CHECK(x.dtype() == dtype);
                CHECK(relative_difference(x, expected) <= (dtype == DType::f32 ? 1e-6 : 1e-14));
            }
        }
}

TEST_CASE("dist: all_reduce of bf16 gives the float32 sum rounded to bf16, within bf16's rounding of a serial sum") {
    const auto g = world();
    REQUIRE(g->world_size() == 2);  // the bitwise check below is the sum of two values
    for (int64_t n : {1, 7, 1001, 65537})
        for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::mean}) {
            CAPTURE(n);
            CAPTURE(op == dist::ReduceOp::sum ? "sum" : "mean");
            const Tensor x = filled(g->rank(), n, DType::bf16);
            g->all_reduce(x, op);
            REQUIRE(x.dtype() == DType::bf16);
            const double scale = op == dist::ReduceOp::mean ? 0.5 : 1.0;
            // The serial sum in float64 of the bf16 values every rank gave.
            const std::vector<double> a = filled(0, n, DType::bf16).to_vector<double>(),
                                      b = filled(1, n, DType::bf16).to_vector<double>(),
                                      got = x.to_vector<double>();
            int64_t outside = 0, not_rounded_once = 0;
            for (int64_t i = 0; i < n; ++i) {
                const double expected = (a[i] + b[i]) * scale;
                // Rounding to bf16 (8 significant bits) moves a value by at most half a unit in
                // its last place, 2^-8 of it; float32's sum adds at most 2^-24 of the larger term.
                if (std::abs(got[i] - expected) > std::ldexp(std::abs(expected), -8) +
                                                       std::ldexp(std::max(std::abs(a[i]), std::abs(b[i])), -23))
                    ++outside;
                // With two ranks the float32 sum is a[i] + b[i] in float, rounded to bf16. (One
                // addition: two ranks cannot tell one rounding from one per hop of a ring.)
                if (got[i] != double(round_to_bf16((float(a[i]) + float(b[i])) * float(scale)))) ++not_rounded_once;
            }
            CHECK(outside == 0);
            CHECK(not_rounded_once == 0);
        }
}

TEST_CASE("dist: broadcast gives every rank the root's values, from either root") {
    const auto g = world();
    for (int root = 0; root < g->world_size(); ++root)
        for (DType dtype : {DType::f32, DType::f64, DType::bf16})
            for (int64_t n : {1, 13, 4099}) {
                const Tensor x = filled(g->rank(), n, dtype);
                g->broadcast(x, root);
                CHECK(relative_difference(x, filled(root, n, dtype)) == 0);
            }
    CHECK_THROWS_WITH_AS(g->broadcast(zeros({3}), 2), doctest::Contains("root 2 is outside [0, 2)"), std::invalid_argument);
}

TEST_CASE("dist: what a collective cannot take is refused, naming it") {
    const auto g = world();
    CHECK_THROWS_WITH_AS(g->all_reduce(zeros({4}, DType::i64), dist::ReduceOp::sum), doctest::Contains("int64"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(g->all_reduce(zeros({3, 4}).t(), dist::ReduceOp::sum), doctest::Contains("(4,3) is not contiguous"),
                         std::invalid_argument);
    g->barrier();
}

TEST_CASE("dist: all_gather gives every rank each rank's values, rank 0's first") {
    const auto g = world();
    const std::vector<int64_t> all = g->all_gather({10 * g->rank(), -(int64_t(1) << 62) + g->rank()});
    REQUIRE(all.size() == 2 * size_t(g->world_size()));
    for (int r = 0; r < g->world_size(); ++r) {
        CHECK(all[2 * r] == 10 * r);
        CHECK(all[2 * r + 1] == -(int64_t(1) << 62) + r);  // all 64 bits, not through a double
    }
}

TEST_CASE("dist: with checking on, a collective given other sizes or dtypes on some rank throws on every rank") {
    const auto g = world();
    const bool was = dist::checking_collectives();
    dist::set_checking_collectives(true);
    const int r = g->rank();
    CHECK_THROWS_WITH_AS(g->all_reduce(zeros({3 + r}), dist::ReduceOp::sum),
                         doctest::Contains("all_reduce: rank 1 passes 4 elements of float32, rank 0 3 elements of float32"),
                         std::logic_error);
    CHECK_THROWS_WITH_AS(g->broadcast(zeros({5}, r == 0 ? DType::f32 : DType::f64), 0),
                         doctest::Contains("broadcast: rank 1 passes 5 elements of float64, rank 0 5 elements of float32"),
                         std::logic_error);
    const Tensor same = ones({6});
    g->all_reduce(same, dist::ReduceOp::sum);  // what agrees still goes through
    CHECK(same.to_vector<float>() == std::vector<float>(6, float(g->world_size())));
    dist::set_checking_collectives(was);
}

TEST_CASE("dist: a wait gives up after timeout_s of silence, not counting time this process was stopped") {
    using namespace std::chrono_literals;
    const auto t0 = dist::Patience::clock::now();
    dist::WaitLimits limits;
    limits.timeout_s = 5;
    {
        dist::Patience patience("all_reduce on the GPU", t0);
        double waited = 0;
        for (auto t = t0; t < t0 + 5s; t += 500ms) waited = patience.check(limits, t);  // looks every 0.5 s
        CHECK(waited == doctest::Approx(4.5));
        CHECK_THROWS_WITH_AS(patience.check(limits, t0 + 5100ms),
                             "all_reduce on the GPU: no answer from the other ranks for 5 s", dist::RankTimeout);
    }
    {
        // Stopped for a minute after 2 s (no look in between): the minute is not the others' silence.
        dist::Patience patience("all_reduce", t0);
        for (auto t = t0; t <= t0 + 2s; t += 500ms) patience.check(limits, t);
        CHECK(patience.check(limits, t0 + 62s) == doctest::Approx(2.0));
        double waited = 0;
        for (auto t = t0 + 62500ms; t <= t0 + 65s; t += 500ms) waited = patience.check(limits, t);
        CHECK(waited == doctest::Approx(5.0));
        CHECK_THROWS_AS(patience.check(limits, t0 + 65500ms), dist::RankTimeout);
    }
    {
        // A Ctrl-C: the wait ends after_stop_s later, with Interrupted, well before the timeout.
        std::atomic<int> stop{0};
        limits.timeout_s = 300, limits.after_stop_s = 2, limits.stop = &stop;
        dist::Patience patience("broadcast", t0);
        patience.check(limits, t0 + 500ms);
        stop = 2;
        for (auto t = t0 + 1s; t <= t0 + 3s; t += 500ms) CHECK_NOTHROW(patience.check(limits, t));
        CHECK_THROWS_WITH_AS(patience.check(limits, t0 + 3500ms),
                             "broadcast: asked to stop, and the other ranks gave no answer for 4 s", dist::Interrupted);
    }
}

TEST_CASE("dist: find_disagreement names the first field that differs and the lowest rank, on every rank") {
    const auto g = world();
    const std::string r = std::to_string(g->rank());
    CHECK_FALSE(dist::find_disagreement(*g, {{"a", "1"}, {"b", "two"}}).has_value());
    const auto d = dist::find_disagreement(*g, {{"same", "x"}, {"lr", "0.00" + r}, {"seed", r}});
    REQUIRE(d.has_value());
    CHECK(d->rank == 1);
    CHECK(d->field == "lr");
    CHECK(d->message() == "rank 1 disagrees with rank 0 on lr: 0.001 vs 0.000");
    // Another list of names (another build) is named as such, not compared value by value.
    dist::Fields fields{{"a", "1"}};
    if (g->rank() == 1) fields.push_back({"b", "2"});
    const auto lists = dist::find_disagreement(*g, fields);
    REQUIRE(lists.has_value());
    CHECK(lists->message() == "rank 1 disagrees with rank 0 on the list of fields (another build of the program?): 2 "
                              "fields vs 1 field");
    // A TrainConfig's JSON, field by field, its nested model config by path.
    const dist::Fields config = dist::json_fields(TrainConfig{}.to_json());
    CHECK(std::find(config.begin(), config.end(), std::pair<std::string, std::string>{"model.d_model", "64"}) !=
          config.end());
}

TEST_CASE("dist: gradient buckets average every gradient; one no rank has stays absent") {
    const auto g = world();
    std::vector<Tensor> params;
    for (int64_t n : {5, 300, 17, 1000, 3}) params.push_back(zeros({n}).requires_grad_());
    const Tensor unused = zeros({4}).requires_grad_();
    params.push_back(unused);
    // 1 KiB buckets: the 1000-float parameter fills one alone, the small ones share.
    dist::GradientBuckets buckets(params, g, 1024);
    CHECK(buckets.buckets() >= 3);
    for (size_t i = 0; i + 1 < params.size(); ++i)
        if (i != 2 || g->rank() == 1) params[i].set_grad(filled(g->rank(), params[i].numel(), DType::f32));
    buckets.average();
    for (size_t i = 0; i + 1 < params.size(); ++i) {
        CAPTURE(i);
        REQUIRE(params[i].grad().defined());
        Tensor expected = zeros({params[i].numel()}, DType::f64);
        for (int r = 0; r < g->world_size(); ++r)
            if (i != 2 || r == 1) expected = expected + filled(r, params[i].numel(), DType::f64);
        CHECK(relative_difference(params[i].grad(), expected * (1.0 / g->world_size())) <= 1e-6);
    }
    CHECK_FALSE(unused.grad().defined());
}

TEST_CASE("dist: 2 ranks x batch B for 20 steps take the steps of 1 process x batch 2B") {
    const auto g = world();
    auto data = gg::testing::word_corpus(60);
    Trainer one(small_config(8, 1), data);  // every rank trains the one-process run too
    const TrainResult alone = one.run(true);
    Trainer shard(small_config(4, 2), data);
    shard.distribute(g);
    const TrainResult together = shard.run(true);
    REQUIRE(alone.log.size() == 20);
    REQUIRE(together.log.size() == 20);
    for (size_t i = 0; i < 20; ++i) {  // the same log: loss, gradient norm, learning rate, validation
        CAPTURE(i);
        CHECK(together.log[i].step == alone.log[i].step);
        CHECK(together.log[i].lr == alone.log[i].lr);
        CHECK(std::abs(together.log[i].loss - alone.log[i].loss) <= 1e-6 * alone.log[i].loss);
        CHECK(std::abs(together.log[i].grad_norm - alone.log[i].grad_norm) <= 1e-6 * alone.log[i].grad_norm);
        CHECK(std::isnan(together.log[i].val_loss) == std::isnan(alone.log[i].val_loss));
        if (!std::isnan(alone.log[i].val_loss))
            CHECK(std::abs(together.log[i].val_loss - alone.log[i].val_loss) <= 1e-6 * alone.log[i].val_loss);
    }
    // ‖θ_2 ranks − θ_1 process‖ / ‖θ_1 process‖ over all the weights. The gradients differ in
    // their last bits (a sum over 2B rows is added up in another order than two sums over B),
    // and AdamW's m/√v scales a weight's step by its gradient's sign and size, so the weights
    // drift apart in those bits, never in the trend.
    const auto a = shard.model().named_parameters(), b = one.model().named_parameters();
    REQUIRE(a.size() == b.size());
    double diff = 0, size = 0, worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const std::vector<double> x = a[i].second.to_vector<double>(), y = b[i].second.to_vector<double>();
        for (size_t j = 0; j < x.size(); ++j) diff += (x[j] - y[j]) * (x[j] - y[j]), size += y[j] * y[j];
        worst = std::max(worst, relative_difference(a[i].second, b[i].second));
    }
    const double relative = std::sqrt(diff / size);
    MESSAGE("after 20 steps: relative difference of all the weights " << relative
            << ", of the tensor that differs most (max-norm) " << worst);
    CHECK(relative <= 1e-6);
    // And the ranks hold the same weights: rank 1's, sent to rank 0, equal rank 0's own.
    for (const auto& [name, p] : a) {
        const Tensor theirs = p.detach().clone();
        g->broadcast(theirs, 1);
        CHECK(relative_difference(theirs, p.detach()) == 0);
    }
}

TEST_CASE("dist: a trainer refuses a group of another size, and a checkpoint of another world size") {
    const auto g = world();
    auto data = gg::testing::word_corpus(60);
    Trainer one(small_config(4, 1), data);
    CHECK_THROWS_WITH_AS(one.distribute(g), doctest::Contains("world_size is 1, the process group has 2 ranks"),
                         std::invalid_argument);
    const fs::path file = fs::temp_directory_path() /
                          ("gatedgrad_test_dist_" + std::to_string(::getpid()) + ".safetensors");  // one per rank
    one.save(file.string());
    Trainer two(small_config(4, 2), data);
    two.distribute(g);
    CHECK_THROWS_WITH_AS(two.resume(file.string()), doctest::Contains("trained on 1 process(es)"), std::runtime_error);
    CHECK(two.step() == 0);
    fs::remove(file);
}

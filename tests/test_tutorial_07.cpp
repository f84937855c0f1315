// Tutorial 07's pieces (tutorials/07_learning_rate/study.h): its spike rule, Wortsman et al.'s
// LR sensitivity, and the trainer config of a run.
#include <doctest/doctest.h>

#include <cmath>

#include "07_learning_rate/study.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

TEST_CASE("count_spikes: a rise of more than 1 nat over the last 20 steps' minimum, consecutive steps once") {
    CHECK(count_spikes({}) == 0);
    CHECK(count_spikes({3.0, 2.0, 2.9, 2.5}) == 0);        // 0.9 over the minimum: batch noise
    CHECK(count_spikes({3.0, 2.0, 3.1, 3.2, 2.0}) == 1);   // two steps over: one spike
    CHECK(count_spikes({3.0, 2.0, 3.1, 2.0, 3.1}) == 2);   // back under, then over again
    // The minimum is over the previous 20 steps only: a low loss 21 steps back no longer counts.
    std::vector<double> loss(22, 3.0);
    loss[0] = 2.0;   // the 3.0s after it are exactly 1 nat over it: not more
    loss[21] = 3.5;  // 1.5 over loss[0], 21 steps back; 0.5 over the last 20
    CHECK(count_spikes(loss) == 0);
    loss[20] = 3.5;  // 1.5 over loss[0], exactly 20 steps back: a spike
    CHECK(count_spikes(loss) == 1);
}

TEST_CASE("lr_sensitivity: the mean over rates of min(final, initial) minus the best final") {
    // Best 2.0; the others cost 0.5 and 1.5 (3.5 capped to the initial 3.5, 4.0 capped too).
    CHECK(lr_sensitivity({2.5, 2.0, 3.5}, 3.5) == doctest::Approx((0.5 + 0 + 1.5) / 3));
    CHECK(lr_sensitivity({2.5, 2.0, 4.0}, 3.5) == doctest::Approx((0.5 + 0 + 1.5) / 3));
    // A diverged run (NaN) counts as having learned nothing: the initial loss.
    CHECK(lr_sensitivity({2.0, NAN}, 5.0) == doctest::Approx(1.5));
    CHECK(lr_sensitivity({2.0, 2.0, 2.0}, 5.0) == 0);  // every rate as good as the best
    CHECK(std::isnan(lr_sensitivity({}, 5.0)));
}

TEST_CASE("a run's trainer config: the variant's QK-norm and gate, the rate, the seed, the decay") {
    RunSettings s;
    s.variant = variants()[3], s.lr = 0.3, s.seed = 2, s.independent_wd = true, s.weight_decay = 1e-4;
    const TrainConfig c = s.train_config();
    CHECK(variants()[3].name == "G1 + QK-norm");
    CHECK(c.model.attn.qk_norm);
    CHECK(c.model.attn.gate == GatePosition::sdpa_output);
    CHECK(c.lr == 0.3);
    CHECK(c.seed == 2);
    CHECK(c.independent_weight_decay);
    CHECK(c.weight_decay == 1e-4);
    CHECK(c.probe_every == 50);
    CHECK(c.warmup == 100);
    CHECK(c.steps == 2000);
    s.variant = variants()[0];
    CHECK(!s.train_config().model.attn.qk_norm);
    CHECK(s.train_config().model.attn.gate == GatePosition::none);
    CHECK_NOTHROW(s.train_config().validate());
}

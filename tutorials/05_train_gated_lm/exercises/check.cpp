// The checks of tutorial 05's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include "tutorials/05_train_gated_lm/exercises/exercises.h"

using namespace gg;

TEST_CASE("05.1 warmup_cosine_lr") {
    // An untouched exercise stops here, saying "not done yet" once, not once per check below.
    REQUIRE_NOTHROW(exercises::warmup_cosine_lr(0, 30, 600, 3e-3, 3e-4));
    const nn::LrSchedule schedule{nn::LrSchedule::Decay::cosine, 3e-3, 3e-4, 30, 600};
    for (int64_t step : {0, 1, 15, 29, 30, 31, 100, 315, 599, 600, 1000}) {
        CAPTURE(step);
        CHECK(exercises::warmup_cosine_lr(step, 30, 600, 3e-3, 3e-4) == doctest::Approx(nn::lr_at(schedule, step)));
    }
}

TEST_CASE("05.2 unigram_entropy") {
    // An untouched exercise stops here, saying "not done yet" once, not once per check below.
    REQUIRE_NOTHROW(exercises::unigram_entropy({7, 7, 7}));
    const std::vector<std::string> documents = {"the gate closes on the first token\n", "a sink forms\n",
                                                "the head does nothing\n", "attention\n"};
    const nn::TextDataset data(documents, {0.25, nn::SplitMode::documents});
    CHECK(exercises::unigram_entropy(data.train_stream()) == doctest::Approx(data.unigram_entropy()));
    CHECK(exercises::unigram_entropy({7, 7, 7}) == doctest::Approx(0));
    CHECK(exercises::unigram_entropy({1, 2}) == doctest::Approx(std::log(2.0)));
}

TEST_CASE("05.3 adamw_step") {
    Generator gen(9);
    Tensor p = randn({3, 4}, gen, DType::f64);
    p.requires_grad_();
    const Tensor mine = p.detach().clone(), m = zeros({3, 4}, DType::f64), v = zeros({3, 4}, DType::f64);
    const exercises::AdamWSettings s;
    nn::AdamW adamw({p}, s.lr, s.beta1, s.beta2, s.eps, s.weight_decay);
    for (int64_t t = 1; t <= 5; ++t) {
        const Tensor g = randn({3, 4}, gen, DType::f64);
        p.set_grad(g);
        adamw.step();
        exercises::adamw_step(mine, g, m, v, t, s);
    }
    CHECK(amax(abs(mine - p.detach())).item() < 1e-10);
}

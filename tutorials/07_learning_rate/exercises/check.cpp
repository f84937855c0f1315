// The checks of tutorial 07's exercises: meson test -C build --suite exercises
#include <doctest/doctest.h>

#include "tutorials/07_learning_rate/exercises/exercises.h"

TEST_CASE("07.1 count_loss_spikes") {
    using exercises::count_loss_spikes;
    // An untouched exercise stops here, saying "not done yet" once, not once per check below.
    REQUIRE_NOTHROW(count_loss_spikes({5.0, 4.0}));
    CHECK(count_loss_spikes({}) == 0);
    CHECK(count_loss_spikes({5.0}) == 0);
    CHECK(count_loss_spikes({5.0, 4.0, 3.0, 2.5, 2.2, 2.1}) == 0);  // learning, no spike
    CHECK(count_loss_spikes({5.0, 4.0, 3.0, 3.0, 4.5, 3.0}) == 1);  // 4.5 > 3.0 + 1
    CHECK(count_loss_spikes({5.0, 4.0, 3.0, 3.9, 4.0, 3.0}) == 0);  // 4.0 is not more than 3.0 + 1
    CHECK(count_loss_spikes({3.0, 3.0, 4.2, 4.5, 4.1, 3.0}) == 1);  // three steps over, one spike
    CHECK(count_loss_spikes({3.0, 4.5, 3.0, 4.5, 3.0}) == 2);       // over, back, over again
    CHECK(count_loss_spikes({1.0, 3.0}) == 1);                       // step 1 against step 0 alone
    // The window is the 20 previous steps: a low loss at step 0 counts until step 20, then not.
    std::vector<double> loss(30, 1.8);
    loss[0] = 0.5;
    CHECK(count_loss_spikes(loss) == 1);  // steps 1–20 over (one spike), 21–29 not
    loss.push_back(2.9);
    CHECK(count_loss_spikes(loss) == 2);  // 2.9 > 1.8 + 1: a second spike
    loss.back() = 2.7;
    CHECK(count_loss_spikes(loss) == 1);
    // A long curve: a spike every 100 steps on a slowly falling loss.
    std::vector<double> long_run;
    for (int t = 0; t < 1000; ++t) long_run.push_back(4.0 - 0.002 * t + (t % 100 == 50 ? 1.5 : 0.0));
    CHECK(count_loss_spikes(long_run) == 10);
}

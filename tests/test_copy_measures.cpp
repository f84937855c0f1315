// Tutorial 06's measure of where a query's attention goes (tutorials/06_attention_sink/
// copy_task.h, QueryClass::add), on hand-made attention rows: the top-1 share must see a query
// parked on any key, not only on BOS, and the value drain must read that key's value.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "06_attention_sink/copy_task.h"

TEST_CASE("QueryClass::add: a query parked on a key other than BOS has top-1 1 and α 0") {
    QueryClass q;
    q.resize(2);
    // Query t = 3 of head 0: all its weight on key 1 (neither BOS, itself nor key t − 1), whose
    // value is small; the other keys' values have norm 2.
    const std::vector<float> parked = {0, 1, 0, 0};
    const std::vector<double> norms = {2, 0.5, 2, 2};
    q.add(0, parked, 1.0, norms);
    CHECK(q.top[0] == 1);
    CHECK(q.alpha[0] == 0);
    CHECK(q.self[0] == 0);
    CHECK(q.previous[0] == 0);
    CHECK(q.value_top[0] == 0.5);
    CHECK(q.value_rest[0] == 2);
    // Head 1, the same query spread evenly: top-1 1/(t + 1), and on BOS 1/(t + 1) too.
    const std::vector<float> even = {0.25f, 0.25f, 0.25f, 0.25f};
    q.add(1, even, 0.5, norms);
    CHECK(q.top[1] == 0.25);
    CHECK(q.alpha[1] == 0.25);
    CHECK(q.alpha_gated[1] == 0.125);
    CHECK(q.gate[1] == 0.5);
    CHECK(q.row_sum[1] == 1);
    CHECK(q.value_top[1] == 2);  // a tie: the first key, BOS
    CHECK(q.value_rest[1] == doctest::Approx((0.5 + 2 + 2) / 3));
    // A second query on head 0, parked on itself (key t = 2): the sums add up, per head.
    q.add(0, std::vector<float>{0.1f, 0.1f, 0.8f}, 1.0, std::vector<double>{1, 1, 4});
    CHECK(q.top[0] == doctest::Approx(1.8));
    CHECK(q.self[0] == doctest::Approx(0.8));
    CHECK(q.previous[0] == doctest::Approx(0.1));
    CHECK(q.value_top[0] == 4.5);
    CHECK(q.value_rest[0] == 3);
    CHECK(q.top[1] == 0.25);  // head 1 untouched
}

TEST_CASE("QueryClass::add: values unknown (latent attention) read NaN; a row that is no query at t >= 1 is refused") {
    QueryClass q;
    q.resize(1);
    q.add(0, std::vector<float>{0.9f, 0.1f}, 1.0, {});
    CHECK(q.top[0] == doctest::Approx(0.9));
    CHECK(q.alpha[0] == doctest::Approx(0.9));
    CHECK(std::isnan(q.value_top[0]));
    CHECK(std::isnan(q.value_rest[0]));
    CHECK_THROWS_AS(q.add(0, std::vector<float>{1.0f}, 1.0, {}), std::invalid_argument);  // query 0: BOS itself
    CHECK_THROWS_AS(q.add(0, std::vector<float>{0.5f, 0.5f}, 1.0, std::vector<double>{1, 1, 1}), std::invalid_argument);
}

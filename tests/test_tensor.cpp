#include <doctest/doctest.h>
#include <sstream>
#include "gatedgrad.h"
using namespace gg;
TEST_CASE("smoke") {
    Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = a.t().contiguous();
    CHECK(b.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
    std::ostringstream os; os << matmul(a, b); MESSAGE(os.str());
}

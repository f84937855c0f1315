// Reference solutions of tutorial 01's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include <stdexcept>

#include "tutorials/01_tensors/exercises/exercises.h"

namespace exercises {

gg::Strides contiguous_strides(const gg::Shape& shape) {
    gg::Strides strides(shape.size());
    int64_t after = 1;  // the number of elements one step along dim d skips
    for (size_t d = shape.size(); d-- > 0;) {
        strides[d] = after;
        after *= shape[d];
    }
    return strides;
}

int64_t storage_position(const gg::Tensor& x, const std::vector<int64_t>& index) {
    int64_t position = x.offset();
    for (size_t d = 0; d < index.size(); ++d) position += index[d] * x.strides()[d];
    return position;
}

gg::Shape broadcast_shape(const gg::Shape& a, const gg::Shape& b) {
    const size_t n = std::max(a.size(), b.size());
    gg::Shape out(n);
    for (size_t i = 0; i < n; ++i) {  // i counts dims from the right
        const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1, y = i < b.size() ? b[b.size() - 1 - i] : 1;
        if (x != y && x != 1 && y != 1)
            throw std::invalid_argument("broadcast_shape: sizes " + std::to_string(x) + " and " + std::to_string(y) +
                                        " do not broadcast");
        out[n - 1 - i] = std::max(x, y);
    }
    return out;
}

}  // namespace exercises

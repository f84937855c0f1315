// reduce.cpp — sum, mean, amax, amin, max over any set of dims, with keepdim.
//
// The backend reduces the middle axis of a contiguous (outer, R, inner) block. When the
// reduced dims are adjacent they already are that middle axis; otherwise they are
// permuted to the end first (one copy).
#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"

namespace gg {

namespace {

struct ReducePlan {
    std::vector<int64_t> dims;  // sorted, non-negative
    Shape keep_shape;           // x's shape with reduced dims set to 1
    Shape out_shape;            // keep_shape, or without those dims when !keepdim
};

ReducePlan plan_reduction(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
    ReducePlan plan;
    std::set<int64_t> unique;
    for (int64_t d : dims)
        if (!unique.insert(wrap_dim(d, x.dim(), op)).second)  // as torch: a repeat is a mistake, not a no-op
            throw std::invalid_argument(std::string(op) + ": dim " + std::to_string(d) +
                                        " appears more than once in the dims to reduce of shape " +
                                        shape_str(x.shape()));
    if (dims.empty())
        for (int64_t d = 0; d < x.dim(); ++d) unique.insert(d);
    plan.dims.assign(unique.begin(), unique.end());
    plan.keep_shape = x.shape();
    for (int64_t d : plan.dims) plan.keep_shape[d] = 1;
    for (int64_t d = 0; d < x.dim(); ++d)
        if (keepdim || !unique.count(d)) plan.out_shape.push_back(plan.keep_shape[d]);
    return plan;
}

Tensor reduce_forward(ReduceOp op, const Tensor& x, const ReducePlan& plan) {
    const Tensor in = x.detach();  // internal reshuffling is not part of the graph
    const auto& dims = plan.dims;
    const bool adjacent = dims.empty() || dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
    Tensor block;
    int64_t outer = 1, R = 1, inner = 1;
    if (adjacent) {
        block = in.contiguous();
        for (int64_t d = 0; d < x.dim(); ++d) {
            if (!dims.empty() && d < dims.front()) outer *= x.shape()[d];
            else if (!dims.empty() && d <= dims.back()) R *= x.shape()[d];
            else inner *= x.shape()[d];
        }
        if (dims.empty()) inner = 1, outer = x.numel();
    } else {
        std::vector<int64_t> order;
        for (int64_t d = 0; d < x.dim(); ++d)
            if (!std::binary_search(dims.begin(), dims.end(), d)) order.push_back(d), outer *= x.shape()[d];
        for (int64_t d : dims) order.push_back(d), R *= x.shape()[d];
        block = in.permute(order).contiguous();
    }
    Tensor out = Tensor::empty(plan.out_shape, x.dtype(), x.device());
    backend(x.device()).reduce(op, out.view_desc(), block.view_desc(), outer, R, inner);
    return out;
}

// amax/amin: the gradient goes to the elements equal to the extreme, split among ties.
Tensor extreme(ReduceOp op, const char* name, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
    check_defined(x, name);
    const ReducePlan plan = plan_reduction(x, dims, keepdim, name);
    Tensor y = reduce_forward(op, x, plan);
    const Tensor y_keep = y.detach().reshape(plan.keep_shape);
    return record(name, y, {x}, [x, y_keep, plan](const Tensor& g) {
        const Tensor hits = eq(x, y_keep);
        const Tensor share = hits / sum(hits, plan.dims, true);
        return std::vector<Tensor>{g.reshape(plan.keep_shape) * share};
    }, {x, y_keep});
}

}  // namespace

Tensor sum(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim) {
    const Tensor x = autocast_float32(x_in);
    check_defined(x, "sum");
    const ReducePlan plan = plan_reduction(x, dims, keepdim, "sum");
    const Shape in_shape = x.shape();
    return record("sum", reduce_forward(ReduceOp::sum, x, plan), {x}, [plan, in_shape](const Tensor& g) {
        return std::vector<Tensor>{g.reshape(plan.keep_shape).expand(in_shape)};  // each input got added once
    });
}

Tensor mean(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim) {
    const Tensor x = autocast_float32(x_in);
    check_defined(x, "mean");
    if (!is_floating(x.dtype()))
        throw std::invalid_argument(std::string("mean: needs a floating tensor, got ") + dtype_name(x.dtype()) + " " +
                                    shape_str(x.shape()));
    const ReducePlan plan = plan_reduction(x, dims, keepdim, "mean");
    const int64_t count = x.numel() / std::max<int64_t>(1, shape_numel(plan.keep_shape));
    return sum(x, dims, keepdim) / static_cast<double>(count);
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
    return extreme(ReduceOp::max, "amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
    return extreme(ReduceOp::min, "amin", x, dims, keepdim);
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
    check_defined(x, "max");
    dim = wrap_dim(dim, x.dim(), "max");
    auto [values, indices] = topk(x, 1, dim);
    if (!keepdim) return {values.squeeze(dim), indices.squeeze(dim)};
    return {values, indices};
}

}  // namespace gg

// elementwise.cpp — unary and binary element-wise ops with NumPy broadcasting.
//
// Broadcasting makes a small operand look big by giving the repeated dims stride 0; the
// adjoint of that is summing the gradient over those dims (sum_to).
#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"

namespace gg {

namespace {

void check_compatible(const char* op, const Tensor& a, const Tensor& b) {
    check_defined(a, op);
    check_defined(b, op);
    if (a.device() != b.device())
        throw std::invalid_argument(std::string(op) + ": device mismatch, " + shape_str(a.shape()) + " " +
                                    dtype_name(a.dtype()) + " on " + device_name(a.device()) + " vs " +
                                    shape_str(b.shape()) + " " + dtype_name(b.dtype()) + " on " +
                                    device_name(b.device()) + "; move one with .to(device)");
    if (a.dtype() != b.dtype())
        throw std::invalid_argument(std::string(op) + ": dtype mismatch, " + shape_str(a.shape()) + " " +
                                    dtype_name(a.dtype()) + " vs " + shape_str(b.shape()) + " " +
                                    dtype_name(b.dtype()) + "; convert one with .to(dtype)");
}

void check_floating(const char* op, const Tensor& x) {
    check_defined(x, op);
    if (!is_floating(x.dtype()))
        throw std::invalid_argument(std::string(op) + ": needs a floating tensor, got " + describe(x));
}

// How `t` looks when broadcast to `shape` (no longer than kMaxDims, as it came from
// broadcast_shapes of tensors): size-1 and missing leading dims get stride 0.
View broadcast_desc(const Tensor& t, const Shape& shape) {
    const View v = t.view_desc();
    View out{v.data, v.dtype, static_cast<int>(shape.size())};
    const int lead = out.ndim - v.ndim;
    for (int i = 0; i < out.ndim; ++i) {
        out.shape[i] = shape[i];
        out.strides[i] = i >= lead && v.shape[i - lead] != 1 ? v.strides[i - lead] : 0;
    }
    return out;
}

Tensor binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
    if (autocast_mixes(a, b)) return binary_forward(op, name, autocast_float32(a), autocast_float32(b));
    check_compatible(name, a, b);
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
    Tensor out = Tensor::empty(shape, a.dtype(), a.device());
    backend(a.device()).binary(op, out.view_desc(), broadcast_desc(a, shape), broadcast_desc(b, shape));
    return out;
}

Tensor unary_forward(UnaryOp op, const Tensor& x, double exponent = 0) {
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    backend(x.device()).unary(op, out.view_desc(), x.view_desc(), exponent);
    return out;
}

// A scalar operand in t's dtype; a fraction never silently truncates into an integer tensor.
Tensor like(const Tensor& t, double value) {
    if (!is_floating(t.dtype()) && value != std::trunc(value))
        throw std::invalid_argument("scalar " + std::to_string(value) + " with an " + dtype_name(t.dtype()) +
                                    " tensor of shape " + shape_str(t.shape()) + "; convert it with .to(DType::f32)");
    return scalar(value, t.dtype(), t.device());
}

// A unary op y = f(x) whose derivative dy/dx is written in terms of either its input x or
// its output y (`of`): backward keeps only that one tensor.
enum class DerivativeOf { input, output };
template <class Derivative>
Tensor unary_op(const char* name, UnaryOp op, const Tensor& x, DerivativeOf of, Derivative dy_dx, double exponent = 0) {
    check_floating(name, x);
    Tensor y = unary_forward(op, x, exponent);
    const Tensor saved = (of == DerivativeOf::input ? x : y).detach();  // detached: no cycle through y's own node
    return record(name, y, {x}, [=](const Tensor& g) { return std::vector<Tensor>{g * dy_dx(saved)}; }, {saved});
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    const size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        // Align from the right; a missing dim counts as 1.
        const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da != db && da != 1 && db != 1)
            throw std::invalid_argument(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                                        " do not broadcast (dim " + std::to_string(i) + ": " +
                                        std::to_string(da) + " vs " + std::to_string(db) + ")");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
    if (g.shape() == shape) return g;
    const size_t lead = g.shape().size() - shape.size();
    std::vector<int64_t> dims;
    for (size_t i = 0; i < g.shape().size(); ++i)
        if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) dims.push_back(static_cast<int64_t>(i));
    return sum(g, dims, true).reshape(shape);
}

Tensor add(const Tensor& a, const Tensor& b) {
    if (autocast_mixes(a, b)) return add(autocast_float32(a), autocast_float32(b));  // the promote rule
    Tensor out = binary_forward(BinaryOp::add, "add", a, b);  // first: it checks that a and b are defined
    const Shape sa = a.shape(), sb = b.shape();
    return record("add", out, {a, b},
                  [=](const Tensor& g) { return std::vector<Tensor>{sum_to(g, sa), sum_to(g, sb)}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
    if (autocast_mixes(a, b)) return sub(autocast_float32(a), autocast_float32(b));  // the promote rule
    Tensor out = binary_forward(BinaryOp::sub, "sub", a, b);
    const Shape sa = a.shape(), sb = b.shape();
    return record("sub", out, {a, b},
                  [=](const Tensor& g) { return std::vector<Tensor>{sum_to(g, sa), sum_to(-g, sb)}; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
    if (autocast_mixes(a, b)) return mul(autocast_float32(a), autocast_float32(b));  // the promote rule
    return record("mul", binary_forward(BinaryOp::mul, "mul", a, b), {a, b}, [a, b](const Tensor& g) {
        return std::vector<Tensor>{sum_to(g * b, a.shape()), sum_to(g * a, b.shape())};
    }, {a, b});
}

Tensor div(const Tensor& a, const Tensor& b) {
    if (autocast_mixes(a, b)) return div(autocast_float32(a), autocast_float32(b));  // the promote rule
    check_floating("div", a);  // integer division would truncate (and trap on zero)
    // d(a/b)/da = 1/b,  d(a/b)/db = −a/b²
    return record("div", binary_forward(BinaryOp::div, "div", a, b), {a, b}, [a, b](const Tensor& g) {
        return std::vector<Tensor>{sum_to(g / b, a.shape()), sum_to(-g * a / (b * b), b.shape())};
    }, {a, b});
}

namespace {
// maximum/minimum route the gradient to the operand that won; a tie splits it evenly.
Tensor extremum(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
    if (autocast_mixes(a, b)) return extremum(op, name, autocast_float32(a), autocast_float32(b));  // the promote rule
    return record(name, binary_forward(op, name, a, b), {a, b}, [=](const Tensor& g) {
        const Tensor a_wins = (op == BinaryOp::maximum ? gt(a, b) : lt(a, b)) + eq(a, b) * 0.5;
        return std::vector<Tensor>{sum_to(g * a_wins, a.shape()), sum_to(g * (1.0 - a_wins), b.shape())};
    }, {a, b});
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::maximum, "maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(BinaryOp::minimum, "minimum", a, b); }

Tensor eq(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_forward(BinaryOp::ge, "ge", a, b); }

Tensor neg(const Tensor& x) {
    check_defined(x, "neg");
    return record("neg", unary_forward(UnaryOp::neg, x), {x}, [](const Tensor& g) { return std::vector<Tensor>{-g}; });
}

Tensor exp(const Tensor& x) {
    return unary_op("exp", UnaryOp::exp, x, DerivativeOf::output, [](const Tensor& y) { return y; });
}
Tensor log(const Tensor& x) {
    return unary_op("log", UnaryOp::log, x, DerivativeOf::input, [](const Tensor& x) { return 1.0 / x; });
}
Tensor sqrt(const Tensor& x) {
    return unary_op("sqrt", UnaryOp::sqrt, x, DerivativeOf::output, [](const Tensor& y) { return 0.5 / y; });
}
Tensor rsqrt(const Tensor& x) {  // y = x^(−1/2): dy/dx = −y³/2
    return unary_op("rsqrt", UnaryOp::rsqrt, x, DerivativeOf::output, [](const Tensor& y) { return y * y * y * -0.5; });
}
Tensor pow(const Tensor& x, double p) {
    return unary_op("pow", UnaryOp::pow, x, DerivativeOf::input, [p](const Tensor& x) { return pow(x, p - 1) * p; }, p);
}
Tensor tanh(const Tensor& x) {
    return unary_op("tanh", UnaryOp::tanh, x, DerivativeOf::output, [](const Tensor& y) { return 1.0 - y * y; });
}
Tensor sigmoid(const Tensor& x) {
    return unary_op("sigmoid", UnaryOp::sigmoid, x, DerivativeOf::output, [](const Tensor& y) { return y * (1.0 - y); });
}
Tensor relu(const Tensor& x) {
    return unary_op("relu", UnaryOp::relu, x, DerivativeOf::input, [](const Tensor& x) { return gt(x, like(x, 0)); });
}
Tensor silu(const Tensor& x) {  // d/dx x σ(x) = σ(x) (1 + x (1 − σ(x)))
    return unary_op("silu", UnaryOp::silu, x, DerivativeOf::input, [](const Tensor& x) {
        const Tensor s = sigmoid(x);
        return s * (1.0 + x * (1.0 - s));
    });
}
Tensor gelu(const Tensor& x) {  // d/dx x Φ(x) = Φ(x) + x φ(x)
    return unary_op("gelu", UnaryOp::gelu, x, DerivativeOf::input, [](const Tensor& x) {
        const Tensor cdf = 0.5 * (1.0 + erf(x * M_SQRT1_2));
        const Tensor pdf = exp(x * x * -0.5) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
        return cdf + x * pdf;
    });
}
Tensor erf(const Tensor& x) {  // d/dx erf(x) = 2/√π e^(−x²)
    return unary_op("erf", UnaryOp::erf, x, DerivativeOf::input, [](const Tensor& x) { return exp(-(x * x)) * M_2_SQRTPI; });
}
Tensor abs(const Tensor& x) {
    return unary_op("abs", UnaryOp::abs, x, DerivativeOf::input,
                    [](const Tensor& x) { return gt(x, like(x, 0)) - lt(x, like(x, 0)); });
}

Tensor softplus(const Tensor& x) {
    check_floating("softplus", x);
    const Tensor in = x.detach();  // the forward from composed ops, recorded as one node
    return record("softplus", relu(in) + log(1.0 + exp(-abs(in))), {x},
                  [in](const Tensor& g) { return std::vector<Tensor>{g * sigmoid(in)}; }, {in});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
    if (autocast_mixes(a, b)) return where(cond, autocast_float32(a), autocast_float32(b));  // the promote rule
    check_compatible("where", a, b);
    check_defined(cond, "where");
    if (cond.device() != a.device())
        throw std::invalid_argument(std::string("where: the condition is on ") + device_name(cond.device()) +
                                    " but the values are on " + device_name(a.device()));
    const Tensor c = cond.to(a.dtype());
    const Shape shape = broadcast_shapes(broadcast_shapes(c.shape(), a.shape(), "where"), b.shape(), "where");
    Tensor out = Tensor::empty(shape, a.dtype(), a.device());
    backend(a.device()).where(out.view_desc(), broadcast_desc(c, shape), broadcast_desc(a, shape),
                              broadcast_desc(b, shape));
    return record("where", out, {a, b}, [c, sa = a.shape(), sb = b.shape()](const Tensor& g) {
        const Tensor zero = like(g, 0);
        return std::vector<Tensor>{sum_to(where(c, g, zero), sa), sum_to(where(c, zero, g), sb)};
    }, {c});
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) { return where(mask, like(x, value), x); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double b) { return add(a, like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(like(b, a), b); }

}  // namespace gg

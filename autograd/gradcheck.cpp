#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tensor/random.h"

namespace gg {

namespace {

struct Checker {
    const GradcheckFn& f;
    std::vector<Tensor> xs;  // private contiguous copies that we perturb in place
    const GradcheckOptions& opt;
    GradcheckResult result{true, 0, ""};

    // f at the current xs, without recording a graph. Always a copy: f may return a view
    // of xs (narrow, reshape, ...), whose values the next shift would change.
    Tensor eval() {
        NoGradGuard no_grad;
        return f(xs).clone();
    }

    // Analytic gradients of Σ f(x) ⊙ w for every checked input.
    std::vector<Tensor> analytic(const Tensor& w) {
        std::vector<Tensor> leaves;
        for (const Tensor& x : xs) {
            Tensor leaf = x.detach();
            if (x.requires_grad()) leaf.requires_grad_();
            leaves.push_back(leaf);
        }
        Tensor y = f(leaves);
        if (!y.requires_grad()) throw std::logic_error("gradcheck: the output does not depend on any checked input");
        y.backward(w.reshape(y.shape()));
        std::vector<Tensor> grads;
        for (size_t i = 0; i < leaves.size(); ++i) {
            const Tensor g = leaves[i].grad();
            grads.push_back(xs[i].requires_grad() ? (g.defined() ? g.contiguous() : zeros_like(xs[i])) : Tensor());
        }
        return grads;
    }

    // (f(x + ε v) − f(x − ε v)) / 2ε along direction v (a flat vector per input).
    Tensor numeric(const std::vector<std::vector<double>>& v) {
        auto shift = [&](double scale) {
            for (size_t i = 0; i < xs.size(); ++i)
                if (!v[i].empty())
                    for (int64_t j = 0; j < xs[i].numel(); ++j) xs[i].data<double>()[j] += scale * v[i][j];
        };
        shift(opt.eps);
        const Tensor plus = eval();
        shift(-2 * opt.eps);
        const Tensor minus = eval();
        shift(opt.eps);
        return (plus - minus) / (2 * opt.eps);
    }

    void compare(double analytic_value, double numeric_value, const std::string& where) {
        const double err = std::abs(analytic_value - numeric_value);
        result.max_error = std::max(result.max_error, err);
        if (result.ok && err > opt.atol + opt.rtol * std::abs(numeric_value)) {
            std::ostringstream os;
            os.precision(10);
            os << "gradcheck: " << where << ": backward gives " << analytic_value << ", finite differences give "
               << numeric_value;
            result = {false, result.max_error, os.str()};
        }
    }
};

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
    Checker c{f, {}, options};
    int64_t n_in = 0;
    for (const Tensor& x : inputs) {
        if (x.dtype() != DType::f64 || x.device() != Device::CPU)
            throw std::invalid_argument("gradcheck: inputs must be float64 cpu tensors, got " + shape_str(x.shape()) +
                                        " " + dtype_name(x.dtype()));
        Tensor copy = x.detach().clone();
        if (x.requires_grad()) copy.requires_grad_(), n_in += x.numel();
        c.xs.push_back(copy);
    }
    const Tensor y0 = c.eval();
    const int64_t n_out = y0.numel();
    Generator gen(options.seed);

    if (n_out * n_in <= options.full_jacobian_limit) {
        // Whole Jacobian: row i by backward with a one-hot gradient, column j by differences.
        std::vector<std::vector<Tensor>> rows;
        for (int64_t i = 0; i < n_out; ++i) {
            Tensor onehot = zeros({n_out}, DType::f64);
            onehot.data<double>()[i] = 1;
            rows.push_back(c.analytic(onehot));
        }
        for (size_t k = 0; k < c.xs.size(); ++k) {
            if (!c.xs[k].requires_grad()) continue;
            for (int64_t j = 0; j < c.xs[k].numel(); ++j) {
                std::vector<std::vector<double>> v(c.xs.size());
                v[k].assign(c.xs[k].numel(), 0.0);
                v[k][j] = 1;
                const auto column = c.numeric(v).to_vector<double>();
                for (int64_t i = 0; i < n_out; ++i)
                    c.compare(rows[i][k].data<double>()[j], column[i],
                              "input " + std::to_string(k) + " element " + std::to_string(j) + ", output element " +
                                  std::to_string(i));
            }
        }
        return c.result;
    }
    // Random projections: wᵀ J v from backward (⟨grad, v⟩) and from differences (⟨w, Δf⟩).
    for (int p = 0; p < options.projections; ++p) {
        const Tensor w = randn({n_out}, gen, DType::f64);
        const auto grads = c.analytic(w);
        std::vector<std::vector<double>> v(c.xs.size());
        double analytic_value = 0;
        for (size_t k = 0; k < c.xs.size(); ++k) {
            if (!c.xs[k].requires_grad()) continue;
            for (int64_t j = 0; j < c.xs[k].numel(); ++j) {
                v[k].push_back(gen.normal());
                analytic_value += grads[k].data<double>()[j] * v[k][j];
            }
        }
        const double numeric_value = sum(c.numeric(v).reshape({n_out}) * w).item();
        c.compare(analytic_value, numeric_value, "projection " + std::to_string(p));
    }
    return c.result;
}

}  // namespace gg

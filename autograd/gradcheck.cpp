// gradcheck.cpp — backward() against central finite differences, on any device.
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
        std::vector<Tensor> directions(xs.size());  // v on each input's device, in its shape
        for (size_t i = 0; i < xs.size(); ++i)
            if (!v[i].empty()) directions[i] = from_vector(v[i], xs[i].shape(), xs[i].device());
        auto shift = [&](double scale) {
            NoGradGuard no_grad;
            for (size_t i = 0; i < xs.size(); ++i)
                if (directions[i].defined()) xs[i].copy_(xs[i] + directions[i] * scale);
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
        if (x.dtype() != DType::f64)
            throw std::invalid_argument("gradcheck: inputs must be float64, got " + describe(x));
        Tensor copy = x.detach().clone();
        if (x.requires_grad()) copy.requires_grad_(), n_in += x.numel();
        c.xs.push_back(copy);
    }
    const Tensor y0 = c.eval();
    const int64_t n_out = y0.numel();
    Generator gen(options.seed);

    if (n_out * n_in <= options.full_jacobian_limit) {
        // Whole Jacobian: row i by backward with a one-hot gradient, column j by differences.
        std::vector<std::vector<std::vector<double>>> rows;  // [output i][input k] → ∂f_i/∂x_k
        for (int64_t i = 0; i < n_out; ++i) {
            std::vector<double> onehot(n_out, 0.0);
            onehot[i] = 1;
            std::vector<std::vector<double>> row;
            for (const Tensor& g : c.analytic(from_vector(onehot, {n_out}, y0.device())))
                row.push_back(g.defined() ? g.to_vector<double>() : std::vector<double>());
            rows.push_back(std::move(row));
        }
        for (size_t k = 0; k < c.xs.size(); ++k) {
            if (!c.xs[k].requires_grad()) continue;
            for (int64_t j = 0; j < c.xs[k].numel(); ++j) {
                std::vector<std::vector<double>> v(c.xs.size());
                v[k].assign(c.xs[k].numel(), 0.0);
                v[k][j] = 1;
                const auto column = c.numeric(v).to_vector<double>();
                for (int64_t i = 0; i < n_out; ++i)
                    c.compare(rows[i][k][j], column[i],
                              "input " + std::to_string(k) + " element " + std::to_string(j) + ", output element " +
                                  std::to_string(i));
            }
        }
        return c.result;
    }
    // Random projections: wᵀ J v from backward (⟨grad, v⟩) and from differences (⟨w, Δf⟩).
    for (int p = 0; p < options.projections; ++p) {
        const Tensor w = randn({n_out}, gen, DType::f64, y0.device());
        const auto grads = c.analytic(w);
        std::vector<std::vector<double>> v(c.xs.size());
        double analytic_value = 0;
        for (size_t k = 0; k < c.xs.size(); ++k) {
            if (!c.xs[k].requires_grad()) continue;
            const std::vector<double> g = grads[k].to_vector<double>();
            for (int64_t j = 0; j < c.xs[k].numel(); ++j) {
                v[k].push_back(gen.normal());
                analytic_value += g[j] * v[k][j];
            }
        }
        const double numeric_value = sum(c.numeric(v).reshape({n_out}) * w).item();
        c.compare(analytic_value, numeric_value, "projection " + std::to_string(p));
    }
    return c.result;
}

}  // namespace gg

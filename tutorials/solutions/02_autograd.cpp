// Reference solutions of tutorial 02's exercises (tools/check-exercises builds the checks
// against them). Try the exercises before reading on.
#include "tutorials/02_autograd/exercises/exercises.h"

#include <unordered_set>

namespace exercises {

gg::Tensor cube(const gg::Tensor& x) {
    gg::Tensor value;
    {
        gg::NoGradGuard no_grad;  // the value only: no nodes for its two muls
        value = x * x * x;
    }
    return gg::record("cube", value, {x}, [x = x.detach()](const gg::Tensor& g) {
        return std::vector<gg::Tensor>{x * x * 3.0 * g};  // d(x³)/dx = 3x²
    });
}

LogisticGrad logistic_grad_by_hand(const gg::Tensor& x, const gg::Tensor& y, const gg::Tensor& w, const gg::Tensor& b) {
    const double N = double(x.size(0));
    const gg::Tensor error = gg::sigmoid(gg::matmul(x, w) + b) - y;  // p − y, (N)
    return {gg::matmul(error, x) / N, error.sum() / N};              // xᵀ (p − y) / N, Σ (p − y) / N
}

gg::Tensor numerical_gradient(const std::function<double(const gg::Tensor&)>& f, const gg::Tensor& x, double eps) {
    const gg::Tensor probe = x.detach().contiguous().clone();
    std::vector<double> gradient(size_t(probe.numel()));
    double* values = probe.data<double>();
    for (size_t j = 0; j < gradient.size(); ++j) {
        const double saved = values[j];
        values[j] = saved + eps;
        const double up = f(probe);
        values[j] = saved - eps;
        const double down = f(probe);
        values[j] = saved;
        gradient[j] = (up - down) / (2 * eps);
    }
    return gg::from_vector(gradient, x.shape());
}

std::vector<Value*> topological_order(Value* root) {
    std::vector<Value*> order;
    std::unordered_set<Value*> visited;
    // Depth first: a value goes in after everything it was computed from.
    std::function<void(Value*)> visit = [&](Value* v) {
        if (!visited.insert(v).second) return;
        for (const ValuePtr& parent : v->parents) visit(parent.get());
        order.push_back(v);
    };
    visit(root);
    return order;
}

void backward(Value* root) {
    const std::vector<Value*> order = topological_order(root);
    for (Value* v : order) v->grad = 0;
    root->grad = 1;  // ∂root/∂root
    // From the root back: when a value is reached, every value that uses it has added to its grad.
    for (auto v = order.rbegin(); v != order.rend(); ++v) (*v)->backward_step();
}

}  // namespace exercises

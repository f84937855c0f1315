// optimizer.cpp — SGD and AdamW as fused loops over raw parameter data, and clipping.
#include "nn/optim/optimizer.h"

#include <cmath>
#include <stdexcept>

#include "tensor/parallel.h"

namespace gg::nn {

namespace {
// What the raw loops below rely on: a float CPU tensor whose elements are contiguous.
void check_param(const Tensor& p, size_t i, const char* op) {
    const std::string which = std::string(op) + ": parameter " + std::to_string(i);
    check_defined(p, which.c_str());
    if (!is_floating(p.dtype())) throw std::invalid_argument(which + " (" + describe(p) + ") is not floating");
    if (p.device() != Device::CPU)
        throw std::invalid_argument(which + " is on " + device_name(p.device()) + "; the update runs on the cpu");
    if (!p.is_contiguous()) throw std::invalid_argument(which + " (" + describe(p) + ") is not contiguous");
}

// Calls f.template operator()<T>(i, p, g, n) for every parameter i that has a gradient,
// where T is its element type (float or double) and p, g point at the n elements of the
// parameter and of its gradient.
template <class F>
void for_each_grad(const std::vector<Tensor>& params, const char* op, F&& f) {
    for (size_t i = 0; i < params.size(); ++i) {
        const Tensor& p = params[i];
        check_param(p, i, op);
        const Tensor g = p.grad();
        if (!g.defined()) continue;
        if (g.shape() != p.shape() || g.dtype() != p.dtype() || g.device() != p.device() || !g.is_contiguous())
            throw std::invalid_argument(std::string(op) + ": parameter " + std::to_string(i) + " (" + describe(p) +
                                        ") has a gradient (" + describe(g) + ", " + device_name(g.device()) +
                                        (g.is_contiguous() ? "" : ", not contiguous") + ") that does not match it");
        if (p.dtype() == DType::f32)
            f.template operator()<float>(i, p.data<float>(), g.data<float>(), p.numel());
        else
            f.template operator()<double>(i, p.data<double>(), g.data<double>(), p.numel());
    }
}

// Throws unless lo <= value < hi.
void check_range(const char* op, const char* name, double value, double lo, double hi = INFINITY) {
    if (!(value >= lo && value < hi))
        throw std::invalid_argument(std::string(op) + ": " + name + " = " + std::to_string(value) +
                                    " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
}

}  // namespace

// --- Optimizer ---

Optimizer::Optimizer(const char* name, std::vector<Tensor> params, double lr_)
    : lr(lr_), name_(name), params_(std::move(params)) {
    if (params_.empty()) throw std::invalid_argument(std::string(name_) + ": empty parameter list");
    for (size_t i = 0; i < params_.size(); ++i) check_param(params_[i], i, name_);
    check_range(name_, "lr", lr, 0);
}

void Optimizer::zero_grad() {
    for (const Tensor& p : params_) p.zero_grad();
}

void Optimizer::load_state_dict(const NamedTensors& state) {
    copy_state(state_dict(), state, std::string(name_) + ": load_state_dict", "the given state", "the optimiser");
}

// --- SGD ---

SGD::SGD(std::vector<Tensor> params, double lr_, double momentum_, double weight_decay_)
    : Optimizer("SGD", std::move(params), lr_), momentum(momentum_), weight_decay(weight_decay_) {
    check_range(name_, "momentum", momentum, 0);
    check_range(name_, "weight_decay", weight_decay, 0);
    if (momentum != 0)
        for (const Tensor& p : params_) momentum_buffers_.push_back(zeros(p.shape(), p.dtype()));
}

void SGD::step() {
    for_each_grad(params_, name_, [&]<class T>(size_t i, T* p, const T* g, int64_t n) {
        T* buf = momentum_buffers_.empty() ? nullptr : momentum_buffers_[i].data<T>();
        const T lr_t = T(lr), mu = T(momentum), wd = T(weight_decay);
        parallel_range(n, [=](int64_t begin, int64_t end) {
            for (int64_t j = begin; j < end; ++j) {
                T d = g[j] + wd * p[j];              // d = g + λ p (L2 decay, through the gradient)
                if (buf) d = buf[j] = mu * buf[j] + d;  // buf = μ buf + d
                p[j] -= lr_t * d;
            }
        });
    });
}

NamedTensors SGD::state_dict() const {
    NamedTensors out;
    for (size_t i = 0; i < momentum_buffers_.size(); ++i)
        out.emplace_back("momentum." + std::to_string(i), momentum_buffers_[i]);
    return out;
}

// --- AdamW ---

AdamW::AdamW(std::vector<Tensor> params, double lr_, double beta1_, double beta2_, double eps_,
             double weight_decay_)
    : Optimizer("AdamW", std::move(params), lr_),
      beta1(beta1_), beta2(beta2_), eps(eps_), weight_decay(weight_decay_) {
    check_range(name_, "beta1", beta1, 0, 1);
    check_range(name_, "beta2", beta2, 0, 1);
    check_range(name_, "eps", eps, 0);
    check_range(name_, "weight_decay", weight_decay, 0);
    // m = v = 0 at t = 0 is exactly torch's lazily created state.
    for (const Tensor& p : params_)
        state_.push_back({zeros({}, DType::i64), zeros(p.shape(), p.dtype()), zeros(p.shape(), p.dtype())});
}

void AdamW::step() {
    for_each_grad(params_, name_, [&]<class T>(size_t i, T* p, const T* g, int64_t n) {
        const State& s = state_[i];
        const int64_t t = ++*s.step.data<int64_t>();
        // The per-step scalars in double, then rounded to T, as torch does. The bias
        // corrections are folded into two scalars: m̂ / (√v̂ + ε) = (m / bc1) / (√v / √bc2 + ε).
        const double bias_correction1 = 1 - std::pow(beta1, double(t));
        const double bias_correction2 = 1 - std::pow(beta2, double(t));
        const T decay = T(1 - lr * weight_decay), step_size = T(lr / bias_correction1);
        const T bc2_sqrt = T(std::sqrt(bias_correction2));
        const T b1 = T(beta1), b2 = T(beta2), one_minus_b1 = T(1 - beta1), one_minus_b2 = T(1 - beta2);
        const T eps_t = T(eps);
        T* m = s.exp_avg.data<T>();  // (n), like p and g
        T* v = s.exp_avg_sq.data<T>();
        // One pass: every element of p, m, v is read and written once. The closure takes the
        // pointers by value, so the compiler sees they stay put and can vectorise the loop.
        parallel_range(n, [=](int64_t begin, int64_t end) {
            for (int64_t j = begin; j < end; ++j) {
                p[j] *= decay;                                 // p *= 1 − lr λ (decoupled decay)
                m[j] = b1 * m[j] + one_minus_b1 * g[j];        // m = β1 m + (1 − β1) g
                v[j] = b2 * v[j] + one_minus_b2 * g[j] * g[j];  // v = β2 v + (1 − β2) g²
                const T denom = std::sqrt(v[j]) / bc2_sqrt + eps_t;  // √v̂ + ε
                p[j] -= step_size * m[j] / denom;              // p −= lr m̂ / (√v̂ + ε)
            }
        });
    });
}

NamedTensors AdamW::state_dict() const {
    NamedTensors out;
    for (size_t i = 0; i < state_.size(); ++i) {
        const std::string index = std::to_string(i);
        out.emplace_back("step." + index, state_[i].step);
        out.emplace_back("exp_avg." + index, state_[i].exp_avg);
        out.emplace_back("exp_avg_sq." + index, state_[i].exp_avg_sq);
    }
    return out;
}

// --- clipping ---

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
    // ‖g‖² summed in double, in a fixed order, so the norm (and whether to clip) does not
    // depend on the number of threads.
    double sum_sq = 0;
    for_each_grad(params, "clip_grad_norm", [&]<class T>(size_t, T*, const T* g, int64_t n) {
        for (int64_t j = 0; j < n; ++j) sum_sq += double(g[j]) * double(g[j]);
    });
    const double norm = std::sqrt(sum_sq);
    if (norm > max_norm) {
        const double scale = max_norm / (norm + 1e-6);
        for_each_grad(params, "clip_grad_norm", [&]<class T>(size_t, T*, T* g, int64_t n) {
            for (int64_t j = 0; j < n; ++j) g[j] *= T(scale);
        });
    }
    return norm;
}

}  // namespace gg::nn

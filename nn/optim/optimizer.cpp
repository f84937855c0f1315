// optimizer.cpp — SGD and AdamW through the device's fused update kernels, and clipping.
#include "nn/optim/optimizer.h"

#include <cmath>
#include <map>
#include <stdexcept>

namespace gg::nn {

namespace {
// What the fused updates rely on: a contiguous floating tensor, on any device.
void check_param(const Tensor& p, size_t i, const char* op) {
    const std::string which = std::string(op) + ": parameter " + std::to_string(i);
    check_defined(p, which.c_str());
    if (!is_floating(p.dtype())) throw std::invalid_argument(which + " (" + describe(p) + ") is not floating");
    if (!p.is_contiguous()) throw std::invalid_argument(which + " (" + describe(p) + ") is not contiguous");
}

// Calls f(i, p, g) for every parameter i that has a gradient, after checking that the
// gradient matches its parameter in shape, dtype, device and layout.
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
        f(i, p, g);
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
        for (const Tensor& p : params_) momentum_buffers_.push_back(zeros(p.shape(), p.dtype(), p.device()));
}

void SGD::step() {
    const SGDStep s{lr, momentum, weight_decay};
    for_each_grad(params_, name_, [&](size_t i, const Tensor& p, const Tensor& g) {
        const View buf = momentum_buffers_.empty() ? View{} : momentum_buffers_[i].view_desc();
        backend(p.device()).sgd_step(s, p.view_desc(), g.view_desc(), buf);
        p.bump_version();  // the parameter is written in place: a graph that saved it is stale
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
        // The step count stays on the host (as torch's): the bias corrections are host scalars.
        state_.push_back({zeros({}, DType::i64), zeros(p.shape(), p.dtype(), p.device()),
                          zeros(p.shape(), p.dtype(), p.device())});
}

void AdamW::step() {
    // Every parameter of a device in one call: on CUDA one launch for all of them.
    std::map<Device, std::vector<AdamWTensors>> lists;
    for_each_grad(params_, name_, [&](size_t i, const Tensor& p, const Tensor& g) {
        const State& s = state_[i];
        const int64_t t = ++*s.step.data<int64_t>();
        // The kernel decays p by 1 − lr·λ; independent decay wants 1 − λ·lr/peak.
        const double decay = decay_peak_lr > 0 ? weight_decay / decay_peak_lr : weight_decay;
        const AdamWStep step{lr, beta1, beta2, eps, decay, 1 - std::pow(beta1, double(t)),
                             1 - std::pow(beta2, double(t))};
        lists[p.device()].push_back(
            {step, p.view_desc(), g.view_desc(), s.exp_avg.view_desc(), s.exp_avg_sq.view_desc()});
        p.bump_version();  // written in place below: a graph that saved it is stale
    });
    for (const auto& [device, list] : lists) backend(device).adamw_step(list);
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
    // ‖g‖² summed in double, in a fixed order, on the gradients' device, all of them in one
    // call; one number comes back.
    std::vector<View> grads;
    Tensor sum_sq;
    for_each_grad(params, "clip_grad_norm", [&](size_t i, const Tensor&, const Tensor& g) {
        if (!sum_sq.defined()) sum_sq = zeros({}, DType::f64, g.device());
        if (g.device() != sum_sq.device())
            throw std::invalid_argument("clip_grad_norm: parameter " + std::to_string(i) + " is on " +
                                        device_name(g.device()) + ", the others on " + device_name(sum_sq.device()));
        grads.push_back(g.view_desc());
    });
    if (sum_sq.defined()) backend(sum_sq.device()).sum_squares(sum_sq.view_desc(), grads);
    if (!sum_sq.defined()) return 0;
    const double norm = std::sqrt(sum_sq.item());
    if (norm > max_norm) {
        // g *= scale for every gradient, in place (the tensors the optimiser reads), in one call.
        backend(sum_sq.device()).scale_list(max_norm / (norm + 1e-6), grads);
        for_each_grad(params, "clip_grad_norm", [&](size_t, const Tensor&, const Tensor& g) { g.bump_version(); });
    }
    return norm;
}

}  // namespace gg::nn

// optimizer.h — optimisers (SGD, AdamW) and gradient clipping; schedules are in schedule.h.
//
// The training loop is PyTorch's:
//
//     opt.lr = lr_at(schedule, step);
//     opt.zero_grad();
//     loss.backward();
//     clip_grad_norm(opt.params(), 1.0);
//     opt.step();
//
// Every update is fused on the parameters' device (the backend's adamw_step, one call for
// all of them, and sgd_step, one per parameter; float32 or float64) and writes into each
// parameter's existing storage: modules hold pointers to their parameter tensors, so an optimiser must never
// swap them for new ones. For the same reason, build the optimiser after Module::to(dtype)
// or to(device), which do swap them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace gg::nn {

class Optimizer {
public:
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    // Drops every parameter's gradient (the next backward() starts from nothing).
    void zero_grad();
    // One update of every parameter that has a gradient; the others are left alone.
    virtual void step() = 0;

    // The optimiser's state tensors under stable names ("exp_avg.0", ...). These are the
    // live tensors, not copies, as Module::state_dict: clone them to keep a snapshot, or
    // hand them to nn::load (checkpoint.h) as extra tensors to restore them in place.
    virtual NamedTensors state_dict() const = 0;
    // Copies a state_dict() into this optimiser's state, in place, after checking that the
    // names, shapes and dtypes match exactly; on a mismatch it throws and changes nothing.
    void load_state_dict(const NamedTensors& state);

    const std::vector<Tensor>& params() const { return params_; }

    double lr;  // read at every step, so a schedule sets it before each one

protected:
    Optimizer(const char* name, std::vector<Tensor> params, double lr);
    const char* name_;  // for error messages
    std::vector<Tensor> params_;
};

// Stochastic gradient descent with (heavy-ball) momentum and L2 weight decay, as
// torch.optim.SGD (dampening 0, no Nesterov):
//     d = g + weight_decay · p
//     buf = momentum · buf + d        (buf starts at 0, so the first step has buf = d)
//     p  -= lr · buf                  (lr · d when momentum = 0)
class SGD : public Optimizer {
public:
    SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0);
    void step() override;
    NamedTensors state_dict() const override;  // "momentum.<i>"; empty without momentum

    double momentum, weight_decay;

private:
    std::vector<Tensor> momentum_buffers_;  // one per parameter, only when momentum != 0
};

// Adam with decoupled weight decay (Loshchilov & Hutter 2019), as torch.optim.AdamW.
// Each parameter counts its own steps t (a parameter without a gradient does not step):
//     p *= 1 − lr · weight_decay               (decay_peak_lr = 0: torch's AdamW)
//     p *= 1 − weight_decay · lr / decay_peak_lr   (decay_peak_lr > 0: independent decay)
//     m  = β1 m + (1 − β1) g          v = β2 v + (1 − β2) g²
//     m̂  = m / (1 − β1ᵗ)               v̂ = v / (1 − β2ᵗ)
//     p -= lr · m̂ / (√v̂ + ε)
class AdamW : public Optimizer {
public:
    AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
          double eps = 1e-8, double weight_decay = 0.01);
    void step() override;
    // "step.<i>" (int64 scalar), "exp_avg.<i>" (m) and "exp_avg_sq.<i>" (v), shaped as
    // parameter i; names as in torch's AdamW state.
    NamedTensors state_dict() const override;

    double beta1, beta2, eps, weight_decay;
    // Weight decay independent of the learning rate (Wortsman et al. 2023, arXiv 2309.14322):
    // with the schedule's peak rate here, each step removes weight_decay · s_t of every weight,
    // s_t = lr / peak the schedule's factor (1 at the peak), whatever the peak is. Tied to the
    // rate (0), a sweep to lr 1 with weight_decay 0.1 removes 10% of every weight per step,
    // which by itself caps the weight growth a high rate could cause. λ ~ 1e-4 then.
    double decay_peak_lr = 0;

private:
    struct State {
        Tensor step, exp_avg, exp_avg_sq;
    };
    std::vector<State> state_;  // one per parameter
};

// Rescales all gradients together so that their global L2 norm ‖(g_1, ..., g_n)‖ is at
// most max_norm: when the norm exceeds it every gradient is multiplied, in place, by
// max_norm / (norm + 1e-6). Returns the norm before clipping, as
// torch.nn.utils.clip_grad_norm_. Parameters without a gradient are skipped. A NaN norm
// is returned as it is, with the gradients untouched, so the caller can skip the step.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace gg::nn

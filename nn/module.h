// module.h — the Module base class, in the style of the PyTorch C++ frontend.
//
// A module registers its parameters, buffers and sub-modules by name; the base class
// walks them to give dotted names ("layers.0.attn.w_q.weight"), switch train/eval,
// clear gradients and convert dtypes. Registration keeps a pointer to the member
// tensor, so converting or loading a module updates the members themselves: modules are
// therefore neither copyable nor movable (hold them by shared_ptr).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"

namespace gg::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
public:
    Module() = default;
    virtual ~Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    NamedTensors named_parameters() const;
    std::vector<Tensor> parameters() const;
    NamedTensors named_buffers() const;
    NamedTensors state_dict() const;  // parameters then buffers: the live tensors, not copies
    // Copies `state` into this module's parameters and buffers, in place (every handle on
    // them sees the new values), converting to each one's device. The names, shapes and
    // dtypes must match state_dict() exactly; otherwise it throws and changes nothing.
    void load_state_dict(const NamedTensors& state);
    // This module (named "") and every sub-module below it, by dotted name, each before
    // its children; the pointers live as long as this module.
    std::vector<std::pair<std::string, const Module*>> named_modules() const;
    int64_t num_parameters() const;

    void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }
    void zero_grad();
    // Converts every floating parameter and buffer (e.g. to float64 for gradient checks).
    void to(DType dtype);
    // Moves every parameter and buffer to `device`. Both conversions give each member a
    // new tensor: build optimisers after them, as in PyTorch.
    void to(Device device);

protected:
    void register_parameter(std::string name, Tensor& member);  // also sets requires_grad
    void register_buffer(std::string name, Tensor& member);
    template <class M>
    std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
        children_.emplace_back(std::move(name), module);
        return module;
    }

private:
    template <class F>
    void visit(const std::string& prefix, bool buffers, F&& f) const;
    // Replaces every parameter (then buffer) by convert(it), keeping requires_grad.
    template <class F>
    void convert_members(F&& convert);

    std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
};

// Inside its scope, the modules built start with zero weights instead of random draws
// (init_uniform and init_normal below give zeros), for a model whose every weight is read
// from a file next: drawing the 1.7·10⁹ numbers of Qwen3-1.7B took ~30 s, several times
// longer than reading them. The zeros are made in `dtype`, the one the model is converted to
// next, so that a bfloat16 model never holds float32 copies of its weights. Per thread;
// scopes nest, the innermost dtype counting.
class SkipInit {
public:
    explicit SkipInit(DType dtype = DType::f32);
    ~SkipInit();
    SkipInit(const SkipInit&) = delete;
    SkipInit& operator=(const SkipInit&) = delete;
    static bool active();

private:
    DType outer_dtype_;  // restored on leaving: scopes nest
};

// The draws modules start from: U(−bound, bound) and N(0, std²), or zeros under SkipInit.
Tensor init_uniform(const Shape& shape, double bound);
Tensor init_normal(const Shape& shape, double std);

// Copies every tensor of `from` into the tensor of the same name in `into`, in place.
// The names must be the same two sets, with equal shapes and dtypes; anything else
// throws std::runtime_error("<context>: ...") before anything is written. The labels
// say in messages where each side comes from: "tensor 'w' has shape (8,16) in
// <from_label> but (16,16) in <into_label>". Module::load_state_dict, checkpoint loading and Optimizer::load_state_dict use it.
void copy_state(const NamedTensors& into, const NamedTensors& from, const std::string& context,
                const std::string& from_label, const std::string& into_label);

}  // namespace gg::nn

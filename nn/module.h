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

#include "tensor/ops.h"

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
    NamedTensors state_dict() const;  // parameters then buffers
    int64_t num_parameters() const;

    void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }
    void zero_grad();
    // Converts every floating parameter and buffer (e.g. to float64 for gradient checks).
    void to(DType dtype);

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

    std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
};

}  // namespace gg::nn

#include "nn/module.h"

#include <stdexcept>

namespace gg::nn {

template <class F>
void Module::visit(const std::string& prefix, bool buffers, F&& f) const {
    for (const auto& [name, member] : buffers ? buffers_ : params_) f(prefix + name, *member);
    for (const auto& [name, child] : children_) child->visit(prefix + name + ".", buffers, f);
}

void Module::register_parameter(std::string name, Tensor& member) {
    check_defined(member, "register_parameter");
    member.requires_grad_();
    params_.emplace_back(std::move(name), &member);
}

void Module::register_buffer(std::string name, Tensor& member) { buffers_.emplace_back(std::move(name), &member); }

NamedTensors Module::named_parameters() const {
    NamedTensors out;
    visit("", false, [&](const std::string& name, Tensor& t) { out.emplace_back(name, t); });
    return out;
}

std::vector<Tensor> Module::parameters() const {
    std::vector<Tensor> out;
    visit("", false, [&](const std::string&, Tensor& t) { out.push_back(t); });
    return out;
}

NamedTensors Module::named_buffers() const {
    NamedTensors out;
    visit("", true, [&](const std::string& name, Tensor& t) { out.emplace_back(name, t); });
    return out;
}

NamedTensors Module::state_dict() const {
    NamedTensors out = named_parameters();
    for (auto& entry : named_buffers()) out.push_back(std::move(entry));
    return out;
}

int64_t Module::num_parameters() const {
    int64_t n = 0;
    for (const Tensor& p : parameters()) n += p.numel();
    return n;
}

void Module::train(bool on) {
    training_ = on;
    for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
    for (const Tensor& p : parameters()) p.zero_grad();
}

void Module::to(DType dtype) {
    auto convert = [dtype](bool is_param) {
        return [dtype, is_param](const std::string&, Tensor& t) {
            if (!is_floating(t.dtype()) || t.dtype() == dtype) return;
            t = t.detach().to(dtype);
            if (is_param) t.requires_grad_();
        };
    };
    visit("", false, convert(true));
    visit("", true, convert(false));
}

}  // namespace gg::nn

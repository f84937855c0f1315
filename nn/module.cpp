// module.cpp — registration, dotted names, state_dict loading, and device/dtype moves.
#include "nn/module.h"

#include <map>
#include <set>
#include <stdexcept>

#include "nn/untrusted.h"

namespace gg::nn {

namespace {
thread_local int skip_init_depth = 0;
thread_local DType skip_init_dtype = DType::f32;
}  // namespace

SkipInit::SkipInit(DType dtype) : outer_dtype_(skip_init_dtype) {
    ++skip_init_depth;
    skip_init_dtype = dtype;
}
SkipInit::~SkipInit() {
    --skip_init_depth;
    skip_init_dtype = outer_dtype_;
}
bool SkipInit::active() { return skip_init_depth > 0; }

Tensor init_uniform(const Shape& shape, double bound) {
    return SkipInit::active() ? zeros(shape, skip_init_dtype) : (rand(shape) * 2.0 - 1.0) * bound;
}

Tensor init_normal(const Shape& shape, double std) {
    if (SkipInit::active()) return zeros(shape, skip_init_dtype);
    return std == 1 ? randn(shape) : randn(shape) * std;
}

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

void Module::load_state_dict(const NamedTensors& state) {
    copy_state(state_dict(), state, "load_state_dict", "the given state", "the module");
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
    std::vector<std::pair<std::string, const Module*>> out;
    std::vector<std::pair<std::string, const Module*>> stack{{"", this}};  // depth first, as torch
    while (!stack.empty()) {
        auto [name, module] = stack.back();
        stack.pop_back();
        out.emplace_back(name, module);
        for (auto it = module->children_.rbegin(); it != module->children_.rend(); ++it)
            stack.emplace_back(name.empty() ? it->first : name + "." + it->first, it->second.get());
    }
    return out;
}

template <class F>
void Module::convert_members(F&& convert) {
    const auto replace = [&](bool is_param) {
        return [&, is_param](const std::string&, Tensor& t) {
            t = convert(t.detach());
            if (is_param) t.requires_grad_();
        };
    };
    visit("", false, replace(true));
    visit("", true, replace(false));
}

void Module::to(DType dtype) {
    convert_members([dtype](const Tensor& t) { return is_floating(t.dtype()) ? t.to(dtype) : t; });
}

void Module::to(Device device) {
    convert_members([device](const Tensor& t) { return t.to(device); });
}

void copy_state(const NamedTensors& into, const NamedTensors& from, const std::string& context,
                const std::string& from_label, const std::string& into_label) {
    const auto fail = [&](const std::string& msg) { throw std::runtime_error(context + ": " + msg); };
    const auto tensor = [](const std::string& name) { return "tensor '" + printable(name) + "'"; };  // names may come from a file
    std::map<std::string, Tensor> sources;
    for (const auto& [name, t] : from)
        if (!sources.emplace(name, t).second) fail(tensor(name) + " appears twice in " + from_label);

    // 1. Check everything, so that a bad file cannot leave a half-loaded model behind...
    std::set<std::string> wanted;
    for (const auto& [name, dst] : into) {
        if (!wanted.insert(name).second) fail(tensor(name) + " appears twice in " + into_label);
        const auto it = sources.find(name);
        if (it == sources.end()) fail(tensor(name) + " (" + describe(dst) + ") is missing from " + from_label);
        const Tensor& src = it->second;
        if (src.shape() != dst.shape())
            fail(tensor(name) + " has shape " + shape_str(src.shape()) + " in " + from_label + " but " +
                 shape_str(dst.shape()) + " in " + into_label);
        if (src.dtype() != dst.dtype())
            fail(tensor(name) + " has dtype " + dtype_name(src.dtype()) + " in " + from_label + " but " +
                 dtype_name(dst.dtype()) + " in " + into_label);
    }
    for (const auto& [name, src] : from)
        if (!wanted.contains(name))
            fail(from_label + " has " + tensor(name) + " (" + describe(src) + "), which " + into_label +
                 " does not have");

    // 2. ...then copy into the existing storage: every handle on `into` sees the new values.
    for (const auto& [name, dst] : into) {
        const Tensor src = sources.at(name).detach().to(dst.device());
        backend(dst.device()).copy(dst.view_desc(), src.view_desc());
        dst.bump_version();
    }
}

}  // namespace gg::nn

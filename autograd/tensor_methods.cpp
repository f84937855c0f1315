// tensor_methods.cpp — the Tensor methods that are differentiable ops: the copies
// (clone, contiguous, to) and the method forms of common ops, so that `x.sum()` reads
// as in PyTorch. The views are in views.cpp.
#include "autograd/engine.h"
#include "autograd/ops.h"

namespace gg {

// --- copies: the gradient of a copy is the copy's gradient, brought back ---

Tensor Tensor::clone() const {
    Tensor out = empty(shape(), dtype(), device());
    backend(device()).copy(out.view_desc(), view_desc());
    return record("clone", out, {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(Device target) const {
    if (target == device()) return *this;
    Tensor src = contiguous();
    Tensor out = empty(shape(), dtype(), target);
    const size_t nbytes = numel() * dtype_size(dtype());
    if (nbytes > 0) {
        if (device() == Device::CPU)
            backend(target).from_host(out.view_desc().data, src.view_desc().data, nbytes);
        else if (target == Device::CPU)
            backend(device()).to_host(out.view_desc().data, src.view_desc().data, nbytes);
        else
            throw std::invalid_argument(std::string("to: no copy from ") + device_name(device()) + " to " +
                                        device_name(target));
    }
    const Device source = device();
    return record("to_device", out, {*this}, [source](const Tensor& g) { return std::vector<Tensor>{g.to(source)}; });
}

Tensor Tensor::to(DType target) const {
    if (target == dtype()) return *this;
    Tensor out = empty(shape(), target, device());
    backend(device()).copy(out.view_desc(), view_desc());
    const DType source = dtype();
    const bool differentiable = is_floating(source) && is_floating(target);
    return differentiable ? record("to_dtype", out, {*this},
                                   [source](const Tensor& g) { return std::vector<Tensor>{g.to(source)}; })
                          : out;
}

// --- in-place writes ---

namespace {
void check_writable(const Tensor& dst, const Tensor& src, const char* op) {
    check_defined(dst, op);
    if (grad_enabled() && (dst.requires_grad() || (src.defined() && src.requires_grad())))
        throw std::logic_error(std::string(op) + ": in-place write into " + describe(dst) +
                               " while grad mode is on and a tensor requires grad; do it under a NoGradGuard");
}
}  // namespace

const Tensor& Tensor::copy_(const Tensor& src) const {
    check_writable(*this, src, "copy_");
    check_defined(src, "copy_");
    if (broadcast_shapes(src.shape(), shape(), "copy_") != shape())
        throw std::invalid_argument("copy_: cannot copy a tensor of shape " + shape_str(src.shape()) +
                                    " into one of shape " + shape_str(shape()));
    // Broadcast, then move and convert: what lands in this tensor is src as this tensor sees it.
    Tensor from = src.detach().to(device()).expand(shape());
    if (from.shares_storage(*this)) from = from.contiguous().clone();  // x.copy_(x.t()) must not read what it wrote
    backend(device()).copy(view_desc(), from.view_desc());
    bump_version();
    return *this;
}

const Tensor& Tensor::fill_(double value) const {
    check_writable(*this, Tensor(), "fill_");
    backend(device()).copy(view_desc(), full({}, value, dtype(), device()).expand(shape()).view_desc());
    bump_version();
    return *this;
}

// --- method forms ---

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return gg::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return gg::mean(*this, dims, keepdim); }
Tensor Tensor::pow(double exponent) const { return gg::pow(*this, exponent); }
Tensor Tensor::exp() const { return gg::exp(*this); }
Tensor Tensor::log() const { return gg::log(*this); }
Tensor Tensor::sqrt() const { return gg::sqrt(*this); }
Tensor Tensor::sigmoid() const { return gg::sigmoid(*this); }
Tensor Tensor::tanh() const { return gg::tanh(*this); }
Tensor Tensor::relu() const { return gg::relu(*this); }
Tensor Tensor::matmul(const Tensor& other) const { return gg::matmul(*this, other); }

}  // namespace gg

// views.cpp — zero-copy views: a new shape/strides/offset over the same Storage.
//
// Each view is also a differentiable op: its backward maps the view's gradient back to
// the shape of the tensor it was taken from (reshape back, inverse permutation, pad a
// slice with zeros, sum away an expansion).
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/engine.h"
#include "tensor/ops.h"

namespace gg {

namespace {
Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = base.impl()->storage;
    impl->shape = std::move(shape);
    impl->strides = std::move(strides);
    impl->offset = offset;
    impl->dtype = base.dtype();
    return Tensor(std::move(impl));
}

// Replaces a single -1 by whatever makes the element counts agree.
Shape infer_shape(const Shape& requested, int64_t numel, const char* op, const Shape& from) {
    Shape shape = requested;
    int64_t known = 1, infer_at = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1 && infer_at < 0) infer_at = static_cast<int64_t>(i);
        else known *= shape[i];
    }
    if (infer_at >= 0 && known != 0) shape[infer_at] = numel / known;
    if (shape_numel(shape) != numel || (infer_at >= 0 && known == 0))
        throw std::invalid_argument(std::string(op) + ": cannot view shape " + shape_str(from) + " (" +
                                    std::to_string(numel) + " elements) as " + shape_str(requested));
    return shape;
}
}  // namespace

Tensor Tensor::view(const Shape& requested) const {
    const Shape shape = infer_shape(requested, numel(), "view", this->shape());
    if (!is_contiguous())
        throw std::invalid_argument("view: tensor of shape " + shape_str(this->shape()) +
                                    " is not contiguous; use reshape() (which copies)");
    const Shape in_shape = this->shape();
    return record("view", make_view(*this, shape, contiguous_strides(shape), offset()), {*this},
                  [in_shape](const Tensor& g) { return std::vector<Tensor>{g.reshape(in_shape)}; });
}

Tensor Tensor::reshape(const Shape& shape) const { return contiguous().view(shape); }

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
    if (static_cast<int64_t>(dims.size()) != dim())
        throw std::invalid_argument("permute: " + std::to_string(dims.size()) + " dims given for a tensor of shape " +
                                    shape_str(shape()));
    Shape shape(dims.size());
    Strides strides(dims.size());
    std::vector<int64_t> inverse(dims.size(), -1);
    for (size_t i = 0; i < dims.size(); ++i) {
        const int64_t d = wrap_dim(dims[i], dim(), "permute");
        if (inverse[d] >= 0) throw std::invalid_argument("permute: dim " + std::to_string(d) + " repeats");
        inverse[d] = static_cast<int64_t>(i);
        shape[i] = this->shape()[d];
        strides[i] = this->strides()[d];
    }
    return record("permute", make_view(*this, shape, strides, offset()), {*this},
                  [inverse](const Tensor& g) { return std::vector<Tensor>{g.permute(inverse)}; });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
    std::vector<int64_t> dims(dim());
    std::iota(dims.begin(), dims.end(), 0);
    std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
    return permute(dims);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
    d = wrap_dim(d, dim(), "narrow");
    if (start < 0 || length < 0 || start + length > shape()[d])
        throw std::out_of_range("narrow: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                                ") is outside dim " + std::to_string(d) + " of shape " + shape_str(shape()));
    Shape shape = this->shape();
    shape[d] = length;
    const Shape in_shape = this->shape();
    const DType dt = dtype();
    const Device dev = device();
    return record("narrow", make_view(*this, shape, strides(), offset() + start * strides()[d]), {*this},
                  [=](const Tensor& g) {
                      // The slice's gradient, placed back into zeros of the full shape.
                      Tensor full_grad = zeros(in_shape, dt, dev);
                      backend(dev).copy(full_grad.narrow(d, start, length).view_desc(), g.view_desc());
                      return std::vector<Tensor>{full_grad};
                  });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
    d = wrap_dim(d, dim(), "select");
    if (index < -shape()[d] || index >= shape()[d])
        throw std::out_of_range("select: index " + std::to_string(index) + " is outside dim " + std::to_string(d) +
                                " of shape " + shape_str(shape()));
    if (index < 0) index += shape()[d];
    return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& requested) const {
    if (requested.size() < shape().size())
        throw std::invalid_argument("expand: cannot expand shape " + shape_str(shape()) + " to " +
                                    shape_str(requested));
    const size_t lead = requested.size() - shape().size();
    Shape shape(requested.size());
    Strides strides(requested.size(), 0);  // new leading dims and expanded dims repeat: stride 0
    for (size_t i = 0; i < requested.size(); ++i) {
        const int64_t have = i < lead ? 1 : this->shape()[i - lead];
        shape[i] = requested[i] == -1 ? have : requested[i];
        if (i >= lead && have == shape[i]) strides[i] = this->strides()[i - lead];
        else if (have != 1)
            throw std::invalid_argument("expand: cannot expand shape " + shape_str(this->shape()) + " to " +
                                        shape_str(requested));
    }
    const Shape in_shape = this->shape();
    return record("expand", make_view(*this, shape, strides, offset()), {*this},
                  [in_shape](const Tensor& g) { return std::vector<Tensor>{sum_to(g, in_shape)}; });
}

Tensor Tensor::squeeze(int64_t d) const {
    d = wrap_dim(d, dim(), "squeeze");
    if (shape()[d] != 1) return *this;  // as torch: squeezing a non-1 dim is a no-op
    Shape shape = this->shape();
    Strides strides = this->strides();
    shape.erase(shape.begin() + d);
    strides.erase(strides.begin() + d);
    const Shape in_shape = this->shape();
    return record("squeeze", make_view(*this, shape, strides, offset()), {*this},
                  [in_shape](const Tensor& g) { return std::vector<Tensor>{g.reshape(in_shape)}; });
}

Tensor Tensor::unsqueeze(int64_t d) const {
    d = wrap_dim(d, dim() + 1, "unsqueeze");
    Shape shape = this->shape();
    Strides strides = this->strides();
    shape.insert(shape.begin() + d, 1);
    strides.insert(strides.begin() + d, d < dim() ? this->strides()[d] * this->shape()[d] : 1);
    const Shape in_shape = this->shape();
    return record("unsqueeze", make_view(*this, shape, strides, offset()), {*this},
                  [in_shape](const Tensor& g) { return std::vector<Tensor>{g.reshape(in_shape)}; });
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
    if (dim() == 0) return reshape({1});
    start_dim = wrap_dim(start_dim, dim(), "flatten");
    end_dim = wrap_dim(end_dim, dim(), "flatten");
    Shape shape(this->shape().begin(), this->shape().begin() + start_dim);
    shape.push_back(-1);
    shape.insert(shape.end(), this->shape().begin() + end_dim + 1, this->shape().end());
    return reshape(shape);
}

}  // namespace gg

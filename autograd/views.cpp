// views.cpp — the view ops as differentiable ops. The geometry (shape, strides, offset)
// comes from tensor/views.h; here each view records how its gradient goes back to the
// tensor it was taken from: reshape back, the inverse permutation, pad a slice with
// zeros, sum away an expansion.
#include <algorithm>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tensor/views.h"

namespace gg {

namespace {
// A view whose gradient is the view's gradient reshaped back to the input's shape.
Tensor reshaping_view(const char* name, const Tensor& t, const ViewGeometry& g) {
    const Shape in_shape = t.shape();
    return record(name, t.alias(g.shape, g.strides, g.offset), {t},
                  [in_shape](const Tensor& grad) { return std::vector<Tensor>{grad.reshape(in_shape)}; });
}
}  // namespace

Tensor Tensor::view(const Shape& shape) const { return reshaping_view("view", *this, view_geometry(*this, shape)); }

Tensor Tensor::reshape(const Shape& shape) const { return contiguous().view(shape); }

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
    const ViewGeometry g = permute_geometry(*this, dims);
    std::vector<int64_t> inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[wrap_dim(dims[i], dim(), "permute")] = static_cast<int64_t>(i);
    return record("permute", alias(g.shape, g.strides, g.offset), {*this},
                  [inverse](const Tensor& grad) { return std::vector<Tensor>{grad.permute(inverse)}; });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
    std::vector<int64_t> dims(dim());
    std::iota(dims.begin(), dims.end(), 0);
    std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
    return permute(dims);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
    const ViewGeometry g = narrow_geometry(*this, d, start, length);
    d = wrap_dim(d, dim(), "narrow");
    const Shape in_shape = shape();
    const DType dt = dtype();
    const Device dev = device();
    return record("narrow", alias(g.shape, g.strides, g.offset), {*this}, [=](const Tensor& grad) {
        // The slice's gradient, placed back into zeros of the full shape.
        Tensor full_grad = zeros(in_shape, dt, dev);
        backend(dev).copy(full_grad.narrow(d, start, length).view_desc(), grad.view_desc());
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

Tensor Tensor::index(const std::vector<Index>& indices) const {
    if (static_cast<int64_t>(indices.size()) > dim())
        throw std::invalid_argument("index: " + std::to_string(indices.size()) + " indices for a tensor of shape " +
                                    shape_str(shape()));
    Tensor out = *this;
    int64_t d = 0;  // the dim of `out` that the next index applies to
    for (const Index& ix : indices) {
        if (!ix.is_slice) {
            out = out.select(d, ix.position);  // the dim goes away
            continue;
        }
        // Python's rule for a slice: clamp each end into [0, size] after counting negatives from the end.
        const int64_t n = out.shape()[d];
        const auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
        const int64_t start = clamp(ix.slice.start.value_or(0)), stop = clamp(ix.slice.stop.value_or(n));
        out = out.narrow(d, start, std::max<int64_t>(stop - start, 0));
        ++d;
    }
    return out;
}

Tensor Tensor::expand(const Shape& shape) const {
    const ViewGeometry g = expand_geometry(*this, shape);
    const Shape in_shape = this->shape();
    return record("expand", alias(g.shape, g.strides, g.offset), {*this},
                  [in_shape](const Tensor& grad) { return std::vector<Tensor>{sum_to(grad, in_shape)}; });
}

Tensor Tensor::squeeze(int64_t d) const {
    if (shape()[wrap_dim(d, dim(), "squeeze")] != 1) return *this;
    return reshaping_view("squeeze", *this, squeeze_geometry(*this, d));
}

Tensor Tensor::unsqueeze(int64_t d) const { return reshaping_view("unsqueeze", *this, unsqueeze_geometry(*this, d)); }

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

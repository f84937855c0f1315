// views.cpp — the geometry of each view (tensor/views.h): a new shape/strides/offset over
// the same storage. Every check that can fail is here, so a view op throws before it
// builds anything.
#include "tensor/views.h"

#include <stdexcept>
#include <string>

namespace gg {

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

ViewGeometry view_geometry(const Tensor& t, const Shape& requested) {
    Shape shape = infer_shape(requested, t.numel(), "view", t.shape());
    if (!t.is_contiguous())
        throw std::invalid_argument("view: tensor of shape " + shape_str(t.shape()) +
                                    " is not contiguous; use reshape() (which copies)");
    Strides strides = contiguous_strides(shape);
    return {std::move(shape), std::move(strides), t.offset()};
}

ViewGeometry permute_geometry(const Tensor& t, const std::vector<int64_t>& dims) {
    if (static_cast<int64_t>(dims.size()) != t.dim())
        throw std::invalid_argument("permute: " + std::to_string(dims.size()) + " dims given for a tensor of shape " +
                                    shape_str(t.shape()));
    Shape shape(dims.size());
    Strides strides(dims.size());
    std::vector<bool> seen(dims.size(), false);
    for (size_t i = 0; i < dims.size(); ++i) {
        const int64_t d = wrap_dim(dims[i], t.dim(), "permute");
        if (seen[d]) throw std::invalid_argument("permute: dim " + std::to_string(d) + " repeats");
        seen[d] = true;
        shape[i] = t.shape()[d];
        strides[i] = t.strides()[d];
    }
    return {std::move(shape), std::move(strides), t.offset()};
}

ViewGeometry narrow_geometry(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
    const int64_t d = wrap_dim(dim, t.dim(), "narrow");
    if (start < 0 || length < 0 || start > t.shape()[d] - length)
        throw std::out_of_range("narrow: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                                ") is outside dim " + std::to_string(d) + " of shape " + shape_str(t.shape()));
    Shape shape = t.shape();
    shape[d] = length;
    return {std::move(shape), t.strides(), t.offset() + start * t.strides()[d]};
}

ViewGeometry expand_geometry(const Tensor& t, const Shape& requested) {
    const auto fail = [&] {
        throw std::invalid_argument("expand: cannot expand shape " + shape_str(t.shape()) + " to " +
                                    shape_str(requested));
    };
    if (requested.size() < t.shape().size()) fail();
    const size_t lead = requested.size() - t.shape().size();
    Shape shape(requested.size());
    Strides strides(requested.size(), 0);  // new leading dims and expanded dims repeat: stride 0
    for (size_t i = 0; i < requested.size(); ++i) {
        const int64_t have = i < lead ? 1 : t.shape()[i - lead];
        shape[i] = requested[i] == -1 && i >= lead ? have : requested[i];
        if (shape[i] < 0) fail();
        if (i >= lead && have == shape[i]) strides[i] = t.strides()[i - lead];
        else if (have != 1) fail();
    }
    return {std::move(shape), std::move(strides), t.offset()};
}

ViewGeometry squeeze_geometry(const Tensor& t, int64_t dim) {
    const int64_t d = wrap_dim(dim, t.dim(), "squeeze");
    Shape shape = t.shape();
    Strides strides = t.strides();
    if (shape[d] == 1) {  // as torch: squeezing a dim that is not 1 changes nothing
        shape.erase(shape.begin() + d);
        strides.erase(strides.begin() + d);
    }
    return {std::move(shape), std::move(strides), t.offset()};
}

ViewGeometry unsqueeze_geometry(const Tensor& t, int64_t dim) {
    const int64_t d = wrap_dim(dim, t.dim() + 1, "unsqueeze");
    Shape shape = t.shape();
    Strides strides = t.strides();
    shape.insert(shape.begin() + d, 1);
    strides.insert(strides.begin() + d, d < t.dim() ? t.strides()[d] * t.shape()[d] : 1);
    return {std::move(shape), std::move(strides), t.offset()};
}

}  // namespace gg

// views.cpp — the geometry of each view (tensor/views.h): a new shape/strides/offset over
// the same storage. Every check that can fail is here, so a view op throws before it
// builds anything.
#include "tensor/views.h"

#include <stdexcept>
#include <string>

namespace gg {

Shape infer_shape(const Shape& requested, int64_t numel, const char* op, const Shape& from) {
    const auto fail = [&](const std::string& why) {
        throw std::invalid_argument(std::string(op) + ": cannot view shape " + shape_str(from) + " (" +
                                    std::to_string(numel) + " elements) as " + shape_str(requested) + ": " + why);
    };
    Shape shape = requested;
    int64_t known = 1, infer_at = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1) {
            if (infer_at >= 0) fail("only one size can be -1");
            infer_at = static_cast<int64_t>(i);
        } else if (shape[i] < 0) {
            fail("size " + std::to_string(shape[i]) + " is negative");
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            fail("the sizes multiply past int64");
        }
    }
    if (infer_at >= 0) {
        // With a 0 among the others, any size would do: as torch, that is an error.
        if (known == 0 || numel % known != 0) fail("no size for the -1 fits");
        shape[infer_at] = numel / known;
    } else if (known != numel) {
        fail("the element counts differ");
    }
    return shape;
}

namespace {
// The strides under which `shape` sees the same elements as t, in the same order, when some
// do. t's dims fall into runs whose memory is contiguous within the run (stride[d] =
// stride[d+1]·size[d+1]); the new shape may split and merge dims within a run, never across
// one. So the heads (B, T, H, dk) of a slice (B, T, H·dk) of a wider (B, T, N) projection are
// a view: only the last dim is split, and its elements are adjacent. As torch.view.
bool strided_view(const Tensor& t, const Shape& shape, Strides& strides) {
    strides.assign(shape.size(), 0);
    int64_t view_d = int64_t(shape.size()) - 1;
    int64_t base = t.dim() ? t.strides().back() : 1, run = 1, covered = 1;  // the run's innermost stride, sizes
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
        run *= t.shape()[d];
        const bool run_ends = d == 0 || (t.shape()[d - 1] != 1 && t.strides()[d - 1] != run * base);
        if (!run_ends) continue;
        while (view_d >= 0 && (covered < run || shape[view_d] == 1)) {
            strides[view_d] = covered * base;
            covered *= shape[view_d--];
        }
        if (covered != run) return false;
        if (d > 0) base = t.strides()[d - 1], run = 1, covered = 1;
    }
    return view_d < 0;
}
}  // namespace

ViewGeometry view_geometry(const Tensor& t, const Shape& requested) {
    Shape shape = infer_shape(requested, t.numel(), "view", t.shape());
    Strides strides = contiguous_strides(shape);
    if (!t.is_contiguous() && t.numel() > 0 && !strided_view(t, shape, strides))
        throw std::invalid_argument("view: tensor of shape " + shape_str(t.shape()) + " is not contiguous and " +
                                    shape_str(shape) + " merges dims its strides keep apart; use reshape() (which "
                                    "copies)");
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
    int64_t end = 0;
    if (__builtin_add_overflow(start, length, &end))
        throw std::out_of_range("narrow: start " + std::to_string(start) + " + length " + std::to_string(length) +
                                " overflows int64");
    if (start < 0 || length < 0 || end > t.shape()[d])
        throw std::out_of_range("narrow: [" + std::to_string(start) + ", " + std::to_string(end) +
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
    try {
        shape_numel(shape);  // a view nothing could ever count the elements of is no view
    } catch (const std::length_error&) {
        fail();
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

// views.h — the geometry of zero-copy views: which shape, strides and offset over the
// same storage each view op gives. No data moves and no graph is built here; the
// differentiable view ops (Tensor::view, permute, ...) in autograd/views.cpp wrap each
// geometry in Tensor::alias and record how their gradient goes back.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace gg {

struct ViewGeometry {
    Shape shape;
    Strides strides;
    int64_t offset;  // in elements, from the start of the storage
};

// `requested` (one -1 inferred) over t's elements in row-major order: row-major strides when t
// is contiguous; otherwise t may only split or merge dims that lie contiguously in memory.
ViewGeometry view_geometry(const Tensor& t, const Shape& requested);
// Dims reordered: out dim i is t's dim dims[i].
ViewGeometry permute_geometry(const Tensor& t, const std::vector<int64_t>& dims);
// [start, start + length) of dim `dim`.
ViewGeometry narrow_geometry(const Tensor& t, int64_t dim, int64_t start, int64_t length);
// Size-1 dims (and new leading dims) repeated with stride 0; -1 keeps a dim.
ViewGeometry expand_geometry(const Tensor& t, const Shape& requested);
// Dim `dim` dropped (it must have size 1) or a size-1 dim inserted before `dim`.
ViewGeometry squeeze_geometry(const Tensor& t, int64_t dim);
ViewGeometry unsqueeze_geometry(const Tensor& t, int64_t dim);

// Replaces a single -1 by whatever makes the element counts agree; throws naming `op`
// when no shape fits (more than one -1, a negative size, or a count that differs).
Shape infer_shape(const Shape& requested, int64_t numel, const char* op, const Shape& from);

}  // namespace gg

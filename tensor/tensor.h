// tensor.h — an N-d array: shape, strides and offset over shared, reference-counted storage.
//
// Views (view, permute, narrow, expand, ...) make a new Tensor on the *same* Storage, so
// they cost nothing; contiguous() copies only when the strides are not row-major.
// Everything a Tensor needs for autograd (requires_grad, grad, grad_fn) sits in its
// TensorImpl; the graph itself is in autograd/engine.h.
//
// Layering: this folder holds storage, metadata, view geometry and the device backends.
// The methods marked "differentiable" below are ops that record a graph node; they are
// declared here so that `x.view(...)` and `x.sum()` read as in PyTorch, and defined with
// the other ops in autograd/ (views.cpp, tensor_methods.cpp, engine.cpp).
#pragma once
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensor/backend.h"
#include "tensor/dtype.h"

namespace gg {

struct Node;  // autograd/engine.h

// A block of device memory, freed by its device's backend when the last view goes.
struct Storage {
    Storage(size_t nbytes, Device device);
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    void* data;
    size_t nbytes;
    Device device;
    // Counts the in-place writes into this memory (copy_, fill_, data<T>() for a non-const T,
    // optimiser steps, checkpoint loads). Autograd remembers it for each tensor an op saves
    // for backward, and refuses a backward that would read values changed since.
    uint64_t version = 0;
};

class Tensor;

// One entry of Tensor::index: an integer position or a range [start, stop) (either end may
// be left open, and negative counts from the end), as Python's x[i] and x[start:stop].
struct Slice {
    std::optional<int64_t> start, stop;
};
struct Index {
    Index(int64_t i) : position(i) {}  // implicit, so that x.index({0, -1}) reads naturally
    Index(Slice s) : position(0), slice(s), is_slice(true) {}
    int64_t position;
    Slice slice;
    bool is_slice = false;
};

struct TensorImpl {
    std::shared_ptr<Storage> storage;
    Shape shape;
    Strides strides;
    int64_t offset = 0;  // in elements
    DType dtype = DType::f32;
    bool requires_grad = false;
    std::shared_ptr<TensorImpl> grad;  // accumulated by backward() on leaves
    std::shared_ptr<Node> grad_fn;     // the op that made this tensor; null on leaves
};

class Tensor {
public:
    Tensor() = default;
    explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

    // An uninitialised contiguous tensor.
    static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::CPU);

    bool defined() const { return impl_ != nullptr; }
    TensorImpl* impl() const { return impl_.get(); }

    const Shape& shape() const { return impl_->shape; }
    const Strides& strides() const { return impl_->strides; }
    int64_t offset() const { return impl_->offset; }
    int64_t dim() const { return static_cast<int64_t>(impl_->shape.size()); }
    int64_t size(int64_t d) const;
    int64_t numel() const { return shape_numel(impl_->shape); }
    DType dtype() const { return impl_->dtype; }
    Device device() const { return impl_->storage->device; }
    bool is_contiguous() const;
    bool shares_storage(const Tensor& other) const { return impl_->storage == other.impl_->storage; }

    // Raw access (CPU only; the pointer is to element [0,...,0], honouring the offset).
    // data<float>() hands out a pointer to write through, so it counts as an in-place write
    // (bumps version()); read through data<const float>(), which does not.
    template <class T>
    T* data() const;
    uint64_t version() const { return impl_->storage->version; }  // shared by every view of the storage
    void bump_version() const { ++impl_->storage->version; }      // after writing into this tensor's memory
    View view_desc() const;  // how the backend sees this tensor
    // Another shape/strides/offset over the same storage: no copy, no graph node. The
    // differentiable views below are built on it (geometry in tensor/views.h).
    Tensor alias(Shape shape, Strides strides, int64_t offset) const;
    double item() const;     // a one-element tensor's value
    template <class T>
    std::vector<T> to_vector() const;  // row-major copy of the values, converted to T

    // --- views: share storage; differentiable (autograd/views.cpp) ---
    Tensor view(const Shape& shape) const;     // needs compatible strides; -1 infers one dim
    Tensor reshape(const Shape& shape) const;  // view when possible, else a copy
    Tensor permute(const std::vector<int64_t>& dims) const;
    Tensor transpose(int64_t d0, int64_t d1) const;
    Tensor t() const { return transpose(0, 1); }
    Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
    Tensor select(int64_t dim, int64_t index) const;
    Tensor expand(const Shape& shape) const;   // -1 keeps a dim
    Tensor squeeze(int64_t dim) const;
    Tensor unsqueeze(int64_t dim) const;
    Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
    Tensor contiguous() const;                 // this tensor itself when already contiguous

    // Indexing as x[i, j] or x[1:3, -1] in PyTorch: an integer picks one position (that dim
    // goes), a Slice keeps a range. Negative numbers count from the end. A view.
    Tensor index(const std::vector<Index>& indices) const;

    // --- in-place writes (autograd/tensor_methods.cpp): not recorded in the graph, but they
    // bump version(), so a backward that needs the old values throws instead of using the new ---
    // Copies src's values into this tensor's own storage, broadcasting src to this shape
    // and converting its dtype and device. Refused while grad mode is on and either side
    // requires grad (write parameters under a NoGradGuard, as torch.no_grad()).
    const Tensor& copy_(const Tensor& src) const;  // const as in libtorch: the handle stays, the values change
    const Tensor& fill_(double value) const;

    // --- copies and conversions; differentiable (autograd/tensor_methods.cpp) ---
    Tensor clone() const;
    Tensor to(Device device) const;
    Tensor to(DType dtype) const;

    // --- autograd ---
    bool requires_grad() const { return impl_->requires_grad; }
    Tensor& requires_grad_(bool on = true);
    Tensor grad() const { return Tensor(impl_->grad); }
    void set_grad(const Tensor& g) const { impl_->grad = g.impl_; }
    void zero_grad() const { impl_->grad.reset(); }
    std::shared_ptr<Node> grad_fn() const { return impl_->grad_fn; }
    bool is_leaf() const { return impl_->grad_fn == nullptr; }
    // Backpropagates from this tensor: a scalar needs no gradient; otherwise pass one of
    // the same shape. The graph's saved tensors are freed unless retain_graph.
    void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
    Tensor detach() const;  // same storage, no history

    // --- method forms of common ops (autograd/tensor_methods.cpp) ---
    Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
    Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
    Tensor pow(double exponent) const;
    Tensor exp() const;
    Tensor log() const;
    Tensor sqrt() const;
    Tensor sigmoid() const;
    Tensor tanh() const;
    Tensor relu() const;
    Tensor matmul(const Tensor& other) const;

private:
    std::shared_ptr<TensorImpl> impl_;
};

// --- creation ---
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::CPU);
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::CPU);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::CPU);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::CPU);  // shape ()
// [start, end) with the given step, like torch.arange.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::i64, Device device = Device::CPU);
Tensor arange(int64_t end, DType dtype = DType::i64, Device device = Device::CPU);
// From host values in row-major order; the count must match the shape.
Tensor from_vector(const std::vector<float>& values, const Shape& shape, Device device = Device::CPU);
Tensor from_vector(const std::vector<double>& values, const Shape& shape, Device device = Device::CPU);
Tensor from_vector(const std::vector<int64_t>& values, const Shape& shape, Device device = Device::CPU);
Tensor from_vector(const std::vector<bfloat16>& values, const Shape& shape, Device device = Device::CPU);

// Prints like PyTorch: values (elided past a few rows) then shape and dtype.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Throws when `t` is undefined, naming the op.
void check_defined(const Tensor& t, const char* op);

// "(2,3) float32", with " cuda" after it for a tensor on the GPU: how errors name a tensor.
std::string describe(const Tensor& t);

}  // namespace gg

// tensor.cpp — storage, metadata, creation, device/dtype moves and printing.
#include "tensor/tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <type_traits>


namespace gg {

Storage::Storage(size_t nbytes_, Device device_)
    : data(backend(device_).allocate(nbytes_)), nbytes(nbytes_), device(device_) {}

Storage::~Storage() { backend(device).deallocate(data, nbytes); }

void check_defined(const Tensor& t, const char* op) {
    if (!t.defined()) throw std::invalid_argument(std::string(op) + ": undefined tensor");
}

std::string describe(const Tensor& t) {
    return shape_str(t.shape()) + " " + dtype_name(t.dtype()) + (t.device() == Device::CPU ? "" : " cuda");
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
    for (int64_t d : shape)
        if (d < 0) throw std::invalid_argument("empty: negative dim in shape " + shape_str(shape));
    // numel · element size must not wrap; no allocator can serve more than PTRDIFF_MAX bytes.
    size_t nbytes = 0;
    if (__builtin_mul_overflow(static_cast<size_t>(shape_numel(shape)), dtype_size(dtype), &nbytes) ||
        nbytes > static_cast<size_t>(PTRDIFF_MAX))
        throw std::length_error("empty: a tensor of shape " + shape_str(shape) + " " + dtype_name(dtype) +
                                " would need more than 2^63 bytes");
    auto impl = std::make_shared<TensorImpl>();
    try {
        impl->storage = std::make_shared<Storage>(nbytes, device);
    } catch (const std::bad_alloc&) {
        throw std::runtime_error("empty: out of memory allocating " + std::to_string(nbytes) + " bytes for a tensor of shape " +
                                 shape_str(shape) + " " + dtype_name(dtype));
    }
    impl->shape = shape;
    impl->strides = contiguous_strides(shape);
    impl->dtype = dtype;
    return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t d) const { return impl_->shape[wrap_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
    int64_t expected = 1;
    for (size_t i = impl_->shape.size(); i-- > 0;) {
        if (impl_->shape[i] == 1) continue;  // a size-1 dim's stride never matters
        if (impl_->strides[i] != expected) return false;
        expected *= impl_->shape[i];
    }
    return true;
}

template <class T>
T* Tensor::data() const {
    using E = std::remove_const_t<T>;
    const DType wanted = std::is_same_v<E, float>      ? DType::f32
                         : std::is_same_v<E, double>   ? DType::f64
                         : std::is_same_v<E, bfloat16> ? DType::bf16
                                                       : DType::i64;
    if (dtype() != wanted)
        throw std::logic_error(std::string("data: the tensor is ") + dtype_name(dtype()) + ", not " + dtype_name(wanted));
    if (device() != Device::CPU)
        throw std::logic_error("data: the tensor is on " + std::string(device_name(device())) +
                               "; move it to the cpu first");
    if constexpr (!std::is_const_v<T>) bump_version();  // the caller may write through it
    return static_cast<T*>(impl_->storage->data) + impl_->offset;
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template int64_t* Tensor::data<int64_t>() const;
template const float* Tensor::data<const float>() const;
template const double* Tensor::data<const double>() const;
template const int64_t* Tensor::data<const int64_t>() const;
template bfloat16* Tensor::data<bfloat16>() const;
template const bfloat16* Tensor::data<const bfloat16>() const;

Tensor Tensor::alias(Shape shape, Strides strides, int64_t offset) const {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = impl_->storage;
    impl->shape = std::move(shape);
    impl->strides = std::move(strides);
    impl->offset = offset;
    impl->dtype = dtype();
    return Tensor(std::move(impl));
}

View Tensor::view_desc() const {
    char* base = static_cast<char*>(impl_->storage->data) + impl_->offset * dtype_size(dtype());
    return make_view(base, dtype(), impl_->shape, impl_->strides);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
    // A row-major copy on the tensor's own device, then its bytes to the host.
    Tensor dense = empty(shape(), dtype(), device());
    backend(device()).copy(dense.view_desc(), view_desc());
    std::vector<T> out(numel());
    dispatch_with_bf16(dtype(), [&]<class S>() {
        std::vector<S> host(numel());
        if (!host.empty()) backend(device()).to_host(host.data(), dense.view_desc().data, host.size() * sizeof(S));
        for (size_t i = 0; i < host.size(); ++i) out[i] = static_cast<T>(host[i]);
    });
    return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bfloat16> Tensor::to_vector<bfloat16>() const;

double Tensor::item() const {
    if (numel() != 1)
        throw std::invalid_argument("item: tensor of shape " + shape_str(shape()) + " has " +
                                    std::to_string(numel()) + " elements, not 1");
    return to_vector<double>()[0];
}

Tensor& Tensor::requires_grad_(bool on) {
    if (on && !is_floating(dtype()))
        throw std::invalid_argument(std::string("requires_grad_: only floating tensors can require grad, not ") +
                                    dtype_name(dtype()));
    impl_->requires_grad = on;
    return *this;
}

Tensor Tensor::detach() const {
    auto impl = std::make_shared<TensorImpl>(*impl_);
    impl->requires_grad = false;
    impl->grad.reset();
    impl->grad_fn.reset();
    return Tensor(std::move(impl));
}

// --- creation ---

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
    Tensor out = Tensor::empty(shape, dtype, device);
    backend(device).fill(out.view_desc(), value);
    return out;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1, dtype, device); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
    const double count = std::ceil((end - start) / step);
    // !(count < 2^63) also refuses a NaN, which no cast to int64 may see.
    if (step == 0 || count < 0 || !(count < 0x1p63))
        throw std::invalid_argument("arange: cannot go from " + std::to_string(start) + " to " +
                                    std::to_string(end) + " in steps of " + std::to_string(step));
    const auto n = static_cast<int64_t>(count);
    Tensor out = Tensor::empty({n}, dtype, device);
    backend(device).arange(out.view_desc(), start, step);
    return out;
}
Tensor arange(int64_t end, DType dtype, Device device) { return arange(0, static_cast<double>(end), 1, dtype, device); }

namespace {
template <class T>
Tensor from_host_values(const std::vector<T>& values, const Shape& shape, DType dtype, Device device) {
    if (static_cast<int64_t>(values.size()) != shape_numel(shape))
        throw std::invalid_argument("from_vector: " + std::to_string(values.size()) +
                                    " values cannot fill shape " + shape_str(shape));
    Tensor out = Tensor::empty(shape, dtype, device);
    if (!values.empty()) backend(device).from_host(out.view_desc().data, values.data(), values.size() * sizeof(T));
    return out;
}
}  // namespace

Tensor from_vector(const std::vector<float>& v, const Shape& s, Device d) { return from_host_values(v, s, DType::f32, d); }
Tensor from_vector(const std::vector<double>& v, const Shape& s, Device d) { return from_host_values(v, s, DType::f64, d); }
Tensor from_vector(const std::vector<int64_t>& v, const Shape& s, Device d) { return from_host_values(v, s, DType::i64, d); }
Tensor from_vector(const std::vector<bfloat16>& v, const Shape& s, Device d) { return from_host_values(v, s, DType::bf16, d); }

// --- printing, in PyTorch's layout: nested brackets, at most 3 leading and 3 trailing
// entries per dim when a tensor has more than 1000 elements ---

namespace {
void print_dim(std::ostream& os, const std::vector<double>& v, const Shape& shape, const Strides& strides,
               size_t d, int64_t base, bool elide, bool integer, bool scientific, int indent) {
    const int64_t n = shape[d];
    os << '[';
    for (int64_t i = 0; i < n; ++i) {
        if (elide && n > 6 && i == 3) {
            os << (d + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
            i = n - 3;
        }
        if (d + 1 == shape.size()) {
            const double x = v[base + i * strides[d]];
            if (integer) os << static_cast<int64_t>(x);
            else {
                char buf[32];
                std::snprintf(buf, sizeof buf, scientific ? "%11.4e" : "%9.4f", x);
                os << buf;
            }
        } else {
            print_dim(os, v, shape, strides, d + 1, base + i * strides[d], elide, integer, scientific, indent + 1);
        }
        if (i + 1 < n) os << (d + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
    }
    os << ']';
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    if (!t.defined()) return os << "tensor(undefined)";
    const auto values = t.to_vector<double>();
    const bool integer = t.dtype() == DType::i64;
    os << "tensor(";
    // Scientific notation when fixed point with 4 decimals would hide the values.
    double largest = 0, smallest = INFINITY;
    for (double x : values)
        if (x != 0 && std::isfinite(x)) largest = std::max(largest, std::abs(x)), smallest = std::min(smallest, std::abs(x));
    const bool scientific = !integer && largest > 0 && (smallest < 1e-4 || largest >= 1e8);
    if (t.dim() == 0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, integer ? "%.0f" : scientific ? "%.4e" : "%.4f", values[0]);
        os << buf;
    } else {
        print_dim(os, values, t.shape(), contiguous_strides(t.shape()), 0, 0, t.numel() > 1000, integer, scientific, 7);
    }
    os << ", shape=" << shape_str(t.shape()) << ", dtype=" << dtype_name(t.dtype());
    if (t.device() != Device::CPU) os << ", device=" << device_name(t.device());
    if (t.requires_grad()) os << ", requires_grad=true";
    return os << ")";
}

}  // namespace gg

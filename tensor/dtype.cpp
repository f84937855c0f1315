#include "tensor/dtype.h"

#include <stdexcept>

namespace gg {

size_t dtype_size(DType dtype) {
    switch (dtype) {
        case DType::f32: return 4;
        case DType::f64: return 8;
        case DType::i64: return 8;
        case DType::bf16: return 2;
    }
    throw std::logic_error("dtype_size: unknown dtype");
}

const char* dtype_name(DType dtype) {
    switch (dtype) {
        case DType::f32: return "float32";
        case DType::f64: return "float64";
        case DType::i64: return "int64";
        case DType::bf16: return "bfloat16";
    }
    return "?";
}

const char* device_name(Device device) { return device == Device::CPU ? "cpu" : "cuda"; }

bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16; }

std::string shape_str(const Shape& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(shape[i]);
    }
    return s + ")";
}

int64_t shape_numel(const Shape& shape) {
    // The product of the non-zero sizes must fit, even when a zero makes numel 0: the
    // contiguous strides are those partial products. Unchecked, (2^62, 4) wraps to 0 and
    // allocates nothing that kernels then write 2^64 elements into.
    int64_t n = 1;
    bool empty = false;
    for (int64_t d : shape) {
        if (d < 0) throw std::invalid_argument("shape " + shape_str(shape) + " has a negative size");
        if (d == 0) empty = true;
        else if (__builtin_mul_overflow(n, d, &n))
            throw std::length_error("shape " + shape_str(shape) + " has more elements than int64 can count");
    }
    return empty ? 0 : n;
}

Strides contiguous_strides(const Shape& shape) {
    Strides strides(shape.size());
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        stride *= shape[i];  // never overflows once shape_numel(shape) has not
    }
    return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
    int64_t wrapped = dim < 0 ? dim + ndim : dim;
    if (wrapped < 0 || wrapped >= ndim)
        throw std::out_of_range(std::string(op) + ": dim " + std::to_string(dim) +
                                " out of range for a tensor of " + std::to_string(ndim) + " dims");
    return wrapped;
}

}  // namespace gg

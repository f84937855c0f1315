// dtype.h — element types, devices and shapes: the vocabulary every other file uses.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/bf16.h"

namespace gg {

// bf16 is bfloat16 (tensor/bf16.h): 16-bit storage for mixed-precision training, computed
// in float32.
enum class DType { f32, f64, i64, bf16 };
enum class Device { CPU, CUDA };

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;  // in elements, not bytes

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);    // "float32", "float64", "int64", "bfloat16"
const char* device_name(Device device); // "cpu", "cuda"
bool is_floating(DType dtype);  // f32, f64 and bf16

std::string shape_str(const Shape& shape);  // "(2,3)"; "()" for a scalar
// The element count; throws on a negative size, and when the product of the sizes
// (leaving out zeros) does not fit in int64, so that no count or stride ever wraps.
int64_t shape_numel(const Shape& shape);
Strides contiguous_strides(const Shape& shape);

// Maps a possibly negative dim (-1 = last) onto [0, ndim); throws naming the op.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// Calls f.template operator()<T>() with T the C++ type of `dtype`, for the code that is
// written for f32, f64 and i64 only; a bfloat16 tensor gets an error naming the dtype. Code
// that handles 16-bit storage too uses dispatch_with_bf16 (tensor/bf16.h's gg::bfloat16).
template <class F>
void dispatch(DType dtype, F&& f) {
    switch (dtype) {
        case DType::f32: f.template operator()<float>(); break;
        case DType::f64: f.template operator()<double>(); break;
        case DType::i64: f.template operator()<int64_t>(); break;
        case DType::bf16: throw std::invalid_argument("this operation does not take bfloat16 tensors");
    }
}

// dispatch() for code that also takes bfloat16: T is then gg::bfloat16, which reads as a float
// and rounds once when a float is stored into it, so `o[i] = T(f(x[i]))` computes in float32.
template <class F>
void dispatch_with_bf16(DType dtype, F&& f) {
    if (dtype == DType::bf16) f.template operator()<bfloat16>();
    else dispatch(dtype, std::forward<F>(f));
}

// The type arithmetic on a T happens in: float for bfloat16, T itself otherwise.
template <class T>
using compute_type = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

}  // namespace gg

// dispatch_floating.h — the dtype switches of the kernel families, and the type a kernel
// computes in.
//
//   dispatch_floating       f32, f64: families whose ops reject int64 before a kernel is
//                           reached and that do not take bfloat16 (the optimisers: parameters
//                           stay f32 master weights); a bf16 tensor gets an error
//   dispatch_floating_bf16  f32, f64, bf16: the floating families that take 16-bit storage
//   dispatch_any            f32, f64, i64, bf16: the element-wise family
//
// bf16 is storage only (tensor/bf16.h): a kernel loads a bfloat16 as float, computes in float
// (compute_t<bfloat16>), and rounds once when it stores; statistics (sums, maxima, the softmax
// normaliser) are never kept in bf16.
#pragma once
#include <stdexcept>

#include "tensor/bf16.h"
#include "tensor/dtype.h"

namespace gg::cuda {

// The type a kernel computes in for elements stored as T: float for bfloat16, T otherwise.
template <class T>
struct compute_type {
    using type = T;
};
template <>
struct compute_type<bfloat16> {
    using type = float;
};
template <class T>
using compute_t = typename compute_type<T>::type;

// Calls f.template operator()<T>() with T = float for f32, double for f64; throws for bf16.
template <class F>
void dispatch_floating(DType dtype, F&& f) {
    if (dtype == DType::bf16) throw std::invalid_argument("this operation does not take bfloat16 tensors");
    if (dtype == DType::f32) f.template operator()<float>();
    else f.template operator()<double>();
}

// Calls f.template operator()<T>() with T = float, double or bfloat16.
template <class F>
void dispatch_floating_bf16(DType dtype, F&& f) {
    if (dtype == DType::bf16) f.template operator()<bfloat16>();
    else dispatch_floating(dtype, f);
}

// Calls f.template operator()<T>() with the C++ type of any dtype, bfloat16 included.
template <class F>
void dispatch_any(DType dtype, F&& f) {
    if (dtype == DType::bf16) f.template operator()<bfloat16>();
    else dispatch(dtype, f);
}

}  // namespace gg::cuda

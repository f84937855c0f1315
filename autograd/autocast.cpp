#include "autograd/autocast.h"

#include <stdexcept>
#include <string>

namespace gg {

namespace {
thread_local std::optional<DType> active;
}

Autocast::Autocast(DType dtype) : previous_(active) {
    if (dtype != DType::bf16 && dtype != DType::f32)
        throw std::invalid_argument(std::string("Autocast: runs in bfloat16 (or float32, off), not ") + dtype_name(dtype));
    active = dtype == DType::bf16 ? std::optional<DType>(dtype) : std::nullopt;
}

Autocast::~Autocast() { active = previous_; }

std::optional<DType> autocast_dtype() { return active; }

Tensor autocast_lower(const Tensor& x) { return active && x.defined() && x.dtype() == DType::f32 ? x.to(*active) : x; }

Tensor autocast_float32(const Tensor& x) { return active && x.defined() && x.dtype() == DType::bf16 ? x.to(DType::f32) : x; }

bool autocast_mixes(const Tensor& a, const Tensor& b) {
    const auto half_and_single = [](DType x, DType y) { return x == DType::bf16 && y == DType::f32; };
    return active && a.defined() && b.defined() &&
           (half_and_single(a.dtype(), b.dtype()) || half_and_single(b.dtype(), a.dtype()));
}

}  // namespace gg

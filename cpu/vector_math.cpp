// vector_math.cpp — the scalar kernels of cpu/vector_math.h, and the choice of a path:
// the widest one this build holds and this CPU runs, unless GATEDGRAD_VECTOR_PATH names
// another.
#include "cpu/vector_math.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gatedgrad_config.h"

namespace gg {

#if GG_HAVE_SLEEF
extern const VectorKernels kVectorKernels_avx2, kVectorKernels_avx512;  // cpu/vector_math_simd.cpp
#endif

namespace {

float scalar_exp_shifted(float* y, const float* x, float shift, int64_t n) {
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (y[j] = std::exp(x[j] - shift));
    return sum;
}

void scalar_sigmoid(float* y, const float* x, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = 1 / (1 + std::exp(-x[j]));
}

float scalar_max_value(const float* x, int64_t n) { return *std::max_element(x, x + n); }

constexpr VectorKernels kScalarKernels = {scalar_exp_shifted, scalar_sigmoid, scalar_max_value};

const VectorKernels& kernels_of(VectorPath path) {
    switch (path) {
#if GG_HAVE_SLEEF
        case VectorPath::avx2: return kVectorKernels_avx2;
        case VectorPath::avx512: return kVectorKernels_avx512;
#endif
        default: return kScalarKernels;
    }
}

// The widest supported path, or the one GATEDGRAD_VECTOR_PATH names.
VectorPath initial_path() {
    if (const char* name = std::getenv("GATEDGRAD_VECTOR_PATH")) {
        for (VectorPath path : {VectorPath::scalar, VectorPath::avx2, VectorPath::avx512})
            if (name == std::string(vector_path_name(path))) {
                if (!vector_path_supported(path))
                    throw std::invalid_argument(std::string("GATEDGRAD_VECTOR_PATH=") + name +
                                                ": this build or this CPU does not support it");
                return path;
            }
        throw std::invalid_argument(std::string("GATEDGRAD_VECTOR_PATH=") + name +
                                    ": expected scalar, avx2 or avx512");
    }
    for (VectorPath path : {VectorPath::avx512, VectorPath::avx2})
        if (vector_path_supported(path)) return path;
    return VectorPath::scalar;
}

struct Current {
    VectorPath path;
    const VectorKernels* kernels;
};
Current& current() {
    static Current state = [] {
        const VectorPath path = initial_path();
        return Current{path, &kernels_of(path)};
    }();
    return state;
}

}  // namespace

const char* vector_path_name(VectorPath path) {
    switch (path) {
        case VectorPath::avx2: return "avx2";
        case VectorPath::avx512: return "avx512";
        default: return "scalar";
    }
}

bool vector_path_supported(VectorPath path) {
    switch (path) {
        case VectorPath::scalar: return true;
#if GG_HAVE_SLEEF
        // libgcc's checks include the operating system's support for the wider registers.
        case VectorPath::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        case VectorPath::avx512: return __builtin_cpu_supports("avx512f");
#endif
        default: return false;
    }
}

VectorPath vector_path() { return current().path; }

void set_vector_path(VectorPath path) {
    if (!vector_path_supported(path))
        throw std::invalid_argument(std::string("set_vector_path(") + vector_path_name(path) +
                                    "): this build or this CPU does not support it");
    current() = {path, &kernels_of(path)};
}

namespace vec {

float exp_shifted(float* y, const float* x, float shift, int64_t n) {
    return current().kernels->exp_shifted(y, x, shift, n);
}

void sigmoid(float* y, const float* x, int64_t n) { current().kernels->sigmoid(y, x, n); }

float max_value(const float* x, int64_t n) { return current().kernels->max_value(x, n); }

}  // namespace vec

}  // namespace gg

// vector_math.h — exponentials, sigmoids and row maxima over arrays of floats at the CPU's
// vector width.
//
// A training step takes e^x once per attention score and σ(x) once per gate and SwiGLU
// channel; scalar expf was 6–7% of a 1-thread step. These loops hand the work to SLEEF's
// vector functions (Shibata & Petrogalli, arXiv:2001.09258): 8 floats at a time with AVX2,
// 16 with AVX-512. The library is built without -march, so each vector path is compiled
// apart (cpu/vector_math_simd.cpp, once with -mavx2 -mfma, once with -mavx512f) and the
// widest one this CPU runs is picked on first use. Where SLEEF is absent at build
// time only the scalar path (std::exp) exists.
//
// Accuracy: SLEEF's *_u10 functions are within 1.0 ULP of the exact e^x; against glibc's expf
// (itself within 1 ULP) the vector paths agree to 2 ULP wherever the result is a normal float,
// and give exactly 0, +∞ and NaN where expf does (tests/test_vector_math.cpp sweeps this,
// from −∞ through the underflow to 0, to +∞ and NaN; subnormal results within 2 of the
// smallest subnormal). σ(x) = 1 / (1 + e^{−x}) is then within a relative 4e-7 of its double
// value wherever that is a normal float; below x ≈ −87.3 it is within 1.2e-38 (the smallest
// normal float) and 0 below −88.7, where e^{−x} overflows, as in the scalar formula. Sums are
// taken lane by lane, so they differ from the scalar loop's by rounding only.
//
// GATEDGRAD_VECTOR_PATH=scalar|avx2|avx512 picks the path instead (for timing one against
// another); set_vector_path does it in a program (the tests run each path the CPU supports).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gg {

enum class VectorPath { scalar, avx2, avx512 };

const char* vector_path_name(VectorPath path);
// Whether this build holds the path and this CPU runs it (scalar: always).
bool vector_path_supported(VectorPath path);
VectorPath vector_path();
// Throws std::invalid_argument for a path that is not supported here.
void set_vector_path(VectorPath path);

namespace vec {

// y = e^{x − shift}, element by element (y may be x); returns Σ y. The shift is finite.
float exp_shifted(float* y, const float* x, float shift, int64_t n);
// y = σ(x) = 1 / (1 + e^{−x}) (y may be x).
void sigmoid(float* y, const float* x, int64_t n);
// The largest of x[0 : n], n ≥ 1: a softmax row's shift. Where x holds NaN the result may
// be NaN or the largest of the rest; the softmax of such a row is NaN either way.
float max_value(const float* x, int64_t n);

// Other element types stay scalar: float64 serves gradient checks, where speed does not matter.
template <class T>
T exp_shifted(T* y, const T* x, T shift, int64_t n) {
    T sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (y[j] = T(std::exp(x[j] - shift)));
    return sum;
}
template <class T>
void sigmoid(T* y, const T* x, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = T(1 / (1 + std::exp(-x[j])));
}
template <class T>
T max_value(const T* x, int64_t n) {
    return *std::max_element(x, x + n);
}

}  // namespace vec

// One path's kernels; cpu/vector_math.cpp holds the scalar ones and picks among them.
struct VectorKernels {
    float (*exp_shifted)(float* y, const float* x, float shift, int64_t n);
    void (*sigmoid)(float* y, const float* x, int64_t n);
    float (*max_value)(const float* x, int64_t n);
};

}  // namespace gg

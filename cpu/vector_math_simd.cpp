// vector_math_simd.cpp — the vector kernels of cpu/vector_math.h for one instruction set.
// meson compiles this file twice: with -mavx2 -mfma (GG_VECTOR_PATH=avx2) and with -mavx512f
// (GG_VECTOR_PATH=avx512). Only cpu/vector_math.cpp calls into it, and only after the CPU
// has said it runs that instruction set.
#include <immintrin.h>
#include <sleef.h>

#include <algorithm>
#include <limits>

#include "cpu/vector_math.h"

namespace gg {

namespace {

// One register of floats and the few operations the kernels need on it.
#if defined(__AVX512F__)
using Floats = __m512;
constexpr int kLanes = 16;
Floats load(const float* p) { return _mm512_loadu_ps(p); }
void store(float* p, Floats v) { _mm512_storeu_ps(p, v); }
Floats broadcast(float x) { return _mm512_set1_ps(x); }
Floats add(Floats a, Floats b) { return _mm512_add_ps(a, b); }
Floats sub(Floats a, Floats b) { return _mm512_sub_ps(a, b); }
Floats div(Floats a, Floats b) { return _mm512_div_ps(a, b); }
Floats max(Floats a, Floats b) { return _mm512_max_ps(a, b); }
Floats exp(Floats v) { return Sleef_expf16_u10avx512f(v); }
#elif defined(__AVX2__)
using Floats = __m256;
constexpr int kLanes = 8;
Floats load(const float* p) { return _mm256_loadu_ps(p); }
void store(float* p, Floats v) { _mm256_storeu_ps(p, v); }
Floats broadcast(float x) { return _mm256_set1_ps(x); }
Floats add(Floats a, Floats b) { return _mm256_add_ps(a, b); }
Floats sub(Floats a, Floats b) { return _mm256_sub_ps(a, b); }
Floats div(Floats a, Floats b) { return _mm256_div_ps(a, b); }
Floats max(Floats a, Floats b) { return _mm256_max_ps(a, b); }
Floats exp(Floats v) { return Sleef_expf8_u10avx2(v); }
#else
#error "vector_math_simd.cpp is compiled with -mavx2 -mfma or with -mavx512f"
#endif

// Calls f(register) → register over x into y, a full register at a time; the last partial
// one goes through a padded copy whose spare lanes hold `pad`.
template <class F>
void map(float* y, const float* x, int64_t n, float pad, F&& f) {
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes) store(y + j, f(load(x + j)));
    if (j >= n) return;
    float tail[kLanes];
    std::fill(tail, tail + kLanes, pad);
    std::copy(x + j, x + n, tail);
    store(tail, f(load(tail)));
    std::copy(tail, tail + (n - j), y + j);
}

float exp_shifted(float* y, const float* x, float shift, int64_t n) {
    const Floats s = broadcast(shift);
    Floats sum = broadcast(0);
    // A spare lane holds −∞: e^{−∞} = 0 adds nothing to the sum.
    map(y, x, n, -std::numeric_limits<float>::infinity(), [&](Floats v) {
        const Floats e = exp(sub(v, s));
        sum = add(sum, e);
        return e;
    });
    float lanes[kLanes];
    store(lanes, sum);
    float total = 0;
    for (float lane : lanes) total += lane;
    return total;
}

void sigmoid(float* y, const float* x, int64_t n) {
    const Floats one = broadcast(1), zero = broadcast(0);
    map(y, x, n, 0.0f, [&](Floats v) { return div(one, add(one, exp(sub(zero, v)))); });
}

float max_value(const float* x, int64_t n) {
    Floats m = broadcast(-std::numeric_limits<float>::infinity());
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes) m = max(m, load(x + j));
    float lanes[kLanes];
    store(lanes, m);
    float result = *std::max_element(lanes, lanes + kLanes);
    for (; j < n; ++j) result = std::max(result, x[j]);
    return result;
}

}  // namespace

#define GG_KERNELS_NAME(path) kVectorKernels_##path
#define GG_KERNELS(path) GG_KERNELS_NAME(path)
extern const VectorKernels GG_KERNELS(GG_VECTOR_PATH) = {exp_shifted, sigmoid, max_value};

}  // namespace gg

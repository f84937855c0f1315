// cpu/float32.h — how a fused CPU kernel takes bfloat16 operands: on float32 copies of them.
//
// The bfloat16 form of softmax, cross-entropy, RMSNorm, SwiGLU, RoPE and attention widens
// its bfloat16 inputs to float32 (exact: a bfloat16 is the top half of a float32), runs the
// float32 kernel, and rounds each bfloat16 output once. Every statistic inside (a row's max
// and sum of exponentials, a mean square, attention's running max and log-sum-exp) is then
// the float32 one, as in a GPU kernel that loads bfloat16 and accumulates in float32, and
// the bfloat16 entry equals the float32 entry on bfloat16-rounded inputs, rounded. (Attention's
// probabilities, a layer's largest output, skip the float32 copy: its kernel rounds each row
// into the bfloat16 tensor as the row is finished, cpu/attention.cpp.)
#pragma once
#include <algorithm>
#include <array>
#include <initializer_list>
#include <memory>
#include <vector>

#include "tensor/backend.h"

namespace gg {

void cpu_copy(const View& out, const View& in);  // cpu/backend.cpp: any strides, converts dtype

// Scratch memory from the CPU's caching allocator (tensor/caching_allocator.h), returned to it
// when dropped. An op's float32 copies have the same sizes every call, so they land in warm
// pages: fresh ones (a std::vector each call) faulted in and were zeroed on one thread, which
// was most of what a bfloat16 forward spent outside its GEMMs once those ran on the CPU's
// bfloat16 instructions (docs/performance.md).
template <class T>
struct CachedScratch {
    struct Release {
        size_t bytes;
        void operator()(T* p) const { backend(Device::CPU).deallocate(p, bytes); }
    };
    using Block = std::unique_ptr<T[], Release>;
    static Block make(int64_t n) {
        const size_t bytes = std::max<size_t>(size_t(n) * sizeof(T), sizeof(T));
        return Block(static_cast<T*>(backend(Device::CPU).allocate(bytes)), Release{bytes});
    }
};

// What a kernel does with its outputs: adds into some of them (they must start at 0), or
// writes every element of each (the zeros would be a wasted pass over memory).
enum class Outputs { added_into, overwritten };

// Calls kernel(inputs', outputs') where each bfloat16 view is replaced by a dense float32
// one: filled from it for an input, rounded back into it afterwards for an output. Views
// of other dtypes pass through as they are, and so do views with no data (an output not
// asked for), seen as float32.
template <size_t I, size_t O, class Kernel>
void via_float32(const std::array<View, I>& inputs, const std::array<View, O>& outputs, Kernel&& kernel,
                 Outputs written = Outputs::added_into) {
    std::vector<CachedScratch<float>::Block> buffers;
    buffers.reserve(I + O);
    const auto widen = [&](const View& v, bool read) {
        if (v.dtype != DType::bf16) return v;
        View f = v;
        f.dtype = DType::f32;
        if (v.data == nullptr) return f;
        f.data = buffers.emplace_back(CachedScratch<float>::make(v.numel())).get();
        for (int64_t d = v.ndim, stride = 1; d-- > 0; stride *= v.shape[d]) f.strides[d] = stride;
        if (read) cpu_copy(f, v);
        else if (written == Outputs::added_into) std::fill_n(static_cast<float*>(f.data), v.numel(), 0.0f);
        return f;
    };
    std::array<View, I> in;
    std::array<View, O> out;
    for (size_t i = 0; i < I; ++i) in[i] = widen(inputs[i], true);
    for (size_t o = 0; o < O; ++o) out[o] = widen(outputs[o], false);
    kernel(in, out);
    for (size_t o = 0; o < O; ++o)
        if (out[o].data != outputs[o].data) cpu_copy(outputs[o], out[o]);
}

// Whether any of the views holds bfloat16 data: the entries above then take via_float32.
inline bool any_bf16(std::initializer_list<View> views) {
    for (const View& v : views)
        if (v.dtype == DType::bf16 && v.data != nullptr) return true;
    return false;
}

}  // namespace gg

// packs.h — how the memory-bound kernels (element-wise, softmax, cross-entropy, RMSNorm,
// AdamW, sum of squares) read and write contiguous memory W elements at a time.
//
// A pack is W neighbouring elements that one 16-byte access moves: float4 for f32, double2 for
// f64 and int64 (W = 16 / sizeof(T)). A GPU serves a warp's 32 accesses of 16 bytes as
// 512 contiguous bytes, four times what 32 float accesses move, so there are a quarter of the
// load and store instructions and each thread has four times the bytes in flight, which is
// what keeps the memory bus busy. The hardware only does this for an address that is a
// multiple of the access size (anything else faults with "misaligned address"), so a pack
// starts on a multiple of its size; a view that starts at an odd element (x[1:]) cannot use
// packs, and its kernel runs with W = 1, one element per access.
//
// The same source serves both widths: kernels take W as a template parameter, and the host
// picks W with by_pack_width() once it has checked the pointers. The emulator checks every
// pack's alignment as the GPU does, so a missing check fails a test instead of passing on
// the CPU, which does not care.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cuda/launch.h"

namespace gg::cuda {

// Elements per pack when the widest of the operands' types fills 16 bytes.
template <class... T>
constexpr int kPackWidth = int(16 / std::max({sizeof(T)...}));

// W neighbouring elements, aligned to their size: under nvcc one vector load or store.
template <class T, int W>
struct alignas(W * sizeof(T)) Pack {
    T at[W];
};

template <int W, class T>
__device__ Pack<T, W> load_pack(const T* p) {
    GG_CHECK_ALIGNED(p, sizeof(Pack<T, W>));
    return *reinterpret_cast<const Pack<T, W>*>(p);
}

template <int W, class T>
__device__ void store_pack(T* p, const Pack<T, W>& pack) {
    GG_CHECK_ALIGNED(p, sizeof(Pack<T, W>));
    *reinterpret_cast<Pack<T, W>*>(p) = pack;
}

// store_pack into global memory, a 16-byte pack as one uint4 through __stwb (st.global.wb.v4,
// the default store policy). Assigning the struct lets nvcc split the store into W scalar ones
// when the pack's values were kept in registers across a loop (RMSNorm's dx: 32 st.global.f32
// where 8 st.global.v4 do); __stwb cannot be split. Only for global memory: on a shared
// address st.global is wrong.
template <int W, class T>
__device__ void store_pack_global(T* p, const Pack<T, W>& pack) {
#ifdef __CUDACC__
    if constexpr (sizeof(Pack<T, W>) == 16) {
        unsigned words[4];
        memcpy(words, &pack, 16);
        __stwb(reinterpret_cast<uint4*>(p), make_uint4(words[0], words[1], words[2], words[3]));
        return;
    }
#endif
    store_pack<W>(p, pack);
}

// f(i + j, in[i + j]...) for j < W, after one pack load from each input.
template <int W, class F, class... T>
__device__ void visit_pack(int64_t i, F&& f, const T*... in) {
    const auto visit = [&](const Pack<T, W>&... x) {
        GG_UNROLL
        for (int j = 0; j < W; ++j) f(i + j, x.at[j]...);
    };
    visit(load_pack<W>(in + i)...);
}

// out[i + j] = f(i + j, in[i + j]...) for j < W: one pack load from each input, one pack store.
template <int W, class F, class O, class... T>
__device__ void map_pack(int64_t i, F&& f, O* out, const T*... in) {
    const auto map = [&](const Pack<T, W>&... x) {
        Pack<O, W> y;
        GG_UNROLL
        for (int j = 0; j < W; ++j) y.at[j] = f(i + j, x.at[j]...);
        store_pack<W>(out + i, y);
    };
    map(load_pack<W>(in + i)...);
}

// The grid-stride loop over n contiguous elements in packs: body.template operator()<W>(i)
// for the packs at i = W·t, W·(t + G), ... (thread t of the grid's G), then
// body.template operator()<1>(i) for one of the last n mod W elements, to the grid's first
// threads. A grid of ⌈n / W / blockDim.x⌉ blocks or fewer covers everything.
template <int W, class Body>
__device__ void for_each_pack(int64_t n, Body&& body) {
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = int64_t(gridDim.x) * blockDim.x;
    const int64_t packed = n - n % W;
    for (int64_t i = W * t; i < packed; i += W * threads) body.template operator()<W>(i);
    if (t < n - packed) body.template operator()<1>(packed + t);
}

// Whether every pointer is 16-byte aligned: enough for a pack of any width (cudaMalloc and the
// emulator's allocations are 256-byte aligned; views into them may not be).
template <class... P>
bool aligned16(const P*... p) {
    return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

// Runs body.template operator()<W>() with W = kPackWidth<T...> when `packed`, else with W = 1:
// the host's one choice between the two builds of a kernel.
template <class... T, class Body>
void by_pack_width(bool packed, Body&& body) {
    if (packed)
        body.template operator()<kPackWidth<T...>>();
    else
        body.template operator()<1>();
}

}  // namespace gg::cuda

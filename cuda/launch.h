// launch.h — what every kernel source and its host code include. Under nvcc it is the CUDA
// runtime; under g++ it is the CPU emulator (cuda/emulator/emulator.h), so that the same .cu
// files build and run their tests on a machine without a GPU.
//
// Kernels launch only through gg::cuda::launch and declare shared memory only through
// GG_SHARED / GG_DYNAMIC_SHARED. A plain `__shared__ float tile[16][16];` is one static
// variable, which the emulator cannot see: it could not give each block its own copy, nor
// fill it with NaN before the block starts. The macros give nvcc exactly that declaration
// and give the emulator a per-block array instead (where `__shared__` does not compile).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#else
#include "cuda/emulator/emulator.h"
#endif

// The kernel sources are built twice, by nvcc for the GPU and by g++ for the emulator, and
// both builds can sit in one library: each build's host functions live in a namespace
// named for it, gg::cuda::gpu or gg::cuda::emulated. Kernel files open
// `namespace gg::cuda::GG_CUDA_BUILD {`.
#ifdef __CUDACC__
#define GG_CUDA_BUILD gpu
#else
#define GG_CUDA_BUILD emulated
#endif

// Unrolls the loop that follows under nvcc, so that the per-thread arrays it indexes stay in
// registers instead of local memory; g++ decides on its own.
#ifdef __CUDACC__
#define GG_UNROLL _Pragma("unroll")
#else
#define GG_UNROLL
#endif

// Marks a vector access of `bytes` at `address`: the GPU faults when the address is not a
// multiple of the size, and the emulator throws (emu::check_aligned), as x86 would not.
#ifdef __CUDACC__
#define GG_CHECK_ALIGNED(address, bytes)
#else
#define GG_CHECK_ALIGNED(address, bytes) ::gg::emu::check_aligned(address, bytes)
#endif

namespace gg::cuda {

// Lets an array type be written where a declaration wants `type name`.
template <class T>
using identity_t = T;

// Grids stay within every dimension's limit; kernels that may get more work loop grid-stride.
constexpr int64_t kMaxBlocks = 65535;
// Two waves of a 132-SM GPU (an H100 or H200): a launch with fewer blocks leaves SMs idle, so
// the kernels whose natural grid can be that small (GEMM, column reductions) split their
// longest loop until they have about this many.
constexpr int64_t kFillBlocks = 264;

// The blocks of `threads` threads that give each of n items its own thread, at most kMaxBlocks
// (a grid-stride loop then takes the rest).
inline dim3 grid_covering(int64_t n, unsigned threads) {
    return dim3(unsigned(std::min((n + threads - 1) / threads, kMaxBlocks)));
}

// Kernels this build has launched since the process started; every launch below adds one.
// The count a training step makes is what its time on a GPU pays for launching alone (a few
// microseconds each, however small the kernel), so cuda/cuda.h hands it out as
// kernel_launches() for the benches and tests to read.
namespace GG_CUDA_BUILD {
inline std::atomic<int64_t> launch_count{0};
}

#ifdef __CUDACC__

// The stream kernels run on (the runtime owns it).
cudaStream_t current_stream();

// Launches kernel<<<grid, block, shared_bytes>>>(args...) on current_stream().
template <class Kernel, class... Args>
void launch(const char* name, Kernel kernel, dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    // Beyond 48 KiB a kernel must opt in to more dynamic shared memory.
    if (shared_bytes > 48 * 1024) {
        const cudaError_t error =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes));
        if (error != cudaSuccess)
            throw std::runtime_error(std::string("cuda: ") + name + ": " + cudaGetErrorString(error));
    }
    kernel<<<grid, block, shared_bytes, current_stream()>>>(args...);
    gpu::launch_count.fetch_add(1, std::memory_order_relaxed);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) throw std::runtime_error(std::string("cuda: ") + name + ": " + cudaGetErrorString(error));
}

#define GG_SHARED(type, name) __shared__ ::gg::cuda::identity_t<type> name
#define GG_DYNAMIC_SHARED(T, name)                                     \
    extern __shared__ __align__(16) unsigned char gg_dynamic_shared[]; \
    T* name = reinterpret_cast<T*>(gg_dynamic_shared)

#else

namespace emulated {
void check_device_error();  // cuda/device_error.h
}

// Runs every block of the grid on the CPU and returns when all have finished. The launch
// is synchronous, so this is the emulated build's synchronisation point: an index error a
// kernel reported (cuda/device_error.h) is thrown here, as the CPU backend throws at once.
template <class Kernel, class... Args>
void launch(const char* name, Kernel kernel, dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    ::gg::emu::launch(name, kernel, grid, block, shared_bytes, args...);
    emulated::launch_count.fetch_add(1, std::memory_order_relaxed);
    emulated::check_device_error();
}

// The static key's address names the declaration, as a __shared__ variable would: the
// same array for every thread of a block, wherever the declaring function is called from.
#define GG_SHARED(type, name)        \
    static char name##_gg_shared_key; \
    ::gg::cuda::identity_t<type>& name = ::gg::emu::block_shared<::gg::cuda::identity_t<type>>(&name##_gg_shared_key, #name)
#define GG_DYNAMIC_SHARED(T, name) T* name = ::gg::emu::dynamic_shared<T>()

#endif

}  // namespace gg::cuda

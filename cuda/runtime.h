// runtime.h — what the host code of the kernel families shares besides the launch (cuda/launch.h):
// checked CUDA and cuBLAS calls and the one cuBLAS handle (GPU build), and what each build
// tells cuda/cuda.cpp about its device and memory.
//
// Every CUDA and cuBLAS call goes through GG_CUDA_CHECK / GG_CUBLAS_CHECK, which throw
//   std::runtime_error("cuda: cuda/memory.cu:57: cudaStreamSynchronize(current_stream()):
//                       an illegal memory access was encountered (cudaErrorIllegalAddress)")
// so a failure names where it was noticed and the call that noticed it. Kernels run
// asynchronously: a kernel's own fault surfaces at the next call that waits for it.
#pragma once
#include <string>

#include "tensor/caching_allocator.h"
#include "cuda/cuda.h"
#include "cuda/launch.h"

#ifdef __CUDACC__
#include <cublas_v2.h>
#endif

namespace gg::cuda {

#ifdef __CUDACC__

[[noreturn]] void throw_call_error(const char* call, const char* file, int line, const std::string& what);

inline void check_cuda(cudaError_t error, const char* call, const char* file, int line) {
    if (error != cudaSuccess)
        throw_call_error(call, file, line,
                         std::string(cudaGetErrorString(error)) + " (" + cudaGetErrorName(error) + ")");
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) throw_call_error(call, file, line, cublasGetStatusString(status));
}

#define GG_CUDA_CHECK(call) ::gg::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define GG_CUBLAS_CHECK(call) ::gg::cuda::check_cublas((call), #call, __FILE__, __LINE__)

// The process's cuBLAS handle, bound to current_stream() so that cuBLAS calls queue behind
// our kernels and ours behind them. Made on first use, never destroyed (see runtime.cu).
cublasHandle_t cublas_handle();

#endif

// What cuda/cuda.cpp (plain C++) asks each build. Both builds can sit in one library, so
// both namespaces are named here; gpu exists only where nvcc built the library.
namespace gpu {
const Backend& backend_table();  // cuda/backend.cu, with -Dkernel_table=true
MemoryStats memory_stats();      // cuda/memory.cu: the caching allocator's counters
void empty_cache();
int64_t kernel_launches();       // cuda/memory.cu: launch_count (cuda/launch.h)
// cuda/runtime.cu: "" when cudaGetDeviceCount reports at least one device, else why not, e.g.
// "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)".
std::string probe_devices();
DeviceInfo device_info();
}  // namespace gpu
namespace emulated {
const Backend& backend_table();
MemoryStats memory_stats();
void empty_cache();
int64_t kernel_launches();
}  // namespace emulated

}  // namespace gg::cuda

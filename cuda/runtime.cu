// runtime.cu — the GPU build's process-wide CUDA state: the one stream every launch and
// every cuBLAS call queues on, the cuBLAS handle, and the device query. Only nvcc builds
// this file; the emulated build has no stream (its launches are synchronous) and no device.
//
// Each object is made on first use, so loading the library touches no CUDA API (on a
// machine without a driver that is where cudaGetDeviceCount would fail), and is never
// destroyed: at exit the CUDA runtime may already have torn down the context they live in.
#include <stdexcept>
#include <string>

#include "cuda/runtime.h"

namespace gg::cuda {

void throw_call_error(const char* call, const char* file, int line, const std::string& what) {
    std::string where = file;
    // Builds pass sources as "../cuda/x.cu"; the message names the file as the tree does.
    while (where.starts_with("../")) where.erase(0, 3);
    throw std::runtime_error("cuda: " + where + ":" + std::to_string(line) + ": " + call + ": " + what);
}

cudaStream_t current_stream() {
    // A blocking stream: it still orders with anything a library queues on the legacy
    // default stream.
    static const cudaStream_t stream = [] {
        cudaStream_t s = nullptr;
        GG_CUDA_CHECK(cudaStreamCreate(&s));
        return s;
    }();
    return stream;
}

cublasHandle_t cublas_handle() {
    static const cublasHandle_t handle = [] {
        cublasHandle_t h = nullptr;
        GG_CUBLAS_CHECK(cublasCreate(&h));
        GG_CUBLAS_CHECK(cublasSetStream(h, current_stream()));
        return h;
    }();
    return handle;
}

namespace gpu {

std::string probe_devices() {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
        (void)cudaGetLastError();  // a failed query must not read as a later call's error
        return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(error) + " (" + cudaGetErrorName(error) + ")";
    }
    return count > 0 ? "" : "cudaGetDeviceCount found no device";
}

DeviceInfo device_info() {
    int device = 0;
    GG_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    GG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return {prop.name, prop.major * 10 + prop.minor, prop.multiProcessorCount, prop.totalGlobalMem};
}

}  // namespace gpu

}  // namespace gg::cuda

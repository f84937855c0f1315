// memory.cu — device memory and the copies between host and device, for each build:
//
//   GPU build       blocks from cudaMalloc, copies on the one stream (cuda/runtime.cu);
//   emulated build  blocks of host memory aligned as cudaMalloc's (256 bytes), plain memcpy.
//
// Both keep freed blocks in the same caching allocator (cuda/caching_allocator.h). Copies
// are synchronous for the caller: from_host returns when the host buffer may be reused,
// to_host when the values are on the host. Waiting for the device is where an error a
// kernel reported (cuda/device_error.h) turns into an exception, so to_host and
// synchronize() check for one after they wait.
#include <cstdlib>
#include <cstring>

#include "cuda/device_error.h"
#include "cuda/kernels.h"
#include "cuda/runtime.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

#ifdef __CUDACC__
void* raw_allocate(size_t nbytes) {
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, nbytes);
    if (error == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // out of memory is the allocator's to handle: clear it
        return nullptr;
    }
    check_cuda(error, "cudaMalloc", __FILE__, __LINE__);
    return ptr;
}
void raw_free(void* ptr) { GG_CUDA_CHECK(cudaFree(ptr)); }
#else
// Aligned as cudaMalloc's blocks, and exactly nbytes long: with caching off, AddressSanitizer
// sees a kernel that reads past the end.
void* raw_allocate(size_t nbytes) {
    void* ptr = nullptr;
    return posix_memalign(&ptr, 256, nbytes) == 0 ? ptr : nullptr;
}
void raw_free(void* ptr) { std::free(ptr); }
#endif

// Never destroyed: blocks still held at exit go with the process, and the GPU build must
// not call cudaFree after the CUDA runtime has shut down.
CachingAllocator& allocator() {
    static CachingAllocator* instance =
        new CachingAllocator(raw_allocate, raw_free, caching_enabled_by_environment("GATEDGRAD_CUDA_CACHE"));
    return *instance;
}

}  // namespace

void* allocate(size_t nbytes) { return allocator().allocate(nbytes); }
void deallocate(void* ptr, size_t) { allocator().deallocate(ptr); }
MemoryStats memory_stats() { return allocator().stats(); }
void empty_cache() { allocator().empty_cache(); }
int64_t kernel_launches() { return launch_count.load(std::memory_order_relaxed); }

#ifdef __CUDACC__

void synchronize() {
    GG_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
    check_device_error();
}

void to_host(void* host_dst, const void* device_src, size_t nbytes) {
    GG_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, nbytes, cudaMemcpyDeviceToHost, current_stream()));
    synchronize();
}

void from_host(void* device_dst, const void* host_src, size_t nbytes) {
    GG_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, nbytes, cudaMemcpyHostToDevice, current_stream()));
    // The caller may free or overwrite host_src as soon as this returns.
    GG_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
}

#else

// Emulated launches are synchronous and check for reported errors as they return
// (cuda/launch.h): there is nothing left to wait for.
void synchronize() { check_device_error(); }
void to_host(void* host_dst, const void* device_src, size_t nbytes) { std::memcpy(host_dst, device_src, nbytes); }
void from_host(void* device_dst, const void* host_src, size_t nbytes) { std::memcpy(device_dst, host_src, nbytes); }

#endif

}  // namespace gg::cuda::GG_CUDA_BUILD

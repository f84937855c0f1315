// cuda.h — the CUDA device as a program sees it: what serves Device::CUDA, what the device
// is, and its memory. Plain C++: no CUDA header is needed to include it.
//
// Which table serves Device::CUDA is decided once, when a program first names the device
// (backend(Device::CUDA) asks selection(), through the provider registered below), never at
// load time:
//   GATEDGRAD_CUDA=emulator  → the emulated build: every CUDA kernel runs on the CPU emulator;
//   unset                    → the GPU build, when the library has one and
//                              cudaGetDeviceCount reports a device;
//   otherwise                → none: backend(Device::CUDA) throws
//                              "no CUDA device: <why>; set GATEDGRAD_CUDA=emulator ...".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/caching_allocator.h"
#include "tensor/backend.h"

namespace gg::cuda {

enum class Mode { none, gpu, emulator };

struct Selection {
    Mode mode = Mode::none;
    const Backend* table = nullptr;  // null exactly when mode is none
    std::string error;               // why there is no table; empty otherwise
};

// The selection of this process, made on the first call.
const Selection& selection();

// Registers selection() as Device::CUDA's provider (tensor/backend.h): the tensor layer
// knows no device but the CPU, so this folder tells it that CUDA exists.
void register_cuda_backend();
// Every program that includes this header (gatedgrad.h does) calls it before main. Why not
// a registrar object in cuda.cpp: the library is a static archive by default, and the linker
// takes an object file from an archive only when the program names one of its symbols; a
// program that calls nothing of cuda/ would lose the registrar. This variable names
// register_cuda_backend, so cuda.cpp is linked wherever the header is included.
inline const bool cuda_backend_registered = (register_cuda_backend(), true);

// What one build of the library holds, for select().
struct BuiltIn {
    const Backend* emulated_table = nullptr;  // null until the kernel table is built in
    const Backend* gpu_table = nullptr;       // null without the GPU build or the table
    // With the GPU build: "" when at least one device answers, else the reason. Null without it.
    std::string (*probe_gpu)() = nullptr;
};

// The rule above, given GATEDGRAD_CUDA's value (null when unset) and what the library
// holds. selection() calls it with the real ones; tests call it with fakes.
Selection select(const char* gatedgrad_cuda, const BuiltIn& built_in);

struct DeviceInfo {
    std::string name;              // "NVIDIA H200", "emulator", or "none"
    int compute_capability = 0;    // 90 for sm_90; 0 unless a GPU
    int multiprocessors = 0;
    size_t memory_bytes = 0;       // global memory
};

// The device behind Device::CUDA ("none" with zeros when there is none).
DeviceInfo device_info();
std::string device_name();

// The caching allocator of the build behind Device::CUDA (cuda/caching_allocator.h);
// throws the selection's error when there is none.
MemoryStats memory_stats();
void empty_cache();

// Kernels launched on the device since the process started (cuda/launch.h): read it before
// and after some work to count that work's launches. cuBLAS calls (GATEDGRAD_GEMM=cublas,
// cuda/gemm.h) launch kernels of their own, which it does not see.
int64_t kernel_launches();

// Waits for every kernel queued on the device; throws the first error a kernel reported.
void synchronize();

}  // namespace gg::cuda

// cuda.cpp — which build serves Device::CUDA (the rule of cuda/cuda.h), and the public
// queries, forwarded to that build.
#include "cuda/cuda.h"

#include <cstdlib>
#include <stdexcept>

#include "cuda/build_config.h"  // GG_CUDA_GPU, GG_CUDA_TABLE: what this library was built with
#include "cuda/runtime.h"

namespace gg::cuda {

namespace {

constexpr const char* kEmulatorHint = "set GATEDGRAD_CUDA=emulator to run CUDA kernels on the CPU emulator";

BuiltIn built_in() {
    BuiltIn b;
#if GG_CUDA_TABLE
    b.emulated_table = &emulated::backend_table();
#if GG_CUDA_GPU
    b.gpu_table = &gpu::backend_table();
#endif
#endif
#if GG_CUDA_GPU
    b.probe_gpu = gpu::probe_devices;
#endif
    return b;
}

Selection none(std::string error) { return {Mode::none, nullptr, std::move(error)}; }

// What each build answers to the queries below.
struct BuildQueries {
    MemoryStats (*memory_stats)();
    void (*empty_cache)();
    DeviceInfo (*device_info)();
    int64_t (*kernel_launches)();
};

const BuildQueries& selected_build() {
    const Selection& s = selection();
    if (s.mode == Mode::none) throw std::runtime_error(s.error);
#if GG_CUDA_GPU
    static const BuildQueries gpu_build{gpu::memory_stats, gpu::empty_cache, gpu::device_info,
                                        gpu::kernel_launches};
    if (s.mode == Mode::gpu) return gpu_build;
#endif
#if GG_CUDA_TABLE
    static const BuildQueries emulated_build{emulated::memory_stats, emulated::empty_cache,
                                             [] { return DeviceInfo{"emulator"}; }, emulated::kernel_launches};
    return emulated_build;
#else
    // Without the kernel table the emulated kernels are not linked in, and select() picks none.
    throw std::logic_error("gg::cuda: a build was selected in a library without the CUDA kernel table");
#endif
}

}  // namespace

Selection select(const char* gatedgrad_cuda, const BuiltIn& built_in) {
    const std::string choice = gatedgrad_cuda ? gatedgrad_cuda : "";
    if (choice == "emulator") {
        if (!built_in.emulated_table)
            return none("no CUDA backend: GATEDGRAD_CUDA=emulator, but this library was built without the CUDA "
                        "kernel table (tools/build builds it; meson: -Dkernel_table=true)");
        return {Mode::emulator, built_in.emulated_table, ""};
    }
    if (!choice.empty())
        return none("no CUDA device: GATEDGRAD_CUDA=" + choice +
                    " is not a choice; leave it unset for the GPU, or set GATEDGRAD_CUDA=emulator");
    if (!built_in.probe_gpu)
        return none(std::string("no CUDA device: gatedgrad was built without nvcc; ") + kEmulatorHint);
    const std::string why_not = built_in.probe_gpu();
    if (!why_not.empty()) return none("no CUDA device: " + why_not + "; " + kEmulatorHint);
    if (!built_in.gpu_table)
        return none("no CUDA backend: a GPU is present, but this library was built without the CUDA kernel table "
                    "(tools/build builds it; meson: -Dkernel_table=true)");
    return {Mode::gpu, built_in.gpu_table, ""};
}

const Selection& selection() {
    static const Selection selected = select(std::getenv("GATEDGRAD_CUDA"), built_in());
    return selected;
}

void register_cuda_backend() {
    register_backend_provider(Device::CUDA, [] { return selection().table; }, [] { return selection().error; });
}

DeviceInfo device_info() {
    return selection().mode == Mode::none ? DeviceInfo{"none"} : selected_build().device_info();
}
std::string device_name() { return device_info().name; }
MemoryStats memory_stats() { return selected_build().memory_stats(); }
void empty_cache() { selected_build().empty_cache(); }
int64_t kernel_launches() { return selected_build().kernel_launches(); }

void synchronize() {
    const Selection& s = selection();
    if (!s.table) throw std::runtime_error(s.error);
    s.table->synchronize();
}

}  // namespace gg::cuda

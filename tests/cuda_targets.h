// cuda_targets.h — the two places a CUDA suite runs its kernels, from one source: the CPU
// emulator (cuda/emulator/: the emulated build's entries, whose device memory is host memory) and
// the GPU (the GPU build's table, on device memory), each checked against the CPU's result.
//
// cuda_targets() lists, in order:
//   the emulator, on host memory, unless GATEDGRAD_TEST_TARGETS=device;
//   the GPU, when this process's Device::CUDA is the GPU (GATEDGRAD_CUDA unset, a GPU build of
//     the library, and a device that answers), unless GATEDGRAD_TEST_TARGETS=emulator.
// Where the GPU is not among them, the first call says once why ("the GPU half of these cases
// is skipped: ..."): under meson, GATEDGRAD_CUDA=emulator; on a machine without a GPU, the
// driver's answer. A case loops over the list and puts its tensors on target.device.
// GATEDGRAD_TEST_TARGETS=device lists only whatever serves Device::CUDA, on its memory: the GPU
// in tools/gpu-check (CI has run the emulator's half), the emulator under GATEDGRAD_CUDA=emulator,
// which is how CI checks the suites' own path through device memory (copies in, views, copies
// back) without a GPU; with neither it is an error.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cuda/cuda.h"
#include "cuda/runtime.h"
#include "tensor/backend.h"
#include "tensor/tensor.h"

namespace gg::testing {

struct CudaTarget {
    std::string name;              // "emulator" or "gpu"
    const Backend* table;          // the entries a case calls
    Device device;                 // where its tensors live
    bool gpu = false;              // the GPU build's functions (cuda::gpu::), not the emulated build's
    Tensor put(const Tensor& t) const { return t.to(device); }  // t itself on the CPU, a copy on the GPU
};

inline const std::vector<CudaTarget>& cuda_targets() {
    static const std::vector<CudaTarget> targets = [] {
        const char* only = std::getenv("GATEDGRAD_TEST_TARGETS");
        const std::string wanted = only ? only : "";
        if (!wanted.empty() && wanted != "device" && wanted != "emulator") {
            std::fprintf(stderr, "GATEDGRAD_TEST_TARGETS is '%s': use device, emulator, or leave it unset (both)\n",
                         wanted.c_str());
            std::exit(2);
        }
        const cuda::Selection& s = cuda::selection();
        if (wanted == "device") {
            if (s.mode == cuda::Mode::none) {
                std::fprintf(stderr, "GATEDGRAD_TEST_TARGETS=device, but nothing serves Device::CUDA: %s\n",
                             s.error.c_str());
                std::exit(1);
            }
            const bool gpu = s.mode == cuda::Mode::gpu;
            return std::vector<CudaTarget>{{gpu ? "gpu" : "emulator (Device::CUDA)", s.table, Device::CUDA, gpu}};
        }
        std::vector<CudaTarget> list{{"emulator", &cuda::emulated::backend_table(), Device::CPU}};
        std::string why;
        if (wanted == "emulator") why = "GATEDGRAD_TEST_TARGETS=emulator";
        else if (s.mode == cuda::Mode::gpu) list.push_back({"gpu", s.table, Device::CUDA, true});
        else if (s.mode == cuda::Mode::emulator) why = "GATEDGRAD_CUDA=emulator serves Device::CUDA";
        else why = s.error;
        if (!why.empty()) std::fprintf(stderr, "the GPU half of these cases is skipped: %s\n", why.c_str());
        return list;
    }();
    return targets;
}

// Host arrays mirrored on target t, for entries that take raw pointers (the GEMM): on(v) is
// where t reads and writes v (v's own data on the emulator, whose device memory is host memory;
// a copy in device memory on the GPU), back(v) brings that copy's values into v.
class Mirror {
public:
    explicit Mirror(const CudaTarget& t) : t_(t) {}
    Mirror(const Mirror&) = delete;
    Mirror& operator=(const Mirror&) = delete;
    ~Mirror() {
        for (const auto& [host, copy] : copies_) t_.table->deallocate(copy.data, copy.bytes);
    }

    template <class T>
    T* on(std::vector<T>& v) {
        return static_cast<T*>(place(v.data(), v.size() * sizeof(T)));
    }
    template <class T>
    const T* on(const std::vector<T>& v) {
        return static_cast<const T*>(place(const_cast<T*>(v.data()), v.size() * sizeof(T)));
    }
    template <class T>
    void back(std::vector<T>& v) {
        if (t_.device == Device::CPU) return;
        const Copy& copy = copies_.at(v.data());
        t_.table->to_host(v.data(), copy.data, copy.bytes);
    }

private:
    struct Copy {
        void* data;
        size_t bytes;
    };
    void* place(void* host, size_t bytes) {
        if (t_.device == Device::CPU) return host;
        auto [it, fresh] = copies_.try_emplace(host, Copy{nullptr, bytes});
        if (fresh) {
            it->second.data = t_.table->allocate(bytes);
            t_.table->from_host(it->second.data, host, bytes);
        }
        return it->second.data;
    }
    const CudaTarget& t_;
    std::map<const void*, Copy> copies_;
};

}  // namespace gg::testing

// cuda_table.h — the CUDA table that the runtime, element-wise and tensor suites test.
//
// It is whatever serves Device::CUDA: the GPU's table when the suites run on a GPU with
// GATEDGRAD_CUDA unset (tools/gpu-check), the emulated build's under GATEDGRAD_CUDA=emulator
// (as meson test runs them). Until every kernel family is in the library and with them the
// table (-Dkernel_table=true), Device::CUDA has none; then these suites register one made of
// the emulated runtime and element-wise entries, the only ones they call.
#pragma once
#include "cuda/kernels.h"
#include "tensor/backend.h"

namespace gg::test {

inline const Backend& cuda_backend() {
    static const bool registered = [] {
        if (device_available(Device::CUDA)) return false;
        namespace emu = cuda::emulated;
        static const Backend runtime_and_elementwise = [] {
            Backend table{};
            table.name = "cuda (emulator: runtime and element-wise entries)";
            table.allocate = emu::allocate;
            table.deallocate = emu::deallocate;
            table.to_host = emu::to_host;
            table.from_host = emu::from_host;
            table.synchronize = emu::synchronize;
            table.fill = emu::fill;
            table.arange = emu::arange;
            table.copy = emu::copy;
            table.unary = emu::unary;
            table.binary = emu::binary;
            table.where = emu::where;
            return table;
        }();
        register_backend(Device::CUDA, &runtime_and_elementwise);
        return true;
    }();
    (void)registered;
    return backend(Device::CUDA);
}

}  // namespace gg::test

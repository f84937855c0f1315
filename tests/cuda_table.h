// cuda_table.h — the CUDA table that the runtime, element-wise and tensor suites test.
//
// It is whatever serves Device::CUDA: the GPU's table when the suites run on a GPU with
// GATEDGRAD_CUDA unset (tools/gpu-check), the emulated build's under GATEDGRAD_CUDA=emulator
// (as meson test runs them). backend() throws the selection's reason when there is neither.
#pragma once
#include "cuda/cuda.h"  // registers Device::CUDA's backend
#include "tensor/backend.h"

namespace gg::test {

inline const Backend& cuda_backend() { return backend(Device::CUDA); }

}  // namespace gg::test

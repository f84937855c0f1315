// blas_buffers.h — the address space OpenBLAS's work buffers take, and what that means under
// `ulimit -v`.
//
// OpenBLAS runs each GEMM on the thread that calls it (cpu/backend.cpp), and our threads
// are OpenMP's. Each thread that is inside a GEMM at the same time as another needs a work
// buffer of its own: 128 MiB and a page of address space (OpenBLAS 0.3.21's x86-64 build,
// measured: its BUFFER_SIZE), taken at the first such GEMM and kept to the end. Where the
// address space for one is not there, OpenBLAS does not fail: it retries forever, a hang in
// the middle of a run. So under an address-space limit (RLIMIT_AS, `ulimit -v`) the library
// runs no more OpenMP threads than there is room for their buffers, and refuses to start,
// in one line that names the limit, where there is not room for one.
#pragma once
#include <cstdint>

namespace gg {

constexpr uint64_t kBlasBufferBytes = (uint64_t{128} << 20) + 4096;

// What RLIMIT_AS leaves above the address space this process maps now; UINT64_MAX where there
// is no limit.
uint64_t address_space_left();

// Once, at the CPU backend's first use or before: the OpenMP threads cut to as many as the
// address space left holds buffers for (each with its stack, and room to spare for everything
// else); throws std::runtime_error naming the limit when not even one fits.
void fit_threads_to_address_space();

// The address space OpenBLAS's buffers take or will take, one per OpenMP thread once they are
// fitted; counted as taken from the start (nn::memory_limit), since they are mapped at the first
// GEMMs.
uint64_t blas_buffer_bytes();

}  // namespace gg

// blas_buffers.cpp — OpenMP's threads fitted to the address space OpenBLAS's buffers need
// (cpu/blas_buffers.h).
#include "cpu/blas_buffers.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gg {

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
// Besides its buffer, a thread's stack (8 MiB, the usual `ulimit -s`), and for the whole
// process some room for what is allocated outside the model's tensors.
constexpr uint64_t kThreadBytes = kBlasBufferBytes + 8 * kMiB, kSpareBytes = 64 * kMiB;

int max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

std::string mib(uint64_t bytes) { return std::to_string(bytes / kMiB) + " MiB"; }

}  // namespace

uint64_t address_space_left() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    uint64_t mapped_pages = 0;  // the address space in use: libraries, stacks, thread arenas
    std::ifstream("/proc/self/statm") >> mapped_pages;
    const uint64_t mapped = mapped_pages * uint64_t(::sysconf(_SC_PAGESIZE));
    return limit.rlim_cur > mapped ? limit.rlim_cur - mapped : 0;
}

void fit_threads_to_address_space() {
    // Once, at the first call that does not throw: after it the threads are fitted.
    static const bool fitted = [] {
        const uint64_t left = address_space_left();
        if (left == UINT64_MAX) return true;
        const uint64_t fit = left > kSpareBytes ? (left - kSpareBytes) / kThreadBytes : 0;
        if (fit == 0)
            throw std::runtime_error("ulimit -v leaves " + mib(left) + " of address space, and OpenBLAS needs " +
                                     mib(kThreadBytes + kSpareBytes) + " to multiply matrices: raise the limit by " +
                                     mib(kThreadBytes + kSpareBytes - left + kMiB) + " or more");
#ifdef _OPENMP
        if (fit < uint64_t(max_threads())) omp_set_num_threads(int(fit));
#endif
        return true;
    }();
    (void)fitted;
}

uint64_t blas_buffer_bytes() {
    fit_threads_to_address_space();
    return uint64_t(max_threads()) * kBlasBufferBytes;
}

}  // namespace gg

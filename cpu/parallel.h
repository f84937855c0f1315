// parallel.h — OpenMP work splitting for the CPU kernels.
#pragma once
#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace gg {

// Below this many elements a loop runs on one thread: waking threads costs more.
constexpr int64_t kParallelGrain = 1 << 15;

// Calls f(begin, end) on disjoint chunks covering [0, n), one chunk per thread when
// n * cost_per_item is large enough to be worth it.
template <class F>
void parallel_range(int64_t n, F&& f, int64_t cost_per_item = 1) {
#ifdef _OPENMP
    if (n * cost_per_item >= kParallelGrain && omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
            const int64_t chunk = (n + threads - 1) / threads;
            const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
            if (begin < end) f(begin, end);
        }
        return;
    }
#endif
    if (n > 0) f(int64_t{0}, n);
}

}  // namespace gg

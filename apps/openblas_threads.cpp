// openblas_threads.cpp — no OpenBLAS worker threads, from before OpenBLAS loads.
//
// The library runs OpenBLAS on the thread that calls it (cpu/backend.cpp). But
// OpenBLAS's pthreads build (Debian's) starts workers of its own as it loads, before main, one
// per core but one, and each takes its 128 MiB work buffer at once (cpu/blas_buffers.h).
// Under `ulimit -v` a worker that finds no room retries forever, and exit waits for it: on a
// machine with 8 cores or more, every command, --help included, never ended under a 1 GB limit.
//
// OpenBLAS starts no workers where the environment says OPENBLAS_NUM_THREADS=1 as it loads.
// A program's .preinit_array runs before the initialisers of the shared libraries it loads,
// but setenv there is undone: the C library's own initialiser, which runs next, puts back the
// environment the program started with. So where that is not set, the program runs itself
// again (execve of /proc/self/exe, the same arguments) with it set, before any library has
// started a thread; a few milliseconds. Where the exec fails the program goes on as it was.
#include <unistd.h>

#include <cstring>

namespace {

constexpr char kOneThread[] = "OPENBLAS_NUM_THREADS=1";

void one_openblas_thread(int, char** argv, char** envp) {
    constexpr int kMaxEntries = 4096;  // the new environment lives on this stack
    char* env[kMaxEntries + 2];
    int n = 0;
    for (char** entry = envp; *entry; ++entry) {
        if (std::strcmp(*entry, kOneThread) == 0) return;  // already so: no workers
        if (std::strncmp(*entry, "OPENBLAS_NUM_THREADS=", 21) == 0) continue;
        if (n == kMaxEntries) return;
        env[n++] = *entry;
    }
    env[n++] = const_cast<char*>(kOneThread);
    env[n] = nullptr;
    ::execve("/proc/self/exe", argv, env);
}

[[gnu::used, gnu::section(".preinit_array")]] void (*before_libraries_load)(int, char**, char**) = one_openblas_thread;

}  // namespace

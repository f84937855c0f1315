// host_memory.h — the CPU's raw memory, under its caching allocator (cpu/backend.cpp).
//
// Small blocks come from malloc, 64-byte aligned (AVX-512 loads, OpenBLAS). Blocks of 8 MiB
// or more get a mapping of their own, 2 MiB aligned, with the kernel asked for transparent
// huge pages (madvise(MADV_HUGEPAGE); under the common setting `madvise` only a program that
// asks gets them). Why: fresh memory faults in page by page on first touch, and a 4 KiB page
// fault costs microseconds. On a 2-core virtual machine, touching 1 GiB took 3.5 s in 4 KiB
// pages and 0.07 s in 2 MiB ones. A real model's forward meets fresh memory wherever its
// blocks outgrow what the cache keeps, and an analysis forward keeps a gigabyte of attention
// probabilities: at Qwen3-1.7B's shape it spent about 7 s of CPU a run more than the plain
// forward in page faults. Why not from 2 MiB: a 2 MiB page is resident whole once any byte of
// it is touched, and the size classes of the cache leave blocks partly used: decoding
// Qwen3-0.6B's shape peaked at 1.433 GB with huge pages from 2 MiB on, at 1.369 GB from 8 MiB
// on and at 1.367 GB without them.
//
// A mapping of its own, not malloc: a freed block goes back to the system whole, where a
// freed block inside malloc's heap could be cut up for small requests, each of which would
// then make a whole 2 MiB page resident. Built with AddressSanitizer, every block comes from malloc at its own size, so
// that the sanitizer sees where each one ends.
#pragma once
#include <cstddef>

namespace gg {

// Whether blocks of kHugeBlock bytes or more get mappings of their own: everywhere but under
// AddressSanitizer.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kHostMappings = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kHostMappings = false;
#else
constexpr bool kHostMappings = true;
#endif
#else
constexpr bool kHostMappings = true;
#endif

constexpr size_t kHugeBlock = size_t(8) << 20;

// At least nbytes (at least 64), 64-byte aligned, 2 MiB aligned from kHugeBlock on. Null when
// the system has no memory left.
void* host_allocate(size_t nbytes);
// Takes back a block from host_allocate.
void host_free(void* p);

}  // namespace gg

// async_copy.h — asynchronous copies from global to shared memory (sm_80 and later), one name
// for both builds: inline PTX under nvcc, the emulator's model (cuda/emulator/async_copy.h) under g++.
//
//   cp_async16(shared_dst, global_src, src_bytes = 16)
//       cp.async.cg.shared.global [dst], [src], 16, src_bytes: starts a copy of 16 bytes and
//       returns at once; the first src_bytes (0 to 16) come from global memory, the rest of the
//       16 are zeros (src_bytes 0 reads nothing: a tile past a matrix's edge fills with zeros).
//       Both addresses 16-byte aligned; ".cg" goes around L1, which a tile read once per block
//       would only pollute.
//   cp_async_commit()
//       cp.async.commit_group: the thread's copies issued since its last commit become one group.
//   cp_async_wait<N>()
//       cp.async.wait_group N: waits until at most the N most recently committed groups of this
//       thread are still in flight; every older group has then landed in shared memory.
//
// A copy runs while the thread goes on computing, and is the thread's own: it is visible to
// the thread once a wait covers its group, and to the other threads of the block only after
// that wait and a __syncthreads. So a pipeline of S stages, slice s in stage s mod S, with
// slices 0 .. S − 2 issued (one group each) before it starts, reads like this per slice s:
//
//   cp_async_wait<S − 2>(); __syncthreads();   slice s has landed, for every thread, and
//                                              every thread is done with slice s − 1's stage
//   issue the copies of slice s + S − 1 into that stage; commit (a group even if empty)
//   compute on slice s
//
// Issuing before the barrier would let the copies overwrite a stage that another warp may
// still be reading. Copies not yet committed belong to no group, and no wait_group covers them.
#pragma once
#include <cstdint>

#include "cuda/launch.h"

namespace gg::cuda {

#ifdef __CUDACC__

__device__ __forceinline__ void cp_async16(void* shared_dst, const void* global_src, int src_bytes = 16) {
    const unsigned dst = unsigned(__cvta_generic_to_shared(shared_dst));
    const size_t src = __cvta_generic_to_global(global_src);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#else

using emu::cp_async16;
using emu::cp_async_commit;
using emu::cp_async_wait;

#endif

}  // namespace gg::cuda

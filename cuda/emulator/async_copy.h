// async_copy.h — the emulator's model of cp.async (sm_80's asynchronous copy from global to
// shared memory), which cuda/async_copy.h issues as inline PTX under nvcc.
//
// On a GPU a cp.async lands in shared memory at some time between its issue and the
// cp.async.wait_group that covers its group; reading the destination before that wait reads
// whatever was there, sometimes the new bytes and sometimes not. The model takes the latest
// moment every time, so that a kernel which forgets a wait, or waits for too few groups,
// reads stale shared memory here on every run (the 0xFF fill: NaN) and fails its test:
//
//   cp_async16      checks both addresses are 16-byte aligned (the GPU faults otherwise) and
//                   the destination lies in the block's shared memory, reads the source now (src_bytes of it, zeros for the rest) and keeps the
//                   16 bytes in the thread's list of copies in flight, tagged with the group
//                   they will join at the next commit;
//   cp_async_commit closes that group;
//   cp_async_wait<N> writes to shared memory, in issue order, the copies of every committed
//                   group but the N most recent, and drops them from the list.
//
// The list is the thread's own (emulator.cpp keeps it with the thread's fiber) and starts
// empty for every thread of every block; copies still in flight when a thread returns are
// dropped, as nothing could read them.
#pragma once

namespace gg::emu {

void async_copy(void* shared_dst, const void* global_src, int src_bytes, const SourceLocation& site);
void async_commit();
void async_wait(int pending);

inline void cp_async16(void* shared_dst, const void* global_src, int src_bytes = 16,
                       SourceLocation site = SourceLocation::current()) {
    async_copy(shared_dst, global_src, src_bytes, site);
}
inline void cp_async_commit() { async_commit(); }
template <int N>
void cp_async_wait() {
    static_assert(N >= 0, "cp.async.wait_group counts groups left in flight: 0 or more");
    async_wait(N);
}

}  // namespace gg::emu

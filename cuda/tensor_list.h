// tensor_list.h — one launch over a list of tensors: AdamW over every parameter of a model and
// the scaling of its gradients when they are clipped (optim.cu), and the sum of squares behind
// their norm (reduce.cu), where one launch per tensor would make hundreds of launches per
// step, most of them over a few thousand elements.
//
// Each tensor is cut into chunks of kListChunk elements (its last chunk shorter). The chunks
// are numbered through the list in order, tensor 0's first, and chunk k goes to block
// k mod G of a grid of G ≤ kMaxBlocks blocks of kListThreads threads. A block finds the
// tensor that holds its chunk by a binary search over the tensors' first chunk numbers, then
// its threads take neighbouring packs of the chunk (cuda/packs.h): a 64 KiB chunk of f32 is
// 16 float4 loads per thread, enough bytes in flight to keep the memory bus busy, whatever
// mix of large matrices and small norm weights the list holds.
//
// The list's entries (pointers, sizes, per-tensor scalars) are too many for kernel arguments
// (a medium model has about 250 parameters), so the host copies them into a device buffer
// before the launch (with_device_list). That copy waits for the stream (cuda/memory.cu:
// from_host returns when the host buffer may be reused), once per call, where one launch per
// tensor cost a launch per tensor; in a training step the loss and the gradient norm are
// read back anyway, so the device has little queued at that point.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/kernels.h"
#include "cuda/packs.h"

namespace gg::cuda {

constexpr int64_t kListChunk = 16384;  // elements per chunk: a multiple of every pack width
constexpr unsigned kListThreads = 256;

// The elements [begin, end) of tensor `tensor` of a list that one chunk covers.
struct ListChunk {
    int64_t tensor, begin, end;
};

// Numbers the chunks of a list whose entries have `n` (elements, > 0) and `first_chunk`:
// sets each entry's first chunk and returns how many chunks the list has.
template <class Entry>
int64_t number_chunks(std::vector<Entry>& list) {
    int64_t chunks = 0;
    for (Entry& e : list) {
        e.first_chunk = chunks;
        chunks += (e.n + kListChunk - 1) / kListChunk;
    }
    return chunks;
}

// The grid of a list launch over `chunks` chunks (grid-stride beyond kMaxBlocks).
inline dim3 list_grid(int64_t chunks) { return dim3(unsigned(std::clamp<int64_t>(chunks, 1, kMaxBlocks))); }

// Which tensor of list (count entries, sorted by first_chunk, none empty) holds `chunk`, and
// the chunk's elements in it: the last entry whose first chunk is at or before it.
template <class Entry>
__device__ ListChunk find_chunk(const Entry* list, int64_t count, int64_t chunk) {
    int64_t lo = 0, hi = count - 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (list[mid].first_chunk <= chunk) lo = mid;
        else hi = mid - 1;
    }
    const int64_t begin = (chunk - list[lo].first_chunk) * kListChunk;
    const int64_t end = begin + kListChunk < list[lo].n ? begin + kListChunk : list[lo].n;
    return {lo, begin, end};
}

// body.template operator()<W>(i) for the packs of elements [c.begin, c.end) that this block's
// threads take (thread t: packs at c.begin + W·t, then every W·blockDim.x), then
// body.template operator()<1>(i) for one each of the last (c.end − c.begin) mod W elements;
// with `packed` false (the tensor's pointers are not 16-byte aligned), W = 1 throughout.
template <int W, class Body>
__device__ void for_each_pack_of(const ListChunk& c, bool packed, Body&& body) {
    const auto sweep = [&]<int V>() {
        const int64_t packed_end = c.end - (c.end - c.begin) % V;
        for (int64_t i = c.begin + int64_t(threadIdx.x) * V; i < packed_end; i += int64_t(blockDim.x) * V)
            body.template operator()<V>(i);
        if (packed_end + threadIdx.x < c.end) body.template operator()<1>(packed_end + threadIdx.x);
    };
    if (packed) sweep.template operator()<W>();
    else sweep.template operator()<1>();
}

namespace GG_CUDA_BUILD {
// Runs launch_on(entries) with the list's entries copied to device memory, and frees that
// memory afterwards (one stream: a later kernel that reuses it runs after this one).
template <class Entry, class Launch>
void with_device_list(const std::vector<Entry>& list, Launch&& launch_on) {
    const size_t bytes = list.size() * sizeof(Entry);
    auto* entries = static_cast<Entry*>(allocate(bytes));
    from_host(entries, list.data(), bytes);
    launch_on(static_cast<const Entry*>(entries));
    deallocate(entries, bytes);
}
}  // namespace GG_CUDA_BUILD

}  // namespace gg::cuda

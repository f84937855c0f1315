// device_error.h — how a kernel reports bad input (an index out of range) without a trip
// to the host on every call.
//
// A kernel that checks indices takes a DeviceError* and, on the first bad one, records it
// (the first report wins; later ones are dropped). The host looks at the record at the
// next synchronisation point — a copy to the host, synchronize(), and after every launch
// in the emulator, whose launches are synchronous — and throws one clear error naming the
// op, the bad value and where it was, as the CPU backend does at once. Kernels never read
// out of bounds: a bad index's row is skipped.
#pragma once
#include <cstdint>

#include "cuda/launch.h"

namespace gg::cuda {

struct DeviceError {
    int op;            // 0 = none; else an ErrorOp below
    int64_t value;     // the offending index
    int64_t position;  // where it was in the index tensor
    int64_t limit;     // the valid range is [0, limit)
};

enum ErrorOp : int { kNoError = 0, kEmbedding, kIndexAdd, kGather, kScatterAdd, kCrossEntropy };

// The first report of a launch wins: atomicCAS on `op` claims the record.
__device__ inline void report_index_error(DeviceError* error, ErrorOp op, int64_t value, int64_t position,
                                          int64_t limit) {
    if (atomicCAS(&error->op, int(kNoError), int(op)) == int(kNoError)) {
        error->value = value;
        error->position = position;
        error->limit = limit;
    }
}

namespace GG_CUDA_BUILD {
// The record kernels of this build write into: host-visible memory (mapped pinned memory on
// a GPU), valid for the life of the process.
DeviceError* device_error();
// Throws and clears the record if a kernel has reported since the last check; the caller
// has synchronised. Message: "embedding: index 300 at position 7 is out of range [0, 257)".
void check_device_error();
}  // namespace GG_CUDA_BUILD

}  // namespace gg::cuda

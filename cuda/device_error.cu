// device_error.cu — the one DeviceError record of each build (cuda/device_error.h), and the
// host's check of it at synchronisation points.
#include <stdexcept>
#include <string>

#include "cuda/device_error.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {
const char* op_name(int op) {
    switch (op) {
        case kEmbedding: return "embedding";
        case kIndexAdd: return "index_add";
        case kGather: return "gather";
        case kScatterAdd: return "scatter_add";
        case kCrossEntropy: return "cross_entropy";
        default: return "kernel";
    }
}

#ifdef __CUDACC__
// Mapped pinned memory: kernels write it through the device pointer, the host reads it
// after a synchronisation without a copy.
struct Record {
    DeviceError* host = nullptr;
    DeviceError* device = nullptr;
    Record() {
        if (cudaHostAlloc(reinterpret_cast<void**>(&host), sizeof(DeviceError), cudaHostAllocMapped) != cudaSuccess ||
            cudaHostGetDevicePointer(reinterpret_cast<void**>(&device), host, 0) != cudaSuccess)
            throw std::runtime_error("cuda: cannot allocate the device error record");
        *host = DeviceError{};
    }
};
Record& record() {
    static Record r;
    return r;
}
DeviceError* host_record() { return record().host; }
#else
DeviceError emulated_record{};
DeviceError* host_record() { return &emulated_record; }
#endif
}  // namespace

DeviceError* device_error() {
#ifdef __CUDACC__
    return record().device;
#else
    return &emulated_record;
#endif
}

void check_device_error() {
    DeviceError* e = host_record();
    if (e->op == kNoError) return;
    const DeviceError seen = *e;
    *e = DeviceError{};
    throw std::out_of_range(std::string(op_name(seen.op)) + ": index " + std::to_string(seen.value) + " at position " +
                            std::to_string(seen.position) + " is out of range [0, " + std::to_string(seen.limit) + ")");
}

}  // namespace gg::cuda::GG_CUDA_BUILD

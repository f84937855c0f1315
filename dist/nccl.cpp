// nccl.cpp — the process group over NCCL, for tensors on the GPU.
//
// NCCL's collectives run as kernels on a CUDA stream, GPU to GPU (NVLink, PCIe or the
// network), without a copy to the host. They are queued on the library's own stream
// (cuda/launch.h: current_stream()), after the backward kernels that made the gradients and
// before the optimiser's, so nothing waits on the host. The ranks find each other through a
// unique id that rank 0 draws (ncclGetUniqueId) and sends to the others over MPI, which
// started them; CPU tensors (a step's loss, a flag) still go through MPI.
#include <cuda_runtime_api.h>
// The C API only: without these, mpi.h also pulls in Open MPI's deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <nccl.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "dist/process_group.h"

namespace gg::cuda {
cudaStream_t current_stream();  // cuda/runtime.cu, in the GPU build
}

namespace gg::dist {

namespace {

void check(ncclResult_t result, const char* call) {
    if (result != ncclSuccess) throw std::runtime_error(std::string(call) + ": " + ncclGetErrorString(result));
}

// ncclBfloat16 reduces bf16 on the GPU without a float32 copy. The partial sums a ring passes
// from rank to rank are bf16 themselves, so with N ranks a sum may be rounded N−1 times, where
// the mpi backend (dist/mpi.cpp) sums in float32 and rounds once.
ncclDataType_t nccl_type(DType dtype) {
    return dtype == DType::f32 ? ncclFloat32 : dtype == DType::bf16 ? ncclBfloat16 : ncclFloat64;
}

class NcclProcessGroup : public ProcessGroup {
public:
    explicit NcclProcessGroup(std::shared_ptr<ProcessGroup> mpi) : mpi_(std::move(mpi)) {
        ncclUniqueId id;
        if (mpi_->rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            throw std::runtime_error("init_nccl: MPI_Bcast of the NCCL unique id failed");
        // On the GPU this process uses (the app gives each rank its own: CUDA_VISIBLE_DEVICES).
        check(ncclCommInitRank(&comm_, mpi_->world_size(), id, mpi_->rank()), "ncclCommInitRank");
    }
    ~NcclProcessGroup() override { ncclCommDestroy(comm_); }

    int rank() const override { return mpi_->rank(); }
    int world_size() const override { return mpi_->world_size(); }
    int local_rank() const override { return mpi_->local_rank(); }
    std::string backend_name() const override { return "nccl"; }

    void all_reduce(const Tensor& x, ReduceOp op) override {
        if (x.defined() && x.device() == Device::CPU) return mpi_->all_reduce(x, op);
        check_reducible(x, "all_reduce");
        if (checking_collectives()) check_same_layout(*mpi_, x, "all_reduce");
        check(ncclAllReduce(address(x), address(x), size_t(x.numel()),
                            nccl_type(x.dtype()), op == ReduceOp::mean ? ncclAvg : ncclSum, comm_,
                            cuda::current_stream()),
              "ncclAllReduce");
        x.bump_version();
    }

    void broadcast(const Tensor& x, int root) override {
        if (x.defined() && x.device() == Device::CPU) return mpi_->broadcast(x, root);
        check_reducible(x, "broadcast");
        if (root < 0 || root >= world_size())
            throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is outside [0, " +
                                        std::to_string(world_size()) + ")");
        if (checking_collectives()) check_same_layout(*mpi_, x, "broadcast");
        check(ncclBroadcast(address(x), address(x), size_t(x.numel()), nccl_type(x.dtype()), root, comm_,
                            cuda::current_stream()),
              "ncclBroadcast");
        x.bump_version();
    }

    std::vector<int64_t> all_gather(const std::vector<int64_t>& mine) override { return mpi_->all_gather(mine); }
    // The loss, the stop flags and the checks go through mpi_, which polls with these limits. An
    // NCCL kernel waiting for a rank that never comes is not bounded by them.
    void set_wait_limits(const WaitLimits& limits) override {
        limits_ = limits;
        mpi_->set_wait_limits(limits);
    }

    void barrier() override {
        if (cudaStreamSynchronize(cuda::current_stream()) != cudaSuccess)
            throw std::runtime_error("barrier: cudaStreamSynchronize failed");
        mpi_->barrier();
    }

    [[noreturn]] void abort(int code) override {
        ncclCommAbort(comm_);
        mpi_->abort(code);
        std::_Exit(code);  // not reached: abort() ends the process
    }

private:
    static void* address(const Tensor& x) {
        return static_cast<char*>(x.impl()->storage->data) + x.offset() * dtype_size(x.dtype());
    }
    std::shared_ptr<ProcessGroup> mpi_;
    ncclComm_t comm_ = nullptr;
};

}  // namespace

bool built_with_nccl() { return true; }

std::shared_ptr<ProcessGroup> init_nccl(std::shared_ptr<ProcessGroup> mpi) {
    if (!mpi || mpi->backend_name() != "mpi") throw std::invalid_argument("init_nccl: needs the mpi process group");
    return std::make_shared<NcclProcessGroup>(std::move(mpi));
}

}  // namespace gg::dist

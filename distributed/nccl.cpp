// nccl.cpp — the process group over NCCL, for tensors on the GPU.
//
// NCCL's collectives run as kernels on a CUDA stream, GPU to GPU (NVLink, PCIe or the
// network), without a copy to the host. They are queued on the library's own stream
// (cuda/launch.h: current_stream()), after the backward kernels that made the gradients and
// before the optimiser's, so nothing waits on the host. The ranks find each other through a
// unique id that rank 0 draws (ncclGetUniqueId) and sends to the others over MPI, which
// started them; CPU tensors (a step's loss, a flag) still go through MPI.
//
// The watchdog. An NCCL kernel waiting for a rank that never comes spins on the GPU for ever,
// and the host waits with it at its next synchronisation (a copy of the loss, a barrier), where
// no MPI_Test can interrupt it. So each collective is marked by a CUDA event as it is queued,
// and a thread looks at the oldest unfinished one every 50 ms, with the patience of the mpi
// backend (distributed/patience.h: --rank-timeout, and a Ctrl-C ends the wait). When it gives up, it
// aborts the communicator (ncclCommAbort ends NCCL's kernels, so the host's wait returns), and
// the next call into this group throws the verdict on the main thread, where the app ends the
// job as it does for MPI, the last checkpoint whole. If the main thread does not come back
// within after_stop_s, the watchdog ends the process itself, with the verdict as its one line.
#include <cuda_runtime_api.h>
// The C API only: without these, mpi.h also pulls in Open MPI's deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "distributed/patience.h"
#include "distributed/process_group.h"

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
// the mpi backend (distributed/mpi.cpp) sums in float32 and rounds once.
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
        cudaGetDevice(&device_);
        watchdog_ = std::thread([this] { watch(); });
    }
    ~NcclProcessGroup() override {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            closing_ = true;
        }
        wake_.notify_one();
        watchdog_.join();
        for (const Pending& p : pending_) cudaEventDestroy(p.done);
        if (!aborted_) ncclCommDestroy(comm_);
    }

    int rank() const override { return mpi_->rank(); }
    int world_size() const override { return mpi_->world_size(); }
    int local_rank() const override { return mpi_->local_rank(); }
    std::string backend_name() const override { return "nccl"; }

    void all_reduce(const Tensor& x, ReduceOp op) override {
        rethrow_verdict();
        if (x.defined() && x.device() == Device::CPU) return mpi_->all_reduce(x, op);
        check_reducible(x, "all_reduce");
        if (checking_collectives()) check_same_layout(*mpi_, x, "all_reduce");
        queue("all_reduce on the GPU", [&] {
            check(ncclAllReduce(address(x), address(x), size_t(x.numel()), nccl_type(x.dtype()),
                                op == ReduceOp::mean ? ncclAvg : ncclSum, comm_, cuda::current_stream()),
                  "ncclAllReduce");
        });
        x.bump_version();
    }

    void broadcast(const Tensor& x, int root) override {
        rethrow_verdict();
        if (x.defined() && x.device() == Device::CPU) return mpi_->broadcast(x, root);
        check_reducible(x, "broadcast");
        if (root < 0 || root >= world_size())
            throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is outside [0, " +
                                        std::to_string(world_size()) + ")");
        if (checking_collectives()) check_same_layout(*mpi_, x, "broadcast");
        queue("broadcast on the GPU", [&] {
            check(ncclBroadcast(address(x), address(x), size_t(x.numel()), nccl_type(x.dtype()), root, comm_,
                                cuda::current_stream()),
                  "ncclBroadcast");
        });
        x.bump_version();
    }

    std::vector<int64_t> all_gather(const std::vector<int64_t>& mine) override {
        rethrow_verdict();
        return mpi_->all_gather(mine);
    }
    // The loss, the stop flags and the checks go through mpi_, which polls with these limits;
    // the watchdog bounds the NCCL kernels by the same.
    void set_wait_limits(const WaitLimits& limits) override {
        std::lock_guard<std::mutex> lock(mutex_);
        limits_ = limits;
        mpi_->set_wait_limits(limits);
    }

    void barrier() override {
        rethrow_verdict();
        const cudaError_t synced = cudaStreamSynchronize(cuda::current_stream());
        rethrow_verdict();  // the watchdog's abort is what let the wait return
        if (synced != cudaSuccess) throw std::runtime_error("barrier: cudaStreamSynchronize failed");
        mpi_->barrier();
    }

    [[noreturn]] void abort(int code) override {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!aborted_) ncclCommAbort(comm_), aborted_ = true;
        }
        mpi_->abort(code);
        std::_Exit(code);  // not reached: abort() ends the process
    }

private:
    // A collective in the GPU's queue: the event that completes after it, when it was queued.
    struct Pending {
        cudaEvent_t done;
        const char* op;
        Patience::clock::time_point queued;
    };

    // Queues one NCCL call and the event that marks its end, for the watchdog.
    // The lock is not held across the call: NCCL connects to the peers on a communicator's
    // first collective, which can itself wait for a rank that never comes, and the watchdog
    // must still be able to abort it (ncclCommAbort may be called from another thread).
    template <class Call>
    void queue(const char* op, Call&& call) {
        const auto queued = Patience::clock::now();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (aborted_) throw CollectiveAbandoned(std::string(op) + ": the communicator was aborted");
            in_call_ = {op, queued};
        }
        call();
        cudaEvent_t done;
        if (cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess ||
            cudaEventRecord(done, cuda::current_stream()) != cudaSuccess)
            throw std::runtime_error(std::string(op) + ": cannot record a CUDA event after it");
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.push_back({done, op, queued});
        in_call_.reset();
    }

    // The watchdog gave up: its verdict reaches the main thread here, once.
    void rethrow_verdict() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!verdict_) return;
        verdict_taken_ = true;
        std::rethrow_exception(verdict_);
    }

    // The watchdog thread: every 50 ms, retire the finished collectives and judge the oldest
    // unfinished one; an error NCCL reports (a peer's connection lost) ends the wait at once.
    void watch() {
        cudaSetDevice(device_);
        std::optional<Patience> patience;  // for pending_.front()
        std::optional<Patience::clock::time_point> verdict_at;
        std::unique_lock<std::mutex> lock(mutex_);
        while (!closing_) {
            wake_.wait_for(lock, std::chrono::milliseconds(50));
            if (closing_) break;
            const auto now = Patience::clock::now();
            if (verdict_) {  // the main thread has not come back to take it: end the process here
                if (!verdict_taken_ && now - *verdict_at > std::chrono::duration<double>(limits_.after_stop_s))
                    end_process();
                continue;
            }
            while (!pending_.empty() && cudaEventQuery(pending_.front().done) == cudaSuccess) {
                cudaEventDestroy(pending_.front().done);
                pending_.pop_front();
                patience.reset();
            }
            // The oldest collective not yet finished: in the queue, or still being queued.
            const char* op = !pending_.empty() ? pending_.front().op : in_call_ ? in_call_->first : nullptr;
            if (!op) continue;
            if (!patience) patience.emplace(op, !pending_.empty() ? pending_.front().queued : in_call_->second);
            try {
                ncclResult_t async = ncclSuccess;
                ncclCommGetAsyncError(comm_, &async);
                if (async != ncclSuccess && async != ncclInProgress)
                    throw CollectiveAbandoned(std::string(op) + ": " + ncclGetErrorString(async));
                patience->check(limits_, now);
            } catch (const CollectiveAbandoned&) {
                verdict_ = std::current_exception();
                verdict_at = now;
                ncclCommAbort(comm_);
                aborted_ = true;
            }
        }
    }

    [[noreturn]] void end_process() {
        int code = 1;
        try {
            std::rethrow_exception(verdict_);
        } catch (const Interrupted& e) {
            code = 128 + (limits_.stop ? limits_.stop->load() : 2);
            std::fprintf(stderr, "rank %d: %s\n", rank(), e.what());
        } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: %s\n", rank(), e.what());
        }
        std::fflush(stderr);
        std::_Exit(code);
    }

    static void* address(const Tensor& x) {
        return static_cast<char*>(x.impl()->storage->data) + x.offset() * dtype_size(x.dtype());
    }
    std::shared_ptr<ProcessGroup> mpi_;
    ncclComm_t comm_ = nullptr;
    int device_ = 0;
    std::mutex mutex_;  // guards everything below, limits_ and comm_'s abort
    std::condition_variable wake_;
    std::deque<Pending> pending_;
    std::optional<std::pair<const char*, Patience::clock::time_point>> in_call_;  // an NCCL call under way
    std::exception_ptr verdict_;
    bool verdict_taken_ = false, aborted_ = false, closing_ = false;
    std::thread watchdog_;  // last: started when the rest is ready
};

}  // namespace

bool built_with_nccl() { return true; }

std::shared_ptr<ProcessGroup> init_nccl(std::shared_ptr<ProcessGroup> mpi) {
    if (!mpi || mpi->backend_name() != "mpi") throw std::invalid_argument("init_nccl: needs the mpi process group");
    return std::make_shared<NcclProcessGroup>(std::move(mpi));
}

}  // namespace gg::dist

// mpi.cpp — the process group over MPI: all-reduce, broadcast, barrier and all-gather on
// MPI_COMM_WORLD. CPU tensors are passed to MPI as they are; a CUDA tensor goes through a
// host copy (slow, but it works wherever MPI does; the nccl backend keeps it on the GPU).
// MPI has no bfloat16: a bf16 tensor is summed in float32 (all_reduce) or sent as its 16-bit
// patterns (broadcast).
// Each collective is started non-blocking (MPI_Iallreduce, ...) and waited for by polling
// MPI_Test, so that a wait can end (WaitLimits in process_group.h): a blocking MPI_Allreduce
// waits for a rank that never comes for ever, deaf to Ctrl-C.
// The C API only: without these, mpi.h also pulls in Open MPI's deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "distributed/patience.h"
#include "distributed/process_group.h"

namespace gg::dist {

namespace {

void check(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw std::runtime_error(std::string(call) + ": " + std::string(text, length));
}

// Polls `request` until it completes, or the limits say to give up (distributed/patience.h). The
// first milliseconds spin (a collective between ready ranks takes microseconds); after that it
// sleeps a millisecond between polls rather than burn a core waiting for a rank that is not there.
void wait(MPI_Request& request, const WaitLimits& limits, const char* op) {
    Patience patience(op, Patience::clock::now());
    for (;;) {
        int done = 0;
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) return;
        if (patience.check(limits, Patience::clock::now()) > 0.01)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// bf16 only for moving bits (broadcast): MPI cannot add two of them.
MPI_Datatype mpi_type(DType dtype) {
    return dtype == DType::f32 ? MPI_FLOAT : dtype == DType::bf16 ? MPI_UINT16_T : MPI_DOUBLE;
}

// MPI counts elements in an int: a larger tensor goes in pieces of at most 2³⁰.
template <class Call>
void in_pieces(const Tensor& x, Call call) {
    constexpr int64_t kPiece = int64_t(1) << 30;
    char* base = static_cast<char*>(x.impl()->storage->data) + x.offset() * dtype_size(x.dtype());
    for (int64_t at = 0; at < x.numel(); at += kPiece)
        call(base + at * dtype_size(x.dtype()), int(std::min(kPiece, x.numel() - at)));
}

class MpiProcessGroup : public ProcessGroup {
public:
    MpiProcessGroup() {
        int initialized = 0;
        MPI_Initialized(&initialized);
        if (!initialized) check(MPI_Init(nullptr, nullptr), "MPI_Init");
        // Errors come back as codes (then exceptions) rather than ending the process inside MPI.
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &world_);
        MPI_Comm local;  // the ranks that share this machine's memory
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &local_rank_);
        MPI_Comm_free(&local);
        // Rank 0's choice for every rank: checking on some ranks only would itself pair
        // collectives that do not match (mpirun's -x reaches only the first program of A : B).
        int checking = checking_collectives();
        MPI_Bcast(&checking, 1, MPI_INT, 0, MPI_COMM_WORLD);
        set_checking_collectives(checking != 0);
    }
    // Not after a collective was abandoned: MPI_Finalize would wait for it.
    ~MpiProcessGroup() override {
        if (!abandoned_) MPI_Finalize();
    }

    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    int local_rank() const override { return local_rank_; }
    std::string backend_name() const override { return "mpi"; }

    void all_reduce(const Tensor& x, ReduceOp op) override {
        check_reducible(x, "all_reduce");
        check_not_abandoned("all_reduce");
        if (checking_collectives()) check_same_layout(*this, x, "all_reduce");
        on_host(x, [&](const Tensor& h) {
            // MPI has no bfloat16 type, and a sum kept in bfloat16 would round at every hop of the
            // ring (each partial sum to 8 significant bits). So a bf16 tensor is widened into a
            // float32 buffer (exactly), summed and divided there, and rounded to bf16 once.
            const Tensor sums = h.dtype() == DType::bf16 ? h.to(DType::f32) : h;
            in_pieces(sums, [&](void* data, int count) {
                MPI_Request request;
                check(MPI_Iallreduce(MPI_IN_PLACE, data, count, mpi_type(sums.dtype()), MPI_SUM, MPI_COMM_WORLD,
                                     &request),
                      "MPI_Iallreduce");
                wait_for(request, "all_reduce");
            });
            if (op == ReduceOp::mean) divide(sums, world_);
            if (sums.dtype() != h.dtype()) h.copy_(sums);
        });
    }

    void broadcast(const Tensor& x, int root) override {
        check_reducible(x, "broadcast");
        if (root < 0 || root >= world_)
            throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is outside [0, " +
                                        std::to_string(world_) + ")");
        check_not_abandoned("broadcast");
        if (checking_collectives()) check_same_layout(*this, x, "broadcast");
        on_host(x, [&](const Tensor& h) {
            in_pieces(h, [&](void* data, int count) {
                MPI_Request request;
                check(MPI_Ibcast(data, count, mpi_type(h.dtype()), root, MPI_COMM_WORLD, &request), "MPI_Ibcast");
                wait_for(request, "broadcast");
            });
        });
    }

    void barrier() override {
        check_not_abandoned("barrier");
        MPI_Request request;
        check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
        wait_for(request, "barrier");
    }

    std::vector<int64_t> all_gather(const std::vector<int64_t>& mine) override {
        if (mine.size() > size_t(INT_MAX)) throw std::invalid_argument("all_gather: more than INT_MAX values");
        check_not_abandoned("all_gather");
        std::vector<int64_t> all(mine.size() * size_t(world_));
        MPI_Request request;
        check(MPI_Iallgather(mine.data(), int(mine.size()), MPI_INT64_T, all.data(), int(mine.size()), MPI_INT64_T,
                             MPI_COMM_WORLD, &request),
              "MPI_Iallgather");
        wait_for(request, "all_gather");
        return all;
    }

    [[noreturn]] void abort(int code) override {
        MPI_Abort(MPI_COMM_WORLD, code);
        std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
    }

private:
    void wait_for(MPI_Request& request, const char* op) {
        try {
            wait(request, limits_, op);
        } catch (const CollectiveAbandoned&) {
            abandoned_ = true;
            throw;
        }
    }
    // Before a new collective: none may start after one was abandoned (its ranks are out of step).
    void check_not_abandoned(const char* op) const {
        if (abandoned_)
            throw CollectiveAbandoned(std::string(op) + ": an earlier collective was abandoned; the job has to end");
    }
    // Runs `work` on x itself when it is on the CPU, else on a host copy written back after.
    template <class Work>
    static void on_host(const Tensor& x, Work work) {
        if (x.device() == Device::CPU) {
            work(x);
            x.bump_version();
            return;
        }
        const Tensor host = x.to(Device::CPU).contiguous();
        work(host);
        x.copy_(host.to(x.device()));
    }
    static void divide(const Tensor& x, int n) {
        if (x.dtype() == DType::f32)
            for (float* p = x.data<float>(), *end = p + x.numel(); p != end; ++p) *p /= float(n);
        else
            for (double* p = x.data<double>(), *end = p + x.numel(); p != end; ++p) *p /= double(n);
    }
    int rank_ = 0, world_ = 1, local_rank_ = 0;
    bool abandoned_ = false;
};

}  // namespace

bool built_with_mpi() { return true; }

std::shared_ptr<ProcessGroup> init_mpi() {
    static std::weak_ptr<ProcessGroup> world;  // MPI may be initialised once per process
    if (auto alive = world.lock()) return alive;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) throw std::runtime_error("init_mpi: MPI was finalised in this process and cannot start again");
    auto group = std::make_shared<MpiProcessGroup>();
    world = group;
    return group;
}

}  // namespace gg::dist

// mpi.cpp — the process group over MPI: MPI_Allreduce, MPI_Bcast and MPI_Barrier on
// MPI_COMM_WORLD. CPU tensors are passed to MPI as they are; a CUDA tensor goes through a
// host copy (slow, but it works wherever MPI does; the nccl backend keeps it on the GPU).
// MPI has no bfloat16: a bf16 tensor is summed in float32 (all_reduce) or sent as its 16-bit
// patterns (broadcast).
// The C API only: without these, mpi.h also pulls in Open MPI's deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "dist/process_group.h"

namespace gg::dist {

namespace {

void check(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw std::runtime_error(std::string(call) + ": " + std::string(text, length));
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
    }
    ~MpiProcessGroup() override { MPI_Finalize(); }

    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    int local_rank() const override { return local_rank_; }
    std::string backend_name() const override { return "mpi"; }

    void all_reduce(const Tensor& x, ReduceOp op) override {
        check_reducible(x, "all_reduce");
        on_host(x, [&](const Tensor& h) {
            // MPI has no bfloat16 type, and a sum kept in bfloat16 would round at every hop of the
            // ring (each partial sum to 8 significant bits). So a bf16 tensor is widened into a
            // float32 buffer (exactly), summed and divided there, and rounded to bf16 once.
            const Tensor sums = h.dtype() == DType::bf16 ? h.to(DType::f32) : h;
            in_pieces(sums, [&](void* data, int count) {
                check(MPI_Allreduce(MPI_IN_PLACE, data, count, mpi_type(sums.dtype()), MPI_SUM, MPI_COMM_WORLD),
                      "MPI_Allreduce");
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
        on_host(x, [&](const Tensor& h) {
            in_pieces(h, [&](void* data, int count) {
                check(MPI_Bcast(data, count, mpi_type(h.dtype()), root, MPI_COMM_WORLD), "MPI_Bcast");
            });
        });
    }

    void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

    [[noreturn]] void abort(int code) override {
        MPI_Abort(MPI_COMM_WORLD, code);
        std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
    }

private:
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

// process_group.h — the processes of one data-parallel job, and what they do together.
//
// N copies of one program (started by `mpirun -np N`) each hold a rank in [0, N). They
// agree on values through collective calls, which every rank makes in the same order:
//
//   all_reduce(x, sum):   x ← x₀ + x₁ + … + x_{N−1} on every rank (mean: divided by N)
//   broadcast(x, root):   x ← x_root on every rank
//   barrier():            returns once every rank has called it
//
// A ring all-reduce (what MPI and NCCL use for large buffers) cuts x into N chunks; in N−1
// steps each rank passes one chunk on and adds the one it receives (reduce-scatter), then in
// N−1 more it passes the finished chunks round (all-gather). Each rank sends 2(N−1)/N of x,
// whatever N: the cost of averaging gradients barely grows with the number of processes.
//
// Backends: "mpi" (distributed/mpi.cpp: CPU tensors; CUDA tensors through a copy to the host) and
// "nccl" (distributed/nccl.cpp: CUDA tensors, on the GPU). Each is built when its library is found
// (meson.build); a build without MPI trains in one process only.
#pragma once
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace gg::dist {

enum class ReduceOp { sum, mean };

// How long a collective waits for the other ranks. A rank that stops answering (SIGSTOP, a
// hung device, a lost machine) would otherwise hold every other rank inside its next
// collective for ever; so each wait polls (MPI_Test) and gives up after `timeout_s` with
// RankTimeout. Once `stop` (a signal handler's flag) is non-zero, it gives up `after_stop_s`
// later with Interrupted: a Ctrl-C still ends a job whose other ranks do not answer, and one
// whose ranks do answer in time still stops at the step boundary (Trainer::run).
struct WaitLimits {
    double timeout_s = 300;
    double after_stop_s = 10;
    const std::atomic<int>* stop = nullptr;
};

// A collective gave up (WaitLimits): its request is left open, so the process cannot go on
// with MPI, nor finalise it; the job has to end (ProcessGroup::abort).
struct CollectiveAbandoned : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct RankTimeout : CollectiveAbandoned {
    using CollectiveAbandoned::CollectiveAbandoned;
};
struct Interrupted : CollectiveAbandoned {
    using CollectiveAbandoned::CollectiveAbandoned;
};

class ProcessGroup {
public:
    virtual ~ProcessGroup() = default;
    virtual int rank() const = 0;
    virtual int world_size() const = 0;
    // This rank's index among the ranks on its own machine: which GPU it takes.
    virtual int local_rank() const = 0;
    virtual std::string backend_name() const = 0;  // "mpi", "nccl"
    // In place, on a contiguous f32, f64 or bf16 tensor; every rank passes the same shape and
    // dtype. A bf16 tensor is summed in float32 and rounded once at the end (mpi: MPI has no
    // bfloat16 type), or as ncclBfloat16 on the GPU (nccl). Throws std::invalid_argument naming
    // the dtype or layout it cannot take.
    virtual void all_reduce(const Tensor& x, ReduceOp op) = 0;
    virtual void broadcast(const Tensor& x, int root) = 0;
    virtual void barrier() = 0;
    // Every rank passes the same count of values; every rank gets all of them, rank 0's first:
    // (world_size × mine.size()), row r from rank r.
    virtual std::vector<int64_t> all_gather(const std::vector<int64_t>& mine) = 0;
    virtual void set_wait_limits(const WaitLimits& limits) { limits_ = limits; }
    const WaitLimits& wait_limits() const { return limits_; }
    // Ends every process of the job with `code` (after one rank failed alone, so that the
    // others do not wait for it forever).
    [[noreturn]] virtual void abort(int code) = 0;

protected:
    WaitLimits limits_;
};

// Whether this process was started by an MPI launcher (mpirun, srun with PMIx): its
// environment names a world size.
bool launched_by_mpi();
// This process's rank as the launcher's environment names it (0 when none does), for what
// happens before MPI starts: only rank 0 reports a bad command line.
int launcher_rank();

// The world of the processes mpirun started, over MPI (MPI_Init on the first call).
// Throws std::runtime_error when this build has no MPI (meson found none).
std::shared_ptr<ProcessGroup> init_mpi();
bool built_with_mpi();

// The same world over NCCL on the GPU of local_rank(), its unique id sent from rank 0 by
// `mpi` (as NCCL's own examples do). Throws when this build has no NCCL.
std::shared_ptr<ProcessGroup> init_nccl(std::shared_ptr<ProcessGroup> mpi);
bool built_with_nccl();

// Checks that `x` is something a backend can reduce: contiguous, f32, f64 or bf16.
void check_reducible(const Tensor& x, const char* op);

// Ranks that pass tensors of different sizes to one collective corrupt memory or hang inside
// MPI. With checking on, every all_reduce and broadcast first gathers each rank's element
// count and dtype (a fixed-size all_gather, safe whatever they are) and throws
// std::logic_error on every rank, naming the first rank that differs from rank 0. On in debug
// builds and where the environment sets GG_CHECK_COLLECTIVES=1 (the tests); it costs one
// small collective per call.
bool checking_collectives();
void set_checking_collectives(bool on);
void check_same_layout(ProcessGroup& group, const Tensor& x, const char* op);

}  // namespace gg::dist

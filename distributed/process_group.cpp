#include "distributed/process_group.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gatedgrad_config.h"

namespace gg::dist {

bool launched_by_mpi() {
    // Open MPI's mpirun, then PMIx (Open MPI 5, Slurm), then MPICH's Hydra.
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
        if (std::getenv(name)) return true;
    return false;
}

int launcher_rank() {
    for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
        if (const char* value = std::getenv(name)) return std::atoi(value);
    return 0;
}

void check_reducible(const Tensor& x, const char* op) {
    if (!x.defined()) throw std::invalid_argument(std::string(op) + ": the tensor is undefined");
    if (!x.is_contiguous())
        throw std::invalid_argument(std::string(op) + ": the tensor of shape " + shape_str(x.shape()) +
                                    " is not contiguous (reduce a contiguous copy)");
    if (x.dtype() != DType::f32 && x.dtype() != DType::f64 && x.dtype() != DType::bf16)
        throw std::invalid_argument(std::string(op) + ": dtype " + dtype_name(x.dtype()) +
                                    " is not one it takes (f32, f64, bf16)");
}

namespace {
#ifdef NDEBUG
constexpr bool kDebugBuild = false;
#else
constexpr bool kDebugBuild = true;
#endif
std::atomic<bool> checking{kDebugBuild || (std::getenv("GG_CHECK_COLLECTIVES") &&
                                           std::string(std::getenv("GG_CHECK_COLLECTIVES")) == "1")};
}  // namespace

bool checking_collectives() { return checking.load(); }
void set_checking_collectives(bool on) { checking.store(on); }

void check_same_layout(ProcessGroup& group, const Tensor& x, const char* op) {
    const std::vector<int64_t> all = group.all_gather({x.numel(), int64_t(x.dtype())});
    const auto layout = [&](int r) {
        return std::to_string(all[2 * r]) + " elements of " + dtype_name(DType(all[2 * r + 1]));
    };
    for (int r = 1; r < group.world_size(); ++r)
        if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
            throw std::logic_error(std::string(op) + ": rank " + std::to_string(r) + " passes " + layout(r) +
                                   ", rank 0 " + layout(0) + " (every rank must pass the same)");
}

#if !GG_HAVE_MPI
bool built_with_mpi() { return false; }
std::shared_ptr<ProcessGroup> init_mpi() {
    throw std::runtime_error(
        "built without MPI, so it cannot train on the processes mpirun started: install Open MPI (tools/setup: "
        "libopenmpi-dev, openmpi-bin) and configure the build again");
}
#endif

#if !GG_HAVE_NCCL
bool built_with_nccl() { return false; }
std::shared_ptr<ProcessGroup> init_nccl(std::shared_ptr<ProcessGroup>) {
    throw std::runtime_error("this gatedgrad was built without NCCL (it needs nvcc and nccl.h; see README)");
}
#endif

}  // namespace gg::dist

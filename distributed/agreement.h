// agreement.h — before a data-parallel job's first step, its ranks prove they run the same job.
//
// mpirun starts N programs that should be copies, but each reads its own command line,
// config file and data (`mpirun -np 1 A : -np 1 B`, per-node settings, node-local corpora).
// Ranks that disagree on the model size pass all_reduce buffers of different sizes (memory
// corruption inside MPI); on --eval-every or --steps they make different numbers of
// collective calls (a hang); on --lr or --seed they train silently apart while the run
// folder records rank 0's settings alone. So each rank turns what must agree into named
// fields, and rank 0's are compared with every other rank's, field by field, in fixed-size
// collectives only (a 64-bit hash of each field, then the two values of the first that
// differs), before any collective whose size depends on them.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/process_group.h"

namespace gg::dist {

// (name, value) pairs, in the order they should be checked: the first that differs is named.
using Fields = std::vector<std::pair<std::string, std::string>>;

struct Disagreement {
    int rank;                 // the lowest rank that differs from rank 0 on `field`
    std::string field;        // the first field, in order, on which some rank differs
    std::string value;        // that rank's value
    std::string rank0_value;  // rank 0's
    // "rank 1 disagrees with rank 0 on model.d_model: 64 vs 32"
    std::string message() const;
};

// Called by every rank with its own fields; every rank gets the same answer (none: all agree).
// Ranks with different lists of field names (another build of the program) disagree on
// "the list of fields".
std::optional<Disagreement> find_disagreement(ProcessGroup& group, const Fields& fields);

// Nested JSON objects as fields named by their paths ("model.attn.n_heads"), in order; a value
// is its JSON text.
Fields json_fields(const std::string& json);

}  // namespace gg::dist

#pragma once
// Memory before allocation: what a language model of some config would take (its weights, a
// forward pass, an analysis pass or a training step) and what this process may use, so that a
// config too large for the machine is refused with a message that names the field to blame.

#include <cstdint>
#include <string>

namespace gg::nn {

struct LMConfig;  // nn/transformer.h

// What a model of some config costs in memory, in bytes (float32): an estimate meant to be
// right within a factor of two, to refuse a config before allocating for it.
struct MemoryEstimate {
    double parameters = 0;      // the weights
    double training_state = 0;  // gradients and AdamW's two moments (training only)
    double activations = 0;     // what a forward pass of one batch holds (and backward keeps)
    double total() const { return parameters + training_state + activations; }
};

// What the memory is for: the weights alone, a forward pass of (batch, seq_len) tokens
// without gradients, one with its attention probabilities captured (analysis), or a
// training step (gradients, AdamW state, activations kept for backward).
enum class Workload { weights, inference, analysis, training };

MemoryEstimate estimate_memory(const LMConfig& config, Workload workload = Workload::weights, int64_t batch = 0,
                               int64_t seq_len = 0);
// The bytes this process may use: the least of the machine's physical memory, what
// `ulimit -v` (RLIMIT_AS) leaves above the address space already mapped and OpenBLAS's
// buffers (cpu/blas_buffers.h), and the cgroup v2
// memory.max of this process's group and every group above it ("max": no limit). The
// default budget below: a container's limit, not its host's memory, is where it is killed.
struct MemoryLimit {
    uint64_t bytes;
    const char* source;  // which of the three it is, for messages: "ulimit -v", ...
};
MemoryLimit memory_limit();
uint64_t memory_budget();  // memory_limit().bytes
// The smallest memory.max on the way from the group named in `proc_self_cgroup` (the text
// of /proc/self/cgroup, its "0::/path" line) up to the root of the hierarchy mounted at
// `mount`; UINT64_MAX when there is none (cgroup v1, no limit, files unreadable).
uint64_t cgroup_memory_max(const std::string& proc_self_cgroup, const std::string& mount = "/sys/fs/cgroup");
// Throws std::invalid_argument when estimate_memory(...) exceeds `budget`, naming the
// field that asks for the most (n_layers, vocab_size, ... or batch × seq_len) and the
// bytes the whole would need. Budget 0: memory_limit(), read once here, whose source the
// message names (read twice, it moves with what the process has mapped in between).
void check_memory(const LMConfig& config, Workload workload = Workload::weights, int64_t batch = 0,
                  int64_t seq_len = 0, uint64_t budget = 0);

}  // namespace gg::nn

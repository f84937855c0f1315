// What a model costs in memory, and what this process may use: the estimates that refuse a
// config before anything is allocated for it (nn/memory.h).
#include "nn/memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "nn/transformer.h"
#include "cpu/blas_buffers.h"

namespace gg::nn {

namespace {

std::string bytes_str(double bytes) {
    char text[64];
    const bool gib = bytes >= double(1 << 30);
    std::snprintf(text, sizeof text, "%.3g bytes (%.1f %s)", bytes, bytes / double(gib ? 1 << 30 : 1 << 20),
                  gib ? "GiB" : "MiB");
    return text;
}

// The parts of a model's memory, each with the fields that make it large.
struct MemoryParts {
    double embeddings, positions, layers;  // parameters, in floats
    double activations;                    // floats
};

MemoryParts memory_parts(const LMConfig& c, Workload workload, int64_t batch, int64_t seq_len) {
    const double d = double(c.d_model), V = double(c.vocab_size), L = double(c.n_layers);
    const double H = std::max(1.0, double(c.attn.n_heads));
    const double dk = c.attn.head_size > 0 ? double(c.attn.head_size) : d / H;
    const double dq = H * dk, dkv = double(c.attn.kv_heads()) * dk;  // widths of Q and of K, V
    // K and V's weights: W_K, W_V, or MLA's W_DKV, W_UK, W_UV and its RoPE parts W_KR, W_QR
    const double dc = double(c.attn.kv_rank), dr = c.attn.rope_dim > 0 ? double(c.attn.rope_dim) : dk / 2;
    const double kv = dc > 0 ? dc * (d + 2 * dq) + d * dr * (H + 1) : 2 * d * dkv;
    const double E = c.ffn && c.n_experts > 0 ? double(c.n_experts) : 0, F = c.ffn ? double(c.ffn_hidden()) : 0;
    const double gate = c.attn.gated() ? d * dq : 0;  // element-wise at most d × h·dk
    const double ffn = E > 0 ? E * (3 * d * F + d) : 3 * d * F;
    MemoryParts p{};
    p.embeddings = V * d * (c.tie_embeddings ? 1 : 2);
    p.positions = c.positions == PositionEncoding::learned ? double(c.max_len) * d : 0;
    p.layers = L * (2 * d * dq + kv + gate + ffn + 2 * d);
    // Per token: the FFN width that runs (top_k experts of a MoE), then what one forward
    // holds at a time (a layer's tensors, the logits), or, for training, what every layer
    // keeps for backward; analysis keeps each layer's attention map (H × T per token).
    const double tokens = double(batch) * double(seq_len), F_run = E > 0 ? double(c.top_k) * F : F;
    switch (workload) {
        case Workload::weights: break;
        case Workload::inference: p.activations = tokens * (8 * d + 3 * F_run + 2 * dkv * L + 2 * V); break;
        case Workload::analysis:
            p.activations = tokens * (8 * d + 3 * F_run + 2 * dkv * L + 2 * V + L * (H * double(seq_len) + 2 * d));
            break;
        case Workload::training: p.activations = tokens * (L * (16 * d + 6 * F_run + E) + 3 * V); break;
    }
    return p;
}

}  // namespace

MemoryEstimate estimate_memory(const LMConfig& config, Workload workload, int64_t batch, int64_t seq_len) {
    const MemoryParts p = memory_parts(config, workload, batch, seq_len);
    MemoryEstimate m;
    m.parameters = 4 * (p.embeddings + p.positions + p.layers);
    m.training_state = workload == Workload::training ? 3 * m.parameters : 0;  // gradients, exp_avg, exp_avg_sq
    m.activations = 4 * p.activations;
    return m;
}

uint64_t cgroup_memory_max(const std::string& proc_self_cgroup, const std::string& mount) {
    std::istringstream lines(proc_self_cgroup);
    std::string line;
    std::filesystem::path group;
    while (std::getline(lines, line))
        if (line.starts_with("0::")) group = line.substr(3);  // the v2 hierarchy's line
    if (group.empty()) return UINT64_MAX;
    uint64_t least = UINT64_MAX;
    for (std::filesystem::path at = group.lexically_normal();; at = at.parent_path()) {
        std::ifstream in(std::filesystem::path(mount) / at.relative_path() / "memory.max");
        uint64_t bytes = 0;
        if (in >> bytes) least = std::min(least, bytes);  // "max" fails to parse: no limit here
        if (at == at.parent_path() || at.empty()) break;
    }
    return least;
}

MemoryLimit memory_limit() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
    MemoryLimit least{pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : uint64_t(1) << 34,
                      "this machine's memory"};  // 16 GiB if unknown
    if (const uint64_t address_space = address_space_left(); address_space != UINT64_MAX) {
        // OpenBLAS's buffers count as taken: they are mapped at the first GEMMs (cpu/blas_buffers.h).
        const uint64_t left = address_space > blas_buffer_bytes() ? address_space - blas_buffer_bytes() : 0;
        if (left < least.bytes) least = {left, "what ulimit -v leaves"};
    }
    std::ifstream cgroup_file("/proc/self/cgroup");
    std::stringstream cgroup;
    cgroup << cgroup_file.rdbuf();
    if (const uint64_t group = cgroup_memory_max(cgroup.str()); group < least.bytes)
        least = {group, "the cgroup's memory.max"};
    return least;
}

uint64_t memory_budget() { return memory_limit().bytes; }

void check_memory(const LMConfig& c, Workload workload, int64_t batch, int64_t seq_len, uint64_t budget) {
    const double total = estimate_memory(c, workload, batch, seq_len).total();
    const char* source = nullptr;  // where the budget comes from, when it is the process's limit
    if (budget == 0) {
        const MemoryLimit limit = memory_limit();
        budget = limit.bytes, source = limit.source;
    }
    if (total <= double(budget)) return;
    // Blame the part that asks for the most: a parameter part counts 4 times in training.
    const MemoryParts p = memory_parts(c, workload, batch, seq_len);
    const double per_parameter = workload == Workload::training ? 4 : 1;
    const std::string d = "d_model " + std::to_string(c.d_model);
    std::pair<double, std::string> blame{per_parameter * p.layers,
                                         "n_layers " + std::to_string(c.n_layers) + " × (" + d + ", d_ff " +
                                             std::to_string(c.ffn_hidden()) + ", n_experts " +
                                             std::to_string(c.n_experts) + ")"};
    blame = std::max(blame, {per_parameter * p.embeddings, "vocab_size " + std::to_string(c.vocab_size) + " × " + d});
    blame = std::max(blame, {per_parameter * p.positions, "max_len " + std::to_string(c.max_len) + " × " + d});
    blame = std::max(blame, {p.activations, "batch " + std::to_string(batch) + " × seq_len " + std::to_string(seq_len)});
    const char* purpose = workload == Workload::weights     ? "its weights"
                          : workload == Workload::training  ? "a training step"
                          : workload == Workload::analysis  ? "an analysis pass"
                                                            : "a forward pass";
    throw std::invalid_argument("LMConfig: " + blame.second + " asks for too much memory: " + purpose +
                                " would need about " + bytes_str(total) + ", more than the " + bytes_str(double(budget)) +
                                " available" + (source ? std::string(" (") + source + ")" : ""));
}

}  // namespace gg::nn

#include "distributed/agreement.h"

#include <nlohmann/json.hpp>

namespace gg::dist {

namespace {

// FNV-1a, 64 bits: a digest of one field, not a defence against someone forging one.
int64_t hash(const std::string& text) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return int64_t(h);
}

// Rank `root`'s text on every rank: its length, then its bytes (one per value).
std::string broadcast_text(ProcessGroup& group, const std::string& text, int root) {
    const size_t length = size_t(group.all_gather({int64_t(text.size())})[size_t(root)]);
    const Tensor bytes = zeros({int64_t(std::max<size_t>(length, 1))}, DType::f64);
    if (group.rank() == root)
        for (size_t i = 0; i < length; ++i) bytes.data<double>()[i] = double(static_cast<unsigned char>(text[i]));
    group.broadcast(bytes, root);
    std::string out(length, '\0');
    for (size_t i = 0; i < length; ++i) out[i] = char(static_cast<unsigned char>(bytes.data<const double>()[i]));
    return out;
}

void flatten(const nlohmann::ordered_json& j, const std::string& path, Fields& out) {
    if (j.is_object()) {
        for (const auto& [key, value] : j.items()) flatten(value, path.empty() ? key : path + "." + key, out);
        return;
    }
    out.emplace_back(path, j.dump());
}

}  // namespace

std::string Disagreement::message() const {
    return "rank " + std::to_string(rank) + " disagrees with rank 0 on " + field + ": " + value + " vs " + rank0_value;
}

std::optional<Disagreement> find_disagreement(ProcessGroup& group, const Fields& fields) {
    const int N = group.world_size();
    // First the list of names, so that the hashes below line up field by field.
    std::string names;
    for (const auto& [name, value] : fields) names += name + '\n';
    const std::vector<int64_t> lists = group.all_gather({int64_t(fields.size()), hash(names)});
    for (int r = 1; r < N; ++r)
        if (lists[2 * r] != lists[0] || lists[2 * r + 1] != lists[1]) {
            const std::string count = std::to_string(fields.size()) + (fields.size() == 1 ? " field" : " fields");
            return Disagreement{r, "the list of fields (another build of the program?)",
                                broadcast_text(group, count, r), broadcast_text(group, count, 0)};
        }
    std::vector<int64_t> mine;
    for (const auto& [name, value] : fields) mine.push_back(hash(value));
    const std::vector<int64_t> all = group.all_gather(mine);
    const size_t F = fields.size();
    for (size_t f = 0; f < F; ++f)
        for (int r = 1; r < N; ++r)
            if (all[size_t(r) * F + f] != all[f])
                return Disagreement{r, fields[f].first, broadcast_text(group, fields[f].second, r),
                                    broadcast_text(group, fields[f].second, 0)};
    return std::nullopt;
}

Fields json_fields(const std::string& json) {
    Fields out;
    flatten(nlohmann::ordered_json::parse(json), "", out);
    return out;
}

}  // namespace gg::dist

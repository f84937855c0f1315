// table.cpp — tutorial 15's report: each measure's mean over seeds (each seed's value is in
// results.json), one row per model, and part (c)'s rows side by side, full against hybrid. A run
// of some of the parts keeps what results.json holds of the others.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/results.h"
#include "hybrid.h"

using namespace tutorial;

namespace hybrid {

namespace {

// Part (c): per T, the full model's and the hybrid's rows (as measure_throughput wrote them, in
// that order) on one line, with the hybrid's share of the full model's speed.
void print_throughput(const json& rows) {
    std::printf("\n== (c) one sequence of T tokens, the G1 models untrained: tokens/s (median) and the bytes the caches "
                "hold after it\n");
    std::printf("| T | forward, full | hybrid | hybrid / full | train, full | hybrid | hybrid / full | KV cache, full "
                "| hybrid KV + state |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i + 1 < rows.size(); i += 2) {
        const json &full = rows[i], &hyb = rows[i + 1];
        const double ff = json_number(full["forward_tokens_per_s"]), hf = json_number(hyb["forward_tokens_per_s"]);
        const double ft = json_number(full["train_tokens_per_s"]), ht = json_number(hyb["train_tokens_per_s"]);
        std::printf("| %lld | %.0f | %.0f | %.2f | %s | %s | %s | %lld | %lld + %lld |\n",
                    (long long)full["T"].get<int64_t>(), ff, hf, hf / ff, format_or_dash("%.0f", ft).c_str(),
                    format_or_dash("%.0f", ht).c_str(), format_or_dash("%.2f", ht / ft).c_str(),
                    (long long)full["kv_cache_bytes"].get<int64_t>(), (long long)hyb["kv_cache_bytes"].get<int64_t>(),
                    (long long)hyb["linear_state_bytes"].get<int64_t>());
    }
}

}  // namespace

void report(const Runs& runs, const std::string& out) {
    const bool copy_ran = !runs.copy.empty(), high = !runs.high.empty();
    std::map<std::string, json> measured;  // per model name, what each part that ran measured
    if (copy_ran) {
        std::printf("\n== (a) Bigram-Backcopy, means over seeds 1-%lld, at the idle queries of the softmax layer, "
                    "layer %lld of %lld\n",
                    (long long)runs.setup.seeds, (long long)runs.layout.softmax_layer, (long long)runs.layout.layers);
        std::printf("| model | layers | top-1 | self | previous | α on BOS | top key's ‖v‖ / others' | gate | "
                    "α · gate | copies | t − 1 at triggers | linear decay |\n");
        std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (size_t i = 0; i < runs.copy.size(); ++i) {  // the controls alone, or every model
            const Architecture& a = copy_architectures()[i];
            const std::vector<json> copy = parse_all(runs.copy[i]);
            const auto mean = [&](const std::string& key) { return average(values_of(copy, key)); };
            std::printf("| %s | %s | %.3f | %.3f | %.3f | %.3f | %.2f | %s | %.3f | %.3f | %.3f | %s |\n",
                        a.name.c_str(), runs.layout.text(a).c_str(), mean("top1"), mean("self"), mean("previous"),
                        mean("alpha"), mean("top_value_ratio"), format_or_dash("%.3f", mean("gate")).c_str(),
                        mean("alpha_times_gate"), mean("copy_accuracy"), mean("trigger_previous"),
                        format_or_dash("%.3f", mean("linear_decay")).c_str());
            measured[a.name]["copy_task"] = copy;
        }
    }
    if (high) {
        std::printf("\n== (b) 07's LM at a too-high rate, means over seeds 1-%zu, on a validation batch, at the "
                    "full-attention layers: the share on BOS, over them all and over layers 3 and 7 (the hybrid's); "
                    "BOS cost: the loss past a %lld-position cache with BOS dropped minus kept, every full layer's "
                    "cache windowed, and then those of layers 3 and 7 alone, every other layer keeping the whole "
                    "text (for a hybrid the same reading)\n",
                    runs.high.front().size(), (long long)runs.eviction.cache);
        std::printf("| model | val loss | largest logit | gate (b) | on BOS (b) | on BOS, layers 3, 7 | BOS cost | "
                    "BOS cost, window on layers 3, 7 |\n");
        std::printf("|---|---|---|---|---|---|---|---|\n");
        for (size_t i = 0; i < architectures().size(); ++i) {
            const Architecture& a = architectures()[i];
            const std::vector<json> lm = parse_all(runs.high[i]);
            std::printf("| %s | %.3f | %s | %s | %.3f | %.3f | %+.4f | %+.4f |\n", a.name.c_str(),
                        average(values_of(lm, "val_loss")),
                        growth_text(average(values_of(lm, "largest_attention_logit"))).c_str(),
                        format_or_dash("%.3f", average(values_of(lm, "gate"))).c_str(),
                        average(values_of(lm, "bos_share")), average(values_of(lm, "bos_share_hybrid_full_layers")),
                        average(values_of(lm, "bos_cost")), average(values_of(lm, "bos_cost_hybrid_full_layers")));
            measured[a.name]["high_rate"] = lm;
        }
    }
    json throughput = runs.throughput.empty() ? json::array() : json::parse(runs.throughput);
    if (!throughput.empty()) print_throughput(throughput);
    if (out.empty()) return;
    const std::filesystem::path path = std::filesystem::path(out) / "results.json";
    const json before = std::filesystem::exists(path) ? json::parse(std::ifstream(path)) : json::object();
    json settings = before.contains("settings") ? before["settings"] : json::object();
    // One row per model of either part; a part that did not run keeps what results.json held.
    std::vector<Architecture> models = architectures();
    for (const Architecture& a : copy_architectures())
        if (std::ranges::none_of(models, [&](const Architecture& m) { return m.name == a.name; })) models.push_back(a);
    json rows = json::array();
    for (const Architecture& a : models) {
        json row{{"model", a.name}, {"others", gg::nn::kLayerTypes.name(a.others)}, {"g1", a.gated}};
        for (const auto& [part, ran] : {std::pair{"copy_task", copy_ran}, std::pair{"high_rate", high}}) {
            const json& from = ran ? measured[a.name] : json::object();
            if (from.contains(part)) row[part] = from[part];
            for (const json& old : before.value("models", json::array()))
                if (!ran && old["model"] == a.name && old.contains(part)) row[part] = old[part];
        }
        if (row.contains("copy_task") || row.contains("high_rate")) rows.push_back(row);
    }
    if (throughput.empty() && before.contains("throughput")) throughput = before["throughput"];
    const CopySetup& s = runs.setup;
    const RunSettings& h = runs.high_rate;
    if (copy_ran)
        settings["a"] = {{"task", "Bigram-Backcopy, tutorial 06 (a3)"}, {"layers", runs.layout.layers},
                         {"softmax_layer", runs.layout.softmax_layer}, {"heads", 1},
                         {"d_model", s.d_model}, {"steps", s.steps}, {"lr", s.lr}, {"weight_decay", s.weight_decay},
                         {"batch", s.batch}, {"seq_len", s.seq_len}, {"seeds", s.seeds}};
    if (high)
        settings["b"] = {{"layers", h.layers}, {"d_model", h.d_model}, {"heads", h.heads}, {"steps", h.steps},
                         {"lr", h.lr}, {"batch", h.batch}, {"seq_len", h.seq_len}, {"seeds", runs.high.front().size()},
                         {"eviction", {{"cache", runs.eviction.cache}, {"length", runs.eviction.length},
                                       {"sequences", runs.eviction.sequences}}}};
    std::filesystem::create_directories(out);
    write_json(path, json{{"settings", settings}, {"models", rows}, {"throughput", throughput}});
    std::printf("\nwrote %s/results.json\n", out.c_str());
}

}  // namespace hybrid

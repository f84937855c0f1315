// table.cpp — tutorial 14's report: each measure's mean over seeds (and each seed's value, in
// results.json), printed as one table, one row per remedy.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/results.h"
#include "remedies.h"

using namespace tutorial;

namespace sink_remedies {

namespace {

// The weight an idle query put on a sink, wherever the sink is: BOS and the slot for softmax's
// family (which sum to 1 with the rest), BOS's share of the row for sigmoid and softpick.
double on_a_sink(const Remedy& r, const std::vector<json>& seeds) {
    return is_softmax(r.score_fn) ? average(values_of(seeds, "alpha")) + average(values_of(seeds, "slot"))
                          : average(values_of(seeds, "alpha_normalised"));
}

}  // namespace

void report(const Runs& runs, const std::string& out) {
    const bool high = !runs.high.empty();
    std::printf("\n== idle queries of Bigram-Backcopy (a), the rolling cache (d)%s: means over seeds 1-%lld%s\n",
                high ? " and 07's LM at a too-high rate (b, c, d)" : "", (long long)runs.setup.seeds,
                high ? (" (a, d) and 1-" + std::to_string(runs.high.front().size()) + " (b, c, d)").c_str() : "");
    std::printf("| remedy | α on BOS | slot | row sum | on a sink | gate | copies | cache cost, BOS dropped | BOS kept |%s\n",
                high ? " val loss | largest logit | max abs h | LM: dropping BOS costs |" : "");
    std::printf("|---|---|---|---|---|---|---|---|---|%s\n", high ? "---|---|---|---|" : "");
    json rows = json::array();
    for (size_t i = 0; i < remedies().size(); ++i) {
        const Remedy& r = remedies()[i];
        const std::vector<json> idle = parse_all(runs.idle[i]);
        const auto mean = [&](const std::string& key) { return average(values_of(idle, key)); };
        const double within = mean("loss_within_cache");
        const double dropped = mean("loss_past_cache_first_dropped") - within;
        const double kept = mean("loss_past_cache_first_kept") - within;
        std::printf("| %s | %.3f | %s | %.3f | %.3f | %s | %.3f | %+.3f | %s |", r.name.c_str(), mean("alpha"),
                    has_slot(r.score_fn) ? format_or_dash("%.3f", mean("slot")).c_str() : "-", mean("row_sum"),
                    on_a_sink(r, idle), format_or_dash("%.3f", mean("gate")).c_str(), mean("copy_accuracy"), dropped,
                    format_or_dash("%+.3f", kept).c_str());
        json row{{"remedy", r.name}, {"on_a_sink", on_a_sink(r, idle)}, {"cache_cost_first_dropped", dropped},
                 {"cache_cost_first_kept", kept}, {"idle_queries", idle}};
        if (high) {
            const std::vector<json> lm = parse_all(runs.high[i]);
            // the same tokens past the cache scored both ways: what losing BOS costs the LM
            const double lm_dropping = average(values_of(lm, "loss_past_cache_first_dropped")) -
                                       average(values_of(lm, "loss_past_cache_first_kept"));
            std::printf(" %.3f | %s | %.1f | %s |", average(values_of(lm, "val_loss")),
                        growth_text(average(values_of(lm, "largest_attention_logit"))).c_str(),
                        average(values_of(lm, "max_abs_hidden")), format_or_dash("%+.3f", lm_dropping).c_str());
            row["lm_cost_of_dropping_first"] = lm_dropping;
            row["high_rate"] = lm;
        }
        std::printf("\n");
        rows.push_back(row);
    }
    if (out.empty()) return;
    const CopySetup& s = runs.setup;
    const RunSettings& h = runs.high_rate;
    json settings{{"a", {{"task", "Bigram-Backcopy, tutorial 06 (a3)"}, {"steps", s.steps}, {"lr", s.lr},
                         {"weight_decay", s.weight_decay}, {"batch", s.batch}, {"seq_len", s.seq_len},
                         {"seeds", s.seeds}}},
                  {"d", {{"cache", runs.eviction.cache}, {"length", runs.eviction.length},
                         {"sequences", runs.eviction.sequences}}}};
    if (high)
        settings["b"] = {{"layers", h.layers}, {"d_model", h.d_model}, {"heads", h.heads}, {"steps", h.steps},
                         {"lr", h.lr}, {"batch", h.batch}, {"seq_len", h.seq_len}, {"seeds", runs.high.front().size()}};
    std::filesystem::create_directories(out);
    write_json(std::filesystem::path(out) / "results.json", json{{"settings", settings}, {"remedies", rows}});
    std::printf("\nwrote %s/results.json\n", out.c_str());
}

}  // namespace sink_remedies

// report.h — tutorial 08's harness: the variants' table, the rankings and the result files.
// main.cpp runs the experiment; this is how its results are printed and written.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/results.h"
#include "gatedgrad.h"

namespace tutorial {

struct Variant {
    std::string group;       // which question the row answers
    std::string name;        // as printed in the table
    std::string short_name;  // under a bar in the pictures
    std::function<void(gg::nn::LMConfig&)> set;  // applied to the tiny preset's model
};

// One training run: a variant (an index into the list of variants) and a seed.
struct Run {
    size_t variant;
    uint64_t seed;
};

// Per variant, over seeds: mean ± half the range.
struct Row {
    Spread loss, share, gate, sparse, hidden;
};

// The rows of the table from every run's results (train_one's JSON, in the order of runs).
std::vector<Row> rows_of(const std::vector<Variant>& all, const std::vector<Run>& runs,
                         const std::vector<nlohmann::json>& results);
// Prints the table and returns it as CSV.
std::string print_table(const std::vector<Variant>& all, const std::vector<Row>& rows, int64_t seeds);
// The index of the variant with this short name; throws when there is none.
size_t index_of(const std::vector<Variant>& all, const std::string& short_name);
// Prints `title`, then the variants `names`, best (lowest validation loss) first.
void print_ranking(const char* title, std::vector<std::string> names, const std::vector<Variant>& all,
                   const std::vector<Row>& rows);
// The files in dir: every run (runs.csv, summary.json), the table (table.csv) and three
// pictures (Δ loss and first-token share per variant, the G1 model's plain and gated entropy).
void write_results(const std::filesystem::path& dir, int64_t steps, int64_t seeds, const std::vector<Variant>& all,
                   const std::vector<Run>& runs, const std::vector<nlohmann::json>& results, const std::vector<Row>& rows,
                   const std::string& table_csv, const std::vector<double>& plain, const std::vector<double>& gated);

}  // namespace tutorial

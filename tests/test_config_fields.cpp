// The table of settings (nn/config_fields.h): every member of the configs has a row, and every
// row goes through JSON, the command line (apps/config_options.h), the resume check and train's
// description of a run on its own, so that a field added as a row is known everywhere without
// another edit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cli.h"
#include "apps/config_options.h"
#include "nn/json_fields.h"
#include "nn/train/train_config.h"

using namespace gg;
using namespace gg::nn;

namespace {

// How many members an aggregate has: the most initializers T{...} takes.
struct AnyMember {
    template <class T>
    operator T() const;
};
template <class T, class... Given>
constexpr size_t member_count() {
    if constexpr (requires { T{Given{}..., AnyMember{}}; }) return member_count<T, Given..., AnyMember>();
    else return sizeof...(Given);
}

// A struct inside a TrainConfig, and the members of it that are not rows.
struct Region {
    const char* name;
    const void* start;
    size_t size, members;
    size_t nested;              // members that are structs with rows of their own
    std::vector<const char*> not_settings;
    bool holds(const void* p) const {
        return p >= start && static_cast<const char*>(p) < static_cast<const char*>(start) + size;
    }
};

// A config whose field `f` alone is changed, to a value its check accepts.
TrainConfig changed(const Field<TrainConfig>& f, TrainConfig c) {
    std::visit(
        [&](const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, Choice<TrainConfig>>) {
                const std::string now = v.name(c);
                for (const std::string& name : v.names())
                    if (name != now) return v.set(c, name);
                FAIL("choice " << f.key << " has one name");
            } else if constexpr (is_choice<V>) {  // a list: one value more
                auto names = v.name(c);
                names.push_back(v.names().front());
                v.set(c, names);
            } else if constexpr (std::is_same_v<V, Switch<TrainConfig>>) {
                v.member.at(c) = !v.member.get(c);
            } else if constexpr (std::is_same_v<V, Text<TrainConfig, std::string>>) {
                v.member.at(c) += "x";
            } else if constexpr (std::is_same_v<V, Text<TrainConfig, std::vector<std::string>>>) {
                v.member.at(c) = {"x"};
            } else {
                using T = std::decay_t<decltype(v.member.get(c))>;
                const T now = v.member.get(c);
                std::vector<T> candidates{T(now + 1), T(now / 2), T(now - 1), v.range.low, T(0.25)};
                for (const T x : candidates)
                    if (x != now && v.range.contains(x)) return void(v.member.at(c) = x);
                FAIL("no value for " << f.key);
            }
        },
        f.value);
    return c;
}

// TrainConfig::from_json without validate(): one field changed need not make a valid run.
TrainConfig read_back(const std::string& text) {
    JsonFields top("train config", text);
    TrainConfig c;
    if (std::string model; top.read_object("model", model)) {
        JsonFields fields("LMConfig", model);
        read_fields(fields, lm_config_fields(), c.model);
        fields.finish();
    }
    read_fields(top, train_config_fields(), c);
    top.finish();
    return c;
}

// The default config with its rule-given sizes written out, so that one field changed changes
// no other (d_model would move d_ff, n_heads the key/value heads).
TrainConfig base() {
    TrainConfig c;
    c.model = spelled_out(c.model);
    return c;
}

}  // namespace

TEST_CASE("config fields: every member of the configs is a row, a struct of rows, or named here as no setting") {
    TrainConfig c;
    const std::vector<Region> regions = {
        {"TrainConfig", &c, sizeof c, member_count<TrainConfig>(), 2, {}},  // model, split
        {"LMConfig", &c.model, sizeof c.model, member_count<LMConfig>(), 1, {}},  // attn
        // The block sets these from the model's: d_model, RoPE from positions, the norm's ε and
        // whether it is zero-centred; a language model's attention is causal.
        {"AttentionOptions", &c.model.attn, sizeof c.model.attn, member_count<AttentionOptions>(), 1,
         {"d_model", "rope", "qk_norm_eps", "qk_norm_zero_centred", "causal"}},
        {"RopeOptions", &c.model.attn.rope_options, sizeof c.model.attn.rope_options, member_count<RopeOptions>(), 0, {}},
        {"CorpusSplit", &c.split, sizeof c.split, member_count<CorpusSplit>(), 0, {}},
    };
    std::vector<size_t> rows(regions.size());
    std::vector<const void*> seen;
    for (const Field<TrainConfig>& f : run_fields()) {
        const void* at = address(f, c);
        INFO(std::string(f.key));
        CHECK(std::find(seen.begin(), seen.end(), at) == seen.end());  // no two rows for one member
        seen.push_back(at);
        size_t innermost = regions.size();
        for (size_t r = 0; r < regions.size(); ++r)
            if (regions[r].holds(at)) innermost = r;
        REQUIRE(innermost < regions.size());
        ++rows[innermost];
    }
    for (size_t r = 0; r < regions.size(); ++r) {
        const Region& g = regions[r];
        INFO(std::string(g.name) << " has " << g.members << " members: " << rows[r] << " rows, " << g.nested << " nested, "
                    << g.not_settings.size() << " that are no setting. A new member needs its row "
                    << "(nn/config_fields.h says where).");
        CHECK(rows[r] + g.nested + g.not_settings.size() == g.members);
    }
}

TEST_CASE("config fields: each row alone goes through JSON, and changes its own key only") {
    const TrainConfig plain = base();
    const nlohmann::json before = nlohmann::json::parse(plain.to_json());
    // The keys (model's as "model/key") whose values differ from the plain config's.
    const auto moved = [&](const nlohmann::json& after) {
        std::vector<std::string> keys;
        for (const auto& [key, value] : after.items())
            if (key == "model") {
                for (const auto& [k, v] : value.items())
                    if (before["model"][k] != v) keys.push_back("model/" + k);
            } else if (before[key] != value) {
                keys.push_back(key);
            }
        return keys;
    };
    for (const Field<TrainConfig>& f : run_fields()) {
        INFO(std::string(f.key));
        const TrainConfig c = changed(f, plain);
        REQUIRE(text(f, c) != text(f, plain));
        const std::string json = c.to_json();
        const bool model = address(f, c) >= static_cast<const void*>(&c.model) &&
                           address(f, c) < static_cast<const void*>(&c.model + 1);
        CHECK(moved(nlohmann::json::parse(json)) == std::vector<std::string>{(model ? "model/" : "") + std::string(f.key)});
        CHECK(read_back(json).to_json() == json);
    }
}

TEST_CASE("config fields: every flag sets its field alone, and --help shows the row's help and default") {
    const TrainConfig plain = base();
    for (const Field<TrainConfig>& f : with_flags(run_fields())) {
        INFO(std::string(f.key));
        const TrainConfig want = changed(f, plain);
        CLI::App app;
        ConfigOptions<TrainConfig> options(&app, with_flags(run_fields()));
        options.show_defaults(TrainConfig(), {});
        std::vector<std::string> args{f.flag};
        if (!std::holds_alternative<Switch<TrainConfig>>(f.value)) args.push_back(text(f, want));
        std::vector<const char*> argv{"train"};
        for (const std::string& a : args) argv.push_back(a.c_str());
        REQUIRE_NOTHROW(app.parse(int(argv.size()), argv.data()));
        TrainConfig got = plain;
        options.apply(got);
        for (const Field<TrainConfig>& other : run_fields())
            CHECK(text(other, got) == text(other, other.key == std::string(f.key) ? want : plain));
        CHECK(options.option(f.key)->get_description() ==
              std::string(f.help) + " (default " + text(f, TrainConfig()) + ")");
    }
}

TEST_CASE("config fields: a value out of a row's range is refused by the command line and by validate(), alike") {
    CLI::App app;
    ConfigOptions<TrainConfig> options(&app, with_flags(run_fields()));
    const char* argv[] = {"train", "--layers", "2000"};
    CHECK_THROWS_WITH(app.parse(3, argv), "--layers: must be a whole number between 0 and 1024, got 2000");
    TrainConfig c;
    c.model.n_layers = 2000;
    CHECK_THROWS_WITH_AS(c.validate(), "LMConfig: n_layers 2000 is outside [0, 1024]", std::invalid_argument);
    c = TrainConfig();
    c.split.val_fraction = 0;
    CHECK_THROWS_WITH_AS(c.validate(), "train config: val_fraction 0 is outside (0, 0.5]", std::invalid_argument);
    c = TrainConfig();
    c.lr = INFINITY;
    CHECK_THROWS_WITH_AS(c.validate(), "train config: lr inf is outside (0, inf)", std::invalid_argument);
    c = TrainConfig();
    c.precision = DType::f64;
    CHECK_THROWS_WITH_AS(c.validate(), "train config: precision float64 is not one of f32, bf16", std::invalid_argument);
    CHECK(Range<double>{0, 0.5, true}.words() == "above 0 and at most 0.5");
    CHECK(Range<double>{0}.words() == "a finite number at least 0");
    CHECK(Range<double>{0, 1, false, true}.text() == "[0, 1)");
}

TEST_CASE("config fields: a resumed run compares every row it may compare, and only that one") {
    const TrainConfig plain = base();
    for (const Field<TrainConfig>& f : run_fields()) {
        INFO(std::string(f.key));
        const auto diff = differences(run_fields(), plain, changed(f, plain));
        if (f.resume == Resume::not_compared) {
            CHECK(diff.empty());
        } else {
            REQUIRE(diff.size() == 1);
            CHECK(diff[0].field->key == std::string(f.key));
        }
    }
}

TEST_CASE("config fields: train's description of a run shows every setting a resumed run compares, changed alone") {
    // describe() writes the common settings into its sentences and lists the others that are
    // away from their defaults: a row it names as written but does not write fails here.
    const TrainConfig plain = base();
    const std::string before = describe(plain, 1000);
    CHECK(before.find("other") == std::string::npos);
    for (const Field<TrainConfig>& f : run_fields()) {
        INFO(std::string(f.key));
        if (f.resume != Resume::not_compared) CHECK(describe(changed(f, plain), 1000) != before);
    }
}

TEST_CASE("config fields: a config.json written before the table loads as it was, and is written back byte for byte") {
    // Written by gatedgrad train before the settings had rows, with every flag away from its
    // default (tests/reference/run_config.sh).
    std::ifstream in("tests/reference/run_config.json");
    REQUIRE(in);
    std::stringstream file_text;
    file_text << in.rdbuf();
    std::string json = file_text.str();
    if (!json.empty() && json.back() == '\n') json.pop_back();
    const TrainConfig c = TrainConfig::from_json(json);
    const TrainConfig plain;
    // The rows added since: the file has not got them, so they load as their defaults and are
    // written back beside the file's own fields, each as one line.
    const std::vector<std::string> added = {"layer_types",        "partial_rotary_factor", "score_fn",
                                            "kv_rank",            "rope_dim",              "linear_k_heads",
                                            "linear_v_heads",     "linear_k_head_size",    "linear_v_head_size",
                                            "linear_conv_kernel", "zero_centred_norm"};
    std::string written = c.to_json();
    for (const std::string& key : added) {
        const Field<TrainConfig>& f = *std::ranges::find(run_fields(), key, [](const auto& row) { return row.key; });
        CHECK(text(f, c) == text(f, plain));
        const std::string value = nlohmann::json::parse(plain.to_json())["model"][key].dump();  // quoted or not
        std::string line = "\n    \"" + key + "\": " + value + ",";
        if (written.find(line) == std::string::npos) line = ",\n    \"" + key + "\": " + value;  // the last member
        INFO(line);
        REQUIRE(written.find(line) != std::string::npos);
        written.erase(written.find(line), line.size());
    }
    CHECK(written == json);
    const nlohmann::json file = nlohmann::json::parse(json).flatten();
    // Every other field has a row, and every row with a flag was set away from its default there.
    CHECK(file.size() + added.size() == run_fields().size());
    for (const Field<TrainConfig>& f : run_fields()) {
        INFO(std::string(f.key));
        if (f.flag && std::ranges::find(added, f.key) == added.end()) CHECK(text(f, c) != text(f, plain));
    }
    CHECK(c.model.attn.gate == GatePosition::scores_from_x);
    CHECK(c.precision == DType::bf16);
    CHECK(c.split.mode == SplitMode::bytes);
}

// ---------------------------------------------------------------- the next fields

// The shapes of the fields the next models add, on a config of their own: an enum (a score
// function), a number with 0 for off (an MLA rank), one value of an enum per layer (a hybrid's
// layer types). An enum's list of names and one row each are all they need.
namespace next {
enum class Layer { attention, deltanet };
const Names<Layer> kLayers{"layer type", {{"attention", Layer::attention}, {"deltanet", Layer::deltanet}}};

struct Config {
    ScoreFunction score_fn = ScoreFunction::softmax;
    int64_t kv_rank = 0;  // 0: off
    std::vector<Layer> layer_types{Layer::attention, Layer::attention};
};

const Fields<Config>& fields() {
    static const Fields<Config> rows = {
        {"score_fn", at<&Config::score_fn>(parse_score_function, score_function_name), "--score-fn",
         "how scores become weights", Resume::architecture},
        {"kv_rank", at<&Config::kv_rank>({0, 1024}), "--kv-rank", "MLA's latent rank (0: off)", Resume::architecture},
        {"layer_types", at<&Config::layer_types>(kLayers), "--layer-types", "each layer's kind",
         Resume::architecture},
    };
    return rows;
}
}  // namespace next

TEST_CASE("config fields: a field of the next models is one row: an enum, a rank with 0 for off, a kind per layer") {
    const next::Config plain;
    next::Config c;
    c.score_fn = ScoreFunction::sink, c.kv_rank = 16;
    c.layer_types = {next::Layer::attention, next::Layer::deltanet, next::Layer::deltanet};
    const auto same = [](const next::Config& a, const next::Config& b) {
        return a.score_fn == b.score_fn && a.kv_rank == b.kv_rank && a.layer_types == b.layer_types;
    };

    // JSON, both ways; a name the parser does not know is the config's error.
    nlohmann::ordered_json json = nlohmann::ordered_json::object();
    write_fields(next::fields(), c, json);
    CHECK(json.dump() == R"({"score_fn":"sink","kv_rank":16,"layer_types":["attention","deltanet","deltanet"]})");
    JsonFields in("next", json.dump());
    next::Config back;
    read_fields(in, next::fields(), back);
    in.finish();
    CHECK(same(back, c));
    JsonFields bad("next", R"({"layer_types": ["attention", "mamba"]})");
    CHECK_THROWS_WITH_AS(read_fields(bad, next::fields(), back),
                         "next: layer type 'mamba' is not one of attention, deltanet", std::invalid_argument);

    // The command line: an option each, with its help and default, checked as the JSON is.
    CLI::App app;
    ConfigOptions<next::Config> options(&app, next::fields());
    options.show_defaults(plain, {});
    CHECK(options.option("score_fn")->get_description() == "how scores become weights (default softmax)");
    CHECK(options.option("kv_rank")->get_description() == "MLA's latent rank (0: off) (default 0)");
    CHECK(options.option("layer_types")->get_description() == "each layer's kind (default attention attention)");
    const char* argv[] = {"x", "--score-fn", "sink", "--kv-rank", "16", "--layer-types", "attention", "deltanet", "deltanet"};
    app.parse(9, argv);
    next::Config given;
    options.apply(given);
    CHECK(same(given, c));
    const char* wrong[] = {"x", "--layer-types", "attention", "mamba"};
    CHECK_THROWS_WITH(app.parse(4, wrong), "--layer-types: layer type 'mamba' is not one of attention, deltanet");

    // The checks validate() runs, and what a resumed run compares.
    c.kv_rank = 2000;
    CHECK_THROWS_WITH_AS(check_fields(next::fields(), c, "next"), "next: kv_rank 2000 is outside [0, 1024]",
                         std::invalid_argument);
    c.kv_rank = 16, c.layer_types.push_back(next::Layer(7));
    CHECK_THROWS_WITH_AS(check_fields(next::fields(), c, "next"),
                         "next: layer_types attention deltanet deltanet ? is not each one of attention, deltanet",
                         std::invalid_argument);
    c.layer_types.pop_back();
    std::vector<std::string> changed;
    for (const auto& [field, was, now] : differences(next::fields(), plain, c))
        changed.push_back(name(*field) + " " + was + " → " + now);
    CHECK(changed == std::vector<std::string>{"--score-fn softmax → sink", "--kv-rank 0 → 16",
                                              "--layer-types attention attention → attention deltanet deltanet"});
}

// Trainer: resume is bit-for-bit, a NaN loss stops cleanly, a corrupt checkpoint is refused.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "gatedgrad.h"
#include "tests/nn_check.h"

using namespace gg;
using namespace gg::nn;
using gg::testing::word_corpus;
namespace fs = std::filesystem;

namespace {

TrainConfig tiny_config(const std::string& out_dir) {
    TrainConfig c;
    c.model.d_model = 16, c.model.n_layers = 1, c.model.attn.n_heads = 2, c.model.max_len = 16;
    c.batch_size = 4, c.seq_len = 16, c.steps = 20, c.warmup = 3, c.lr = 3e-3;
    c.eval_every = 10, c.eval_batches = 2, c.out_dir = out_dir;
    return c;
}

std::string file_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string temp_dir(const std::string& name) {
    const fs::path p = fs::temp_directory_path() / ("gatedgrad_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(p);
    return p.string();
}

}  // namespace

TEST_CASE("trainer: 10 steps + resume + 10 steps equals 20 steps, bit for bit") {
    auto data = word_corpus(60);
    const std::string dir_a = temp_dir("straight"), dir_b = temp_dir("resumed");
    Trainer straight(tiny_config(dir_a), data);
    const TrainResult full = straight.run(true);
    REQUIRE(full.log.size() == 20);

    Trainer first(tiny_config(dir_b), data);
    first.run(true, 10);  // pauses after step 10, writing dir_b/model.safetensors

    Trainer second(tiny_config(dir_b), data);  // same config, 20 steps, fresh init
    second.resume(dir_b + "/model.safetensors");
    CHECK(second.step() == 10);
    const TrainResult rest = second.run(true);
    REQUIRE(rest.log.size() == 10);
    for (size_t i = 0; i < 10; ++i) {
        CAPTURE(i);
        CHECK(rest.log[i].step == full.log[10 + i].step);
        CHECK(rest.log[i].loss == full.log[10 + i].loss);  // exact equality, not approximate
        CHECK(rest.log[i].grad_norm == full.log[10 + i].grad_norm);
    }
    CHECK(rest.final_val_loss == full.final_val_loss);
    const auto pa = straight.model().parameters(), pb = second.model().parameters();
    for (size_t i = 0; i < pa.size(); ++i) CHECK(pa[i].to_vector<float>() == pb[i].to_vector<float>());
    fs::remove_all(dir_a);
    fs::remove_all(dir_b);
}

TEST_CASE("trainer: a NaN loss stops training and keeps the last good checkpoint") {
    auto data = word_corpus(60);
    const std::string dir = temp_dir("nan");
    TrainConfig c = tiny_config(dir);
    c.lr = 1e30, c.warmup = 0, c.grad_clip = 0, c.ckpt_every = 1, c.steps = 50;
    Trainer trainer(c, data);
    const TrainResult r = trainer.run(true);
    REQUIRE(r.diverged);
    CHECK(std::isnan(r.final_val_loss));  // never a misleading 0
    CHECK(r.message.find("at step " + std::to_string(r.log.size() + 1)) != std::string::npos);
    if (!r.log.empty())
        CHECK(r.message.find("the checkpoint of step " + std::to_string(r.log.size()) + " is kept") != std::string::npos);
    CHECK(r.log.size() < 50);
    // The checkpoint on disk is from the last finite step and loads.
    Trainer reloaded(tiny_config(dir), data);
    if (!r.log.empty()) {
        reloaded.resume(dir + "/model.safetensors");
        CHECK(reloaded.step() == static_cast<int64_t>(r.log.size()));
    }
    fs::remove_all(dir);
}

TEST_CASE("trainer: resuming from a corrupt checkpoint is a clear error and changes nothing") {
    auto data = word_corpus(60);
    const std::string dir = temp_dir("corrupt");
    TrainConfig c = tiny_config(dir);
    c.steps = 2;
    Trainer(c, data).run(true);
    const std::string path = dir + "/model.safetensors";
    fs::resize_file(path, fs::file_size(path) / 2);  // truncate
    Trainer t(tiny_config(dir), data);
    const auto before = t.model().parameters()[0].to_vector<float>();
    CHECK_THROWS_WITH_AS(t.resume(path), doctest::Contains(path.c_str()), std::runtime_error);
    CHECK(t.step() == 0);
    CHECK(t.model().parameters()[0].to_vector<float>() == before);
    fs::remove_all(dir);
}

TEST_CASE("trainer: training beats the unigram baseline on a learnable corpus") {
    auto data = word_corpus(60);
    TrainConfig c = tiny_config("");
    c.steps = 150, c.eval_every = 150;
    const TrainResult r = Trainer(c, data).run(true);
    MESSAGE("val loss " << r.final_val_loss << " vs unigram " << data->unigram_entropy());
    CHECK(r.final_val_loss < data->unigram_entropy() - 0.3);
}

TEST_CASE("trainer: configs round-trip through JSON and bad fields are named") {
    TrainConfig c = TrainConfig::preset("tiny");
    c.model.attn.gate = GatePosition::residual;
    c.lr = 0.0123;
    c.split = {0.2, SplitMode::bytes};
    c.restart_step = 100, c.restart_lr = 1e-3;
    const TrainConfig back = TrainConfig::from_json(c.to_json());
    CHECK(back.to_json() == c.to_json());
    CHECK_THROWS_WITH_AS(TrainConfig::from_json(R"({"lr": "fast"})"), doctest::Contains("'lr'"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(TrainConfig::preset("huge"), doctest::Contains("huge"), std::invalid_argument);
    CHECK(TrainConfig::preset("Tiny").to_json() == TrainConfig::preset("tiny").to_json());
    CHECK_THROWS_WITH_AS(LMConfig::from_json(R"({"d_modle": 64})"), doctest::Contains("'d_modle'"),
                         std::invalid_argument);
}

TEST_CASE("trainer: probes every probe_every steps, into the step log and log.jsonl") {
    auto data = word_corpus(60);
    const std::string dir = temp_dir("probe");
    TrainConfig c = tiny_config(dir);
    c.probe_every = 8;  // steps 8, 16 and the last, 20
    Trainer trainer(c, data);
    const TrainResult r = trainer.run(true);
    std::vector<int64_t> probed;
    for (const StepLog& s : r.log)
        if (s.probe) probed.push_back(s.step);
    CHECK(probed == std::vector<int64_t>{8, 16, 20});
    // The last probe is the model as it ended, on the first validation batch.
    const StabilityStats now = measure_stability(trainer.model(), data->val_batch(0, c.batch_size, c.seq_len).inputs);
    CHECK(r.log.back().probe->to_json() == now.to_json());
    CHECK(trainer.probe().to_json() == now.to_json());
    std::ifstream log(dir + "/log.jsonl");
    int64_t lines = 0, with_probe = 0;
    for (std::string line; std::getline(log, line); ++lines) {
        const auto j = nlohmann::json::parse(line);
        if (!j.contains("max_attn_logit")) continue;
        ++with_probe;
        CHECK(j["max_attn_logit"].size() == 1);  // one layer
        for (const char* key : {"mean_attn_logit", "min_attn_entropy", "gate_mean", "max_abs_hidden",
                                "max_output_logit", "mean_log_z"})
            CHECK(j.contains(key));
        CHECK(j["gate_mean"].size() == 1);  // the default attention is gated (G1)
    }
    CHECK(lines == 20);
    CHECK(with_probe == 3);
    c.probe_every = 0;
    Trainer none(c, data);
    for (const StepLog& s : none.run(true).log) CHECK(!s.probe);
    // sigmoid's and softpick's weights give no largest logit (measure_stability refuses them):
    // such a run trains to its end without probes.
    c.probe_every = 8, c.steps = 2, c.model.attn.score_fn = ScoreFunction::sigmoid;
    Trainer sigmoid(c, data);
    for (const StepLog& s : sigmoid.run(true).log) CHECK(!s.probe);
    fs::remove_all(dir);
}

TEST_CASE("trainer: the z-loss is added to what backward sees, logged apart from the loss") {
    auto data = word_corpus(60);
    TrainConfig c = tiny_config("");
    c.steps = 5;
    const TrainResult plain = Trainer(c, data).run(true);
    c.z_loss = 1e-2;
    Trainer with(c, data);
    const TrainResult z = with.run(true);
    // Step 1 sees the same weights and batch: the same cross-entropy, and the z term is
    // mean (log Z)² of that batch's logits.
    CHECK(z.log[0].loss == plain.log[0].loss);
    CHECK(std::isnan(plain.log[0].z_loss));
    CHECK(z.log[0].z_loss > 0);
    CHECK(z.log[0].grad_norm != plain.log[0].grad_norm);  // its gradient was added
    CHECK(z.log[4].loss != plain.log[4].loss);
    // log Z of the init's near-zero logits is about log 256; the z term is its square.
    CHECK(z.log[0].z_loss == doctest::Approx(std::log(256.0) * std::log(256.0)).epsilon(0.05));
}

TEST_CASE("trainer: independent weight decay sets AdamW's peak and survives the config's JSON") {
    TrainConfig c = tiny_config("");
    c.independent_weight_decay = true, c.weight_decay = 1e-4, c.z_loss = 1e-4, c.probe_every = 7;
    const TrainConfig back = TrainConfig::from_json(c.to_json());
    CHECK(back.independent_weight_decay);
    CHECK(back.z_loss == 1e-4);
    CHECK(back.probe_every == 7);
    // A decay of 0.5 tied to lr 1e-6 removes 5e-7 of each weight a step; independent of the
    // rate, 50% at the peak. (Adam's own step, ±lr, is 5e-5 of these 0.02-sized weights.)
    auto data = word_corpus(60);
    c.weight_decay = 0.5, c.steps = 1, c.warmup = 0, c.lr = 1e-6;
    const auto norm_after_one_step = [&](bool independent) {
        c.independent_weight_decay = independent;
        Trainer t(c, data);
        t.run(true);
        const Tensor& w = t.model().blocks[0]->attn->w_q->weight;
        return std::sqrt((w * w).sum().item());
    };
    const double tied = norm_after_one_step(false), independent = norm_after_one_step(true);
    CHECK(independent == doctest::Approx(tied * 0.5).epsilon(1e-3));
    c.z_loss = -1;
    CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("z_loss"), std::invalid_argument);
}

TEST_CASE("data: a missing corpus names what to install") {
    CHECK_THROWS_WITH_AS(load_documents({"/nonexistent/corpus"}), doctest::Contains("/nonexistent/corpus"),
                         std::runtime_error);
    const Batch b = word_corpus(60)->val_batch(0, 2, 8);
    CHECK(b.inputs.to_vector<int64_t>()[0] == kBOS);
    CHECK(b.inputs.to_vector<int64_t>()[8] == kBOS);
    // targets are the inputs shifted by one
    CHECK(b.inputs.to_vector<int64_t>()[1] == b.targets.to_vector<int64_t>()[0]);
}

namespace {
void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
}  // namespace

TEST_CASE("data: one file, a folder of any text files, the fortunes layout") {
    const fs::path dir = temp_dir("corpus");
    fs::create_directories(dir / "texts" / "subfolder");
    std::string text;
    for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i % 10) + "\n";  // 700 bytes
    write(dir / "input.txt", text);
    write(dir / "texts" / "b.md", "# notes\n");
    write(dir / "texts" / "a.txt", text);
    write(dir / "texts" / ".hidden", "never read\n");
    write(dir / "texts" / "a.dat", std::string("\0\0\0\2index", 9));  // binary: skipped in a folder
    write(dir / "texts" / "subfolder" / "c.txt", "not read either\n");
    fs::create_symlink(dir / "texts" / "a.txt", dir / "texts" / "a.u8");  // one file, two names: read once

    SUBCASE("one file without '%' lines is one document, split at bytes") {
        const std::vector<std::string> docs = load_documents({(dir / "input.txt").string()});
        REQUIRE(docs.size() == 1);
        CHECK(docs[0] == text);
        const TextDataset data(docs);  // 701 bytes with the document's closing "\n"
        CHECK(data.train_stream().size() == 630);  // floor(701 · 0.9)
        CHECK(data.val_stream().size() == 71);
        CHECK(data.split_summary() == "1 document of 701 bytes, the last 10% (71 bytes) to validation");
        CHECK(decode_bytes(data.val_stream()) == text.substr(630) + "\n");  // the end of the text
        const TextDataset quarter(docs, {0.25, SplitMode::bytes});
        CHECK(quarter.val_stream().size() == 176);  // 701 − floor(701 · 0.75)
    }
    SUBCASE("a folder: its visible text files in name order, each once") {
        CHECK(load_documents({(dir / "texts").string()}) == std::vector<std::string>{text, "# notes\n"});
        CHECK(TextDataset(load_documents({(dir / "texts").string()})).split_summary().starts_with("2 documents of 710 bytes"));
    }
    SUBCASE("the fortunes layout: documents at '%' lines, one in every 10 to validation") {
        std::string fortunes;
        for (int i = 0; i < 30; ++i) fortunes += "fortune " + std::to_string(i) + "\n" + (i % 2 ? "%\n" : "%\r\n");
        write(dir / "jokes", fortunes);
        const std::vector<std::string> docs = load_documents({(dir / "jokes").string()});
        REQUIRE(docs.size() == 30);
        CHECK(docs[9] == "fortune 9\n");
        const TextDataset data(docs);
        CHECK(decode_bytes(data.val_stream()) == "fortune 9\n\nfortune 19\n\nfortune 29\n\n");
        CHECK(data.split_summary() == "30 documents, one in every 10 to validation (3 of them, 35 bytes)");
        const TextDataset by_bytes(docs, {0.1, SplitMode::bytes});
        CHECK(by_bytes.train_stream().size() + by_bytes.val_stream().size() == data.train_stream().size() + data.val_stream().size());
        CHECK(TextDataset(docs, {0.5, SplitMode::documents}).val_stream().size() == 5 * 11 + 10 * 12);  // the odd ones
    }
    SUBCASE("what cannot split says why") {
        const std::vector<std::string> three{"a\n", "b\n", "c\n"};
        CHECK_THROWS_WITH_AS(TextDataset(three, {0.1, SplitMode::documents}), doctest::Contains("--split bytes"),
                             std::runtime_error);
        CHECK_THROWS_WITH_AS(TextDataset(std::vector<std::string>{""}), doctest::Contains("too few"), std::runtime_error);  // 1 byte: "\n"
        CHECK_THROWS_AS(TextDataset(three, {0.6, SplitMode::bytes}), std::invalid_argument);
        CHECK_THROWS_AS(TextDataset(three, {0, SplitMode::bytes}), std::invalid_argument);
        CHECK_THROWS_WITH_AS(load_documents({(dir / "texts" / "subfolder" / "none").string()}), doctest::Contains("does not exist"),
                             std::runtime_error);
        fs::create_directories(dir / "empty");
        CHECK_THROWS_WITH_AS(load_documents({(dir / "empty").string()}), doctest::Contains("no text found"), std::runtime_error);
    }
    CHECK(parse_split_mode("Bytes") == SplitMode::bytes);
    CHECK(parse_split_mode(split_mode_name(SplitMode::automatic)) == SplitMode::automatic);
    CHECK_THROWS_WITH_AS(parse_split_mode("lines"), doctest::Contains("auto, documents, bytes"), std::invalid_argument);
    fs::remove_all(dir);
}

TEST_CASE("trainer: a run resumed with more steps goes on at its learning rate, not back up a longer cosine") {
    auto data = word_corpus(60);
    const double min_lr = 3e-3 * 0.1;

    // Finished at min_lr, extended: it stays at min_lr (the cosine from min_lr to min_lr).
    const std::string finished = temp_dir("finished");
    Trainer first(tiny_config(finished), data);
    first.run(true);
    TrainConfig forty = tiny_config(finished);
    forty.steps = 40;
    Trainer extended(forty, data);
    extended.resume(finished + "/model.safetensors");
    CHECK(extended.config().restart_step == 20);
    CHECK(extended.resume_note().find("planned for 20 steps and now has 40") != std::string::npos);
    const TrainResult more = extended.run(true);
    REQUIRE(more.log.size() == 20);
    for (const StepLog& s : more.log) CHECK(s.lr == doctest::Approx(min_lr));
    CHECK(TrainConfig::from_json(extended.config().to_json()).restart_step == 20);  // config.json keeps it

    // Paused at step 10 of 20, lengthened to 30: from the lr step 11 would have had, down to min_lr.
    const std::string paused = temp_dir("paused");
    Trainer a(tiny_config(paused), data);
    a.run(true, 10);
    TrainConfig thirty = tiny_config(paused);
    thirty.steps = 30;
    Trainer b(thirty, data);
    b.resume(paused + "/model.safetensors");
    const TrainResult rest = b.run(true, 20);  // pauses again at 20
    REQUIRE(rest.log.size() == 10);
    CHECK(rest.log[0].lr == doctest::Approx(lr_at(tiny_config(paused).schedule(), 10)));
    for (size_t i = 1; i < rest.log.size(); ++i) CHECK(rest.log[i].lr < rest.log[i - 1].lr);

    // Resumed again with the same 30 steps (a config without the restart): the checkpoint's plan holds.
    Trainer c(thirty, data);
    c.resume(paused + "/model.safetensors");
    CHECK(c.config().restart_step == 10);
    CHECK(c.resume_note().empty());
    const TrainResult last = c.run(true);
    REQUIRE(last.log.size() == 10);
    CHECK(last.log[0].lr == doctest::Approx(lr_at(b.config().schedule(), 20)));
    CHECK(last.log.back().lr == doctest::Approx(min_lr).epsilon(0.05));
    fs::remove_all(finished);
    fs::remove_all(paused);
}

TEST_CASE("trainer: configs out of range are refused, naming the field") {
    const auto refused = [](const std::string& json, const char* words) {
        CHECK_THROWS_WITH_AS(TrainConfig::from_json(json), doctest::Contains(words), std::invalid_argument);
    };
    refused(R"({"log_every": -1})", "log_every -1 is outside");
    refused(R"({"ckpt_every": -5})", "ckpt_every -5 is outside");
    refused(R"({"steps": 1e13})", "steps 10000000000000 is outside");
    refused(R"({"batch_size": 0})", "batch_size 0");
    refused(R"({"lr": -0.1})", "lr");
    refused(R"({"beta2": 1})", "beta2");
    refused(R"({"seed": -1})", "'seed' is not a whole number");
    refused(R"({"data": []})", "data");
    refused(R"({"model": {"n_layers": 1e6}})", "n_layers 1000000");
    refused(R"({"seq_len": 100, "model": {"positions": "learned", "max_len": 50}})", "exceeds the model's max_len");
    // A training step too large for the memory given: refused before the model is built.
    TrainConfig c = tiny_config("");
    c.batch_size = 1024, c.seq_len = 4096, c.model.max_len = 4096;
    CHECK_THROWS_WITH_AS(Trainer(c, word_corpus(60), Device::CPU, uint64_t(1) << 30), doctest::Contains("batch 1024 × seq_len 4096"),
                         std::invalid_argument);
}

TEST_CASE("trainer: a resumed run logs every step once: log.jsonl is cut back to the checkpoint") {
    auto data = word_corpus(60);
    const std::string dir = temp_dir("log");
    TrainConfig c = tiny_config(dir);
    c.steps = 8;
    Trainer(c, data).run(true, 4);  // pauses at step 4 with a checkpoint
    {
        // As if the run had gone on to log steps 5 and 6 and then been killed before its next checkpoint.
        std::ofstream log(dir + "/log.jsonl", std::ios::app);
        log << R"({"step":5,"loss":1})" << "\n" << R"({"step":6,"loss":1})" << "\n";
    }
    Trainer resumed(c, data);
    resumed.resume(dir + "/model.safetensors");
    resumed.run(true);
    std::ifstream log(dir + "/log.jsonl");
    std::vector<int64_t> steps;
    for (std::string line; std::getline(log, line);) steps.push_back(nlohmann::json::parse(line)["step"].get<int64_t>());
    CHECK(steps == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
    fs::remove_all(dir);
}

TEST_CASE("cut_log: keeps every whole line up to the step, leaves out a torn last line, refuses a bad line before it") {
    const std::string dir = temp_dir("cut");
    fs::create_directories(dir);
    const std::string path = dir + "/log.jsonl";
    const auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary | std::ios::trunc) << text; };
    const std::string one = R"({"step":1,"loss":2})" "\n", two = R"({"step":2,"loss":2})" "\n", three = R"({"step":3,"loss":2})" "\n";

    write(one + two + three);
    LogCut cut = cut_log(path, 2);
    CHECK(cut.last_step == 2);
    CHECK(cut.warning.empty());
    CHECK(file_text(path) == one + two);

    write(one + two + R"({"step":3,"lo)");  // killed in the middle of an append
    cut = cut_log(path, 5);
    CHECK(cut.last_step == 2);
    CHECK(cut.warning == path + ":3: the last line is torn (13 bytes, no newline, not a log line): left out");
    CHECK(file_text(path) == one + two);

    // A whole object without its newline is a step logged: kept, and the newline put back for the next line.
    write(one + R"({"step":2,"loss":2})");
    cut = cut_log(path, 5);
    CHECK(cut.last_step == 2);
    CHECK(cut.warning.empty());
    CHECK(file_text(path) == one + two);

    // The same torn bytes with lines after them are no write cut short: the log is refused as it is.
    write(one + "{\"step\":2,\"lo\n" + three);
    CHECK_THROWS_WITH_AS(cut_log(path, 5), doctest::Contains((path + ":2: not a training log line").c_str()),
                         std::runtime_error);
    CHECK(file_text(path) == one + "{\"step\":2,\"lo\n" + three);

    fs::remove(path);
    CHECK(cut_log(path, 5).last_step == 0);  // no log: nothing to cut
    CHECK_FALSE(fs::exists(path));
    fs::remove_all(dir);
}

TEST_CASE("trainer: a checkpoint with bad trainer state is refused, and nothing changes") {
    auto data = word_corpus(60);
    const std::string dir = temp_dir("state");
    TrainConfig c = tiny_config(dir);
    c.steps = 3;
    Trainer(c, data).run(true);
    const std::string path = dir + "/model.safetensors", bad = dir + "/bad.safetensors";
    Metadata metadata;
    const NamedTensors good = load_tensors(path, &metadata);
    Metadata bad_metadata = metadata;
    const auto with = [&](const std::string& name, const Tensor& value) {
        NamedTensors tensors = good;
        for (auto& [n, t] : tensors)
            if (n == name) t = value;
        save_tensors(bad, tensors, bad_metadata);
    };
    std::string words;
    SUBCASE("a negative step count") {
        with("trainer.step", from_vector(std::vector<int64_t>{-5}, {1}));
        words = "trainer.step -5 is outside";
    }
    SUBCASE("a huge step count") {
        with("trainer.step", from_vector(std::vector<int64_t>{INT64_MAX}, {1}));
        words = "trainer.step 9223372036854775807 is outside";
    }
    SUBCASE("an optimiser ahead of its run") {
        with("optim.step.0", scalar(1e15, DType::i64));
        words = "optim.step.0 1000000000000000 is outside [0, 3]";
    }
    SUBCASE("a step count retyped as float64") {
        with("trainer.step", from_vector(std::vector<double>{3}, {1}));
        words = "trainer.step is float64 (1), not int64 (1)";
    }
    SUBCASE("a log line kept for another step than the checkpoint's") {
        bad_metadata["unlogged_line"] = R"({"step":2,"loss":1})";
        save_tensors(bad, good, bad_metadata);
        words = "its unlogged_line is not one log line of step 3";
    }
    SUBCASE("an all-zero sampler") {
        with("trainer.sampler", zeros({4}, DType::i64));
        words = "trainer.sampler is all zero";
    }
    SUBCASE("a NaN in the optimiser state") {
        with("optim.exp_avg.0", full(good[0].second.shape(), NAN));
        words = "tensor 'optim.exp_avg.0' holds a NaN";
    }
    Trainer t(c, data);
    const auto before = t.model().parameters()[0].to_vector<float>();
    CHECK_THROWS_WITH_AS(t.resume(bad), doctest::Contains(words.c_str()), std::runtime_error);
    CHECK(t.step() == 0);
    CHECK(t.model().parameters()[0].to_vector<float>() == before);
    CHECK_THROWS_AS(Generator().set_state({0, 0, 0, 0}), std::invalid_argument);
    fs::remove_all(dir);
}

TEST_CASE("trainer: a divergence before any checkpoint says there is none to go back to") {
    const std::string dir = temp_dir("nan_first");
    TrainConfig c = tiny_config(dir);
    c.lr = 1e30, c.warmup = 0, c.grad_clip = 0, c.steps = 50;  // no checkpoint before the end
    const TrainResult r = Trainer(c, word_corpus(60)).run(true);
    REQUIRE(r.diverged);
    CHECK(r.message.find("no checkpoint was written before it") != std::string::npos);
    CHECK(r.message.find("is kept") == std::string::npos);
    CHECK_FALSE(fs::exists(dir + "/model.safetensors"));
    fs::remove_all(dir);
}

namespace {
// A corpus that asks the trainer to stop while its n-th training batch is drawn (the
// first is the constructor's probe), as a Ctrl-C arriving in the middle of a step would;
// or throws there instead, as a crash would.
struct InterruptingSource : BatchSource {
    std::shared_ptr<const BatchSource> data;
    std::atomic<int>* stop;
    int at;
    bool crash = false;
    mutable int calls = 0;
    Batch train_batch(int64_t B, int64_t T, Generator& gen) const override {
        if (++calls == at) {
            if (crash) throw std::runtime_error("crash in step " + std::to_string(at - 1));
            stop->store(15);  // what a SIGTERM handler stores
        }
        return data->train_batch(B, T, gen);
    }
    Batch val_batch(int64_t i, int64_t B, int64_t T) const override { return data->val_batch(i, B, T); }
    int64_t val_batches(int64_t B, int64_t T) const override { return data->val_batches(B, T); }
};
}  // namespace

TEST_CASE("trainer: a stop request finishes the step, saves a checkpoint, and the resumed run is the same run") {
    auto data = word_corpus(60);
    const std::string straight_dir = temp_dir("straight_stop"), dir = temp_dir("stopped");
    const TrainResult full = Trainer(tiny_config(straight_dir), data).run(true);

    std::atomic<int> stop{0};
    auto source = std::make_shared<InterruptingSource>();
    source->data = data, source->stop = &stop, source->at = 1 + 7;  // asked during step 7
    Trainer first(tiny_config(dir), source);
    first.stop_on(stop);
    const TrainResult part = first.run(true);
    CHECK(part.stopped);
    CHECK(part.stop_reason == 15);
    CHECK(part.stop_rank == 0);
    CHECK_FALSE(part.diverged);
    CHECK(first.step() == 7);  // step 7 was finished, step 8 never began
    REQUIRE(part.log.size() == 7);

    Trainer second(tiny_config(dir), data);
    second.resume(dir + "/model.safetensors");
    CHECK(second.step() == 7);
    const TrainResult rest = second.run(true);
    REQUIRE(rest.log.size() == 13);
    for (size_t i = 0; i < rest.log.size(); ++i) CHECK(rest.log[i].loss == full.log[7 + i].loss);  // bit for bit
    CHECK(rest.final_val_loss == full.final_val_loss);
    fs::remove_all(straight_dir);
    fs::remove_all(dir);
}

TEST_CASE("trainer: ckpt_minutes checkpoints on time, so a crash loses minutes, not the run") {
    auto data = word_corpus(60);
    for (double minutes : {0.0, 1e-9}) {  // never; after every step
        CAPTURE(minutes);
        const std::string dir = temp_dir("minutes");
        TrainConfig c = tiny_config(dir);
        c.ckpt_every = 0, c.ckpt_minutes = minutes;
        std::atomic<int> unused{0};
        auto source = std::make_shared<InterruptingSource>();
        source->data = data, source->stop = &unused, source->at = 1 + 5, source->crash = true;
        Trainer crashing(c, source);
        CHECK_THROWS_WITH(crashing.run(true), doctest::Contains("crash in step 5"));
        CHECK(fs::exists(dir + "/model.safetensors") == (minutes > 0));
        if (minutes > 0) {
            Trainer again(c, data);
            again.resume(dir + "/model.safetensors");
            CHECK(again.step() == 4);  // every finished step was kept
        }
        fs::remove_all(dir);
    }
}

TEST_CASE("trainer: a checkpoint copied from another run is refused on resume") {
    auto data = word_corpus(60);
    const std::string a = temp_dir("run_a"), b = temp_dir("run_b");
    TrainConfig ca = tiny_config(a), cb = tiny_config(b);
    ca.steps = cb.steps = 2;
    ca.run_id = new_run_id(), cb.run_id = new_run_id();
    CHECK(ca.run_id.size() == 16);
    CHECK(ca.run_id != cb.run_id);
    Trainer(ca, data).run(true);
    Trainer(cb, data).run(true);
    CHECK(TrainConfig::from_json(ca.to_json()).run_id == ca.run_id);
    // Every log line names its run.
    std::ifstream log(a + "/log.jsonl");
    for (std::string line; std::getline(log, line);) CHECK(nlohmann::json::parse(line)["run"] == ca.run_id);

    fs::copy_file(a + "/model.safetensors", b + "/model.safetensors", fs::copy_options::overwrite_existing);
    Trainer resumed(cb, data);
    CHECK_THROWS_WITH_AS(resumed.resume(b + "/model.safetensors"),
                         doctest::Contains(("belongs to run " + ca.run_id + ", not to run " + cb.run_id).c_str()),
                         std::runtime_error);
    CHECK(resumed.step() == 0);
    Trainer own(ca, data);
    own.resume(a + "/model.safetensors");  // its own run's checkpoint is fine
    CHECK(own.step() == 2);

    // Its own checkpoint, but a log copied from another run.
    const std::string c = temp_dir("run_c");
    TrainConfig cc = tiny_config(c);
    cc.steps = 2, cc.run_id = new_run_id();
    Trainer(cc, data).run(true);
    fs::copy_file(a + "/log.jsonl", c + "/log.jsonl", fs::copy_options::overwrite_existing);
    Trainer mixed(cc, data);
    CHECK_THROWS_WITH_AS(mixed.resume(c + "/model.safetensors"),
                         doctest::Contains(("log.jsonl:1: a line of run " + ca.run_id + ", not of run " + cc.run_id).c_str()),
                         std::runtime_error);
    fs::remove_all(a);
    fs::remove_all(b);
    fs::remove_all(c);
}

TEST_CASE("trainer: data too short for a validation or a training batch fails before the model is built") {
    const std::vector<std::string> docs{std::string(2000, 'a') + "\n", "b\n"};  // validation: "b\n\n", 3 bytes
    auto data = std::make_shared<TextDataset>(docs, CorpusSplit{0.5, SplitMode::documents});
    CHECK_THROWS_WITH_AS(Trainer(tiny_config(""), data), doctest::Contains("validation text (3 bytes) is too short"),
                         std::runtime_error);
    auto short_train = std::make_shared<TextDataset>(std::vector<std::string>{"ab\n", std::string(200, 'c') + "\n"},
                                                     CorpusSplit{0.5, SplitMode::documents});
    TrainConfig c = tiny_config("");
    c.batch_size = 1;
    CHECK_THROWS_WITH_AS(Trainer(c, short_train), doctest::Contains("training text (4 bytes) is shorter"),
                         std::runtime_error);
}

TEST_CASE("data: what is not a readable text file is named for what it is, in one line") {
    const fs::path dir = temp_dir("bad_corpus");
    fs::create_directories(dir);
    const auto refused = [](const std::string& path, const std::string& why) {
        CAPTURE(path);
        CHECK_THROWS_WITH_AS(load_corpus({path}), doctest::Contains(why.c_str()), std::runtime_error);
    };
    REQUIRE(mkfifo((dir / "fifo").c_str(), 0600) == 0);
    refused((dir / "fifo").string(), "is not a regular file but a FIFO");
    refused("/dev/zero", "is not a regular file but a character device");
    fs::create_symlink(dir / "loop_b", dir / "loop_a");
    fs::create_symlink(dir / "loop_a", dir / "loop_b");
    refused((dir / "loop_a").string(), "is a loop of symbolic links");
    refused((dir / "missing").string(), "does not exist");
    write(dir / "empty.txt", "");
    refused((dir / "empty.txt").string(), "empty.txt' is empty");
    write(dir / "separators", "%\n\n%\n");
    refused((dir / "separators").string(), "holds no text");
    write(dir / "model.bin", std::string("weights\0\1\2", 10));
    refused((dir / "model.bin").string(), "is not text: it holds a NUL byte at offset 7");
    // A file whose size when opened is not what reading it gives (/proc reports 0 bytes):
    // the same check that catches a file truncated or grown while it is read.
    refused("/proc/self/status", "changed while it was read: 0 bytes when opened");
    fs::remove_all(dir);
}

TEST_CASE("data: the fingerprint names each file and changes with any byte") {
    const fs::path dir = temp_dir("fingerprint");
    fs::create_directories(dir);
    write(dir / "a.txt", "one text\n");
    const Corpus first = load_corpus({(dir / "a.txt").string()});
    CHECK(first.fingerprint.text().starts_with("fnv1a "));
    CHECK(first.fingerprint.text().ends_with("; " + (dir / "a.txt").string() + " 9"));
    CHECK(load_corpus({(dir / "a.txt").string()}).fingerprint.text() == first.fingerprint.text());
    write(dir / "a.txt", "one test\n");  // same size, one byte changed
    CHECK(load_corpus({(dir / "a.txt").string()}).fingerprint.text() != first.fingerprint.text());
    fs::remove_all(dir);
}

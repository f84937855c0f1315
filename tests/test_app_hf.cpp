// test_app_hf.cpp — the command line on Hugging Face folders: export --hf, then eval, sink and
// sample --hf on the export, import-hf back, and logits against the reference's fixtures.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "gatedgrad.h"
#include "tests/app_check.h"

namespace {

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;
using gg::testing::check_error;
using gg::testing::run_app;
using gg::testing::Outcome;
using gg::testing::TempDir;

// The number after `label` in `text` (the first one).
double number_after(const std::string& text, const std::string& label) {
    const size_t at = text.find(label);
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + label.size()));
}

}  // namespace

TEST_CASE("app: a trained model goes out as a Hugging Face folder and every --hf command reads it") {
    const TempDir tmp;
    const fs::path corpus = tmp.path / "corpus.txt", run = tmp.path / "run", hf = tmp.path / "hf";
    {
        std::ofstream text(corpus);
        for (int i = 0; i < 300; ++i) text << "the gate closes on idle heads " << i << "\n";
    }
    const std::string tiny = " --data " + corpus.string() +
                             " --layers 1 --d-model 16 --heads 2 --kv-heads 1 --qk-norm --batch 2 --seq-len 16";
    const Outcome train = run_app(tmp, "train" + tiny + " --steps 3 --eval-every 3 --attn g1 --quiet --out " + run.string());
    INFO("train: " << train.out << train.err);
    REQUIRE(train.code == 0);
    const std::string ckpt = (run / "model.safetensors").string();

    const Outcome exported = run_app(tmp, "export --ckpt " + ckpt + " --hf " + hf.string() + " --dtype f32");
    INFO("export: " << exported.out << exported.err);
    REQUIRE(exported.code == 0);
    CHECK(exported.out.find("tokenizer.json") != std::string::npos);
    CHECK(fs::exists(hf / "config.json"));

    const Outcome eval = run_app(tmp, "eval --hf " + hf.string() + " --data " + corpus.string() + " --seq-len 16 --batch 2");
    INFO("eval: " << eval.out << eval.err);
    REQUIRE(eval.code == 0);
    CHECK(eval.out.find("(BOS first), float32 weights") != std::string::npos);
    const double loss = number_after(eval.out, "mean next-token loss ");
    CHECK(std::isfinite(loss));
    CHECK(loss < std::log(257.0) + 1);

    const Outcome sink = run_app(tmp, "sink --hf " + hf.string() + " --data " + corpus.string() + " --seq-len 16 --batch 2");
    INFO("sink: " << sink.out << sink.err);
    REQUIRE(sink.code == 0);
    CHECK(sink.out.find("attention g1, 8 sequences of 16 tokens (BOS first)") != std::string::npos);
    CHECK(sink.out.find("sink heads (alpha > 0.30)") != std::string::npos);
    check_error(run_app(tmp, "sink --hf " + hf.string() + " --random-tokens --layers 1"), 1, "capture layer 1 is outside [0, 1)");
    const Outcome random = run_app(tmp, "sink --hf " + hf.string() + " --random-tokens --seq-len 16 --batch 2 --layers 0");
    CHECK(random.code == 0);
    CHECK(random.out.find("(random ids)") != std::string::npos);

    const Outcome sample = run_app(tmp, "sample --hf " + hf.string() + " --prompt 'the gate' --tokens 5 --seed 2");
    CHECK(sample.code == 0);
    CHECK(sample.out.rfind("the gate", 0) == 0);

    // Back in, as a checkpoint: the same model, so eval gives the same loss as the original.
    const fs::path back = tmp.path / "back.safetensors";
    REQUIRE(run_app(tmp, "import-hf " + hf.string() + " --out " + back.string()).code == 0);
    const std::string same = " --data " + corpus.string() + " --seq-len 16 --batch 2";
    const Outcome a = run_app(tmp, "eval --ckpt " + ckpt + same), b = run_app(tmp, "eval --ckpt " + back.string() + same);
    REQUIRE(a.code == 0);
    REQUIRE(b.code == 0);
    CHECK(number_after(a.out, "validation loss ") == number_after(b.out, "validation loss "));

    check_error(run_app(tmp, "eval --hf " + hf.string()), 2, "--hf needs --data FILE");
    check_error(run_app(tmp, "eval --hf " + hf.string() + " --ckpt " + ckpt), 2, "excludes");
    check_error(run_app(tmp, "eval --data " + corpus.string()), 2, "give --ckpt FILE");
    check_error(run_app(tmp, "sink --ckpt " + ckpt + " --random-tokens"), 2, "--random-tokens needs --hf");
    check_error(run_app(tmp, "eval --hf " + tmp.path.string() + " --data " + corpus.string()), 1, "config.json");
}

TEST_CASE("app: logits --hf gives the reference's logits on its fixtures, and export --hf refuses what Qwen3 lacks") {
    const TempDir tmp;
    const std::string dir = "tests/reference/hf/elementwise", out = (tmp.path / "logits.safetensors").string();
    const Outcome o = run_app(tmp, "logits --hf " + dir + " --ids " + dir + "/reference.safetensors --out " + out);
    INFO(o.out << o.err);
    REQUIRE(o.code == 0);
    std::map<std::string, Tensor> ref, got;
    for (const auto& [n, t] : load_tensors(dir + "/reference.safetensors")) ref[n] = t;
    for (const auto& [n, t] : load_tensors(out)) got[n] = t;
    const double scale = amax(abs(ref["logits"])).item();
    CHECK(amax(abs(got["logits"].to(DType::f64) - ref["logits"])).item() < 1e-5 * scale);

    const fs::path run = tmp.path / "learned";
    REQUIRE(run_app(tmp, "train --data tests/reference/hf/elementwise/config.json --layers 1 --d-model 16 --heads 2 "
                         "--batch 2 --seq-len 8 --steps 1 --eval-every 1 --positions learned --quiet --out " +
                             run.string()).code == 0);
    check_error(run_app(tmp, "export --ckpt " + (run / "model.safetensors").string() + " --hf " +
                             (tmp.path / "x").string()),
                1, "learned positions");
}

TEST_CASE("app: exports in bf16 and f32 are read by eval, sample, sink and export, at the training context") {
    const TempDir tmp;
    const fs::path corpus = tmp.path / "corpus.txt", run = tmp.path / "run";
    {
        std::ofstream text(corpus);
        for (int i = 0; i < 300; ++i) text << "a small model reads its own exports " << i << "\n";
    }
    const Outcome train = run_app(tmp, "train --data " + corpus.string() + " --layers 1 --d-model 16 --heads 2 "
                                       "--batch 3 --seq-len 24 --steps 3 --eval-every 3 --positions learned --quiet --out " +
                                           run.string());
    INFO(train.out << train.err);
    REQUIRE(train.code == 0);
    const std::string ckpt = (run / "model.safetensors").string();
    const Outcome original = run_app(tmp, "eval --ckpt " + ckpt);
    REQUIRE(original.code == 0);
    CHECK(original.out.find("trained at 24 tokens, evaluated at 24") != std::string::npos);
    for (const char* dtype : {"bf16", "f32"}) {
        CAPTURE(dtype);
        const std::string out = (tmp.path / (std::string("export_") + dtype + ".safetensors")).string();
        REQUIRE(run_app(tmp, "export --ckpt " + ckpt + " --out " + out + " --dtype " + dtype).code == 0);
        // No --seq-len, --batch or --data: the export carries them, as the checkpoint does.
        const Outcome eval = run_app(tmp, "eval --ckpt " + out);
        INFO(eval.out << eval.err);
        REQUIRE(eval.code == 0);
        CHECK(eval.out.find("trained at 24 tokens, evaluated at 24") != std::string::npos);
        const double want = number_after(original.out, "validation loss "), got = number_after(eval.out, "validation loss ");
        if (std::string(dtype) == "f32") CHECK(got == want);
        else CHECK(std::abs(got - want) < 0.02);  // weights rounded to 8 significant bits
        CHECK(run_app(tmp, "sink --ckpt " + out).code == 0);
        CHECK(run_app(tmp, "sample --ckpt " + out + " --prompt a --tokens 3").code == 0);
        CHECK(run_app(tmp, "export --ckpt " + out + " --out " + out + ".again --dtype f32").code == 0);
    }
}

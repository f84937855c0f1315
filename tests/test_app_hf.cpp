// test_app_hf.cpp — the command line on Hugging Face folders: export --hf, then eval, sink and
// sample --hf on the export, import-hf back, and logits against the reference's fixtures.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

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

// `logits --hf DIR` on the ids of DIR's reference.safetensors: max |ours − reference| as a share
// of the reference logits' largest.
double logits_error(const TempDir& tmp, const std::string& dir) {
    const std::string out = (tmp.path / "logits.safetensors").string();
    const Outcome o = run_app(tmp, "logits --hf " + dir + " --ids " + dir + "/reference.safetensors --out " + out);
    INFO(o.out << o.err);
    REQUIRE(o.code == 0);
    std::map<std::string, Tensor> ref, got;
    for (const auto& [n, t] : load_tensors(dir + "/reference.safetensors")) ref[n] = t;
    for (const auto& [n, t] : load_tensors(out)) got[n] = t;
    return amax(abs(got["logits"].to(DType::f64) - ref["logits"])).item() / amax(abs(ref["logits"])).item();
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
    // Every byte of the file scored once, BOS first as in training, nothing added to the text.
    const std::string bytes = std::to_string(fs::file_size(corpus));
    CHECK(eval.out.find("scored " + bytes + " of the text's " + bytes + " tokens") != std::string::npos);
    CHECK(eval.out.find("BOS first, --bos auto; float32 weights") != std::string::npos);
    const double loss = number_after(eval.out, "mean next-token loss ");
    CHECK(std::isfinite(loss));
    CHECK(loss < std::log(257.0) + 1);

    const Outcome sink = run_app(tmp, "sink --hf " + hf.string() + " --data " + corpus.string() + " --seq-len 16 --batch 2");
    INFO("sink: " << sink.out << sink.err);
    REQUIRE(sink.code == 0);
    CHECK(sink.out.find("attention g1, 8 sequences of 16 tokens (BOS first, --bos auto)") != std::string::npos);
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
    CHECK(a.out.find("nats/byte") != std::string::npos);  // the byte tokenizer came back with it
    CHECK(number_after(a.out, "mean next-token loss ") == number_after(b.out, "mean next-token loss "));
    CHECK(number_after(a.out, "mean next-token loss ") == number_after(eval.out, "mean next-token loss "));

    // --bos never: the first byte has no context, so one token fewer is scored.
    const Outcome never = run_app(tmp, "eval --ckpt " + ckpt + same + " --bos never");
    CHECK(never.out.find("scored " + std::to_string(fs::file_size(corpus) - 1) + " of the text's " + bytes) !=
          std::string::npos);
    CHECK(never.out.find("no BOS, --bos never: the text's own first token") != std::string::npos);
    check_error(run_app(tmp, "eval --ckpt " + ckpt + same + " --batches 2"), 2, "--data's text is scored whole");
    check_error(run_app(tmp, "eval --ckpt " + ckpt + same + " --stride 16"), 2, "--stride 16 is longer than the 15");
    check_error(run_app(tmp, "eval --ckpt " + ckpt + " --bos never"), 2, "the validation split is read as in training");
    check_error(run_app(tmp, "eval --ckpt " + ckpt + " --stride 4"), 2, "--stride is for --data's text");
    check_error(run_app(tmp, "eval --hf " + hf.string()), 2, "--hf needs --data FILE");
    check_error(run_app(tmp, "eval --ckpt " + back.string()), 2, "names no text it was trained on");
    check_error(run_app(tmp, "eval --hf " + hf.string() + " --ckpt " + ckpt), 2, "excludes");
    check_error(run_app(tmp, "eval --data " + corpus.string()), 2, "give --ckpt FILE");
    check_error(run_app(tmp, "eval --hf " + tmp.path.string() + " --data " + corpus.string()), 1, "config.json");
    // One layer's keys depend on their own token only, so a rolling cache of 15 reads each token
    // after the same 15 as windows of 16 one token apart do; a short cache prints its bands past
    // the cache, and the options that shape windows are refused beside it.
    const fs::path short_text = tmp.path / "short.txt";
    {
        std::ofstream text(short_text);
        for (int i = 0; i < 12; ++i) text << "the gate closes on idle heads " << i << "\n";
    }
    const std::string on_short = " --data " + short_text.string() + " --bos never";
    const Outcome rolled = run_app(tmp, "eval --ckpt " + ckpt + on_short + " --window-cache 15");
    const Outcome strided = run_app(tmp, "eval --ckpt " + ckpt + on_short + " --seq-len 16 --stride 1");
    INFO("rolled: " << rolled.out << rolled.err << "strided: " << strided.out);
    REQUIRE(rolled.code == 0);
    CHECK(rolled.out.find("one at a time through KV caches of 15 positions, keeping the first 0") != std::string::npos);
    CHECK(number_after(rolled.out, "mean next-token loss ") ==
          doctest::Approx(number_after(strided.out, "mean next-token loss ")).epsilon(1e-3));
    const Outcome streaming = run_app(tmp, "eval --ckpt " + ckpt + " --data " + corpus.string() +
                                               " --window-cache 8 --keep-first 1");
    INFO("streaming: " << streaming.out << streaming.err);
    REQUIRE(streaming.code == 0);
    CHECK(streaming.out.find("keeping the first 1") != std::string::npos);
    CHECK(streaming.out.find("1-7                     7") != std::string::npos);
    CHECK(streaming.out.find("8-15                    8") != std::string::npos);
    CHECK(streaming.out.find("16-31                  16") != std::string::npos);
    check_error(run_app(tmp, "eval --ckpt " + ckpt + " --data " + corpus.string() + " --window-cache 8 --keep-first 8"), 2,
                "--keep-first 8 must be less than --window-cache 8");
    check_error(run_app(tmp, "eval --ckpt " + ckpt + " --data " + corpus.string() + " --keep-first 2"), 2,
                "give both");
    check_error(run_app(tmp, "eval --ckpt " + ckpt + same + " --window-cache 8"), 2, "--seq-len is for windows");
    check_error(run_app(tmp, "eval --ckpt " + ckpt + " --window-cache 8"), 2, "--window-cache is for --data's text");
    // Gu et al.'s probe works on our checkpoints too.
    const Outcome random_ours = run_app(tmp, "sink --ckpt " + ckpt + " --random-tokens --batches 1");
    CHECK(random_ours.code == 0);
    CHECK(random_ours.out.find("(random ids)") != std::string::npos);
}

TEST_CASE("app: logits --hf gives the reference's logits on its fixtures, and export --hf refuses what Qwen3 lacks") {
    const TempDir tmp;
    CHECK(logits_error(tmp, "tests/reference/hf/elementwise") < 1e-5);

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

// A text in the fixtures' tokens: their merges were learned from sentences like these.
// The address space this test maps, in KB: about what the app maps before it allocates, so
// that `ulimit -v` this + N leaves the app about N KB.
long long mapped_kb() {
    long long kb = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmSize:", 0) == 0) kb = std::stoll(line.substr(7));
    REQUIRE(kb > 0);
    return kb;
}

fs::path write_text(const TempDir& tmp, const std::string& name = "text.txt") {
    const fs::path path = tmp.path / name;
    std::ofstream out(path);
    for (int i = 0; i < 12; ++i)
        out << "The gate sits after attention; a head that has nothing to add closes its gate " << i << ".\n";
    return path;
}

TEST_CASE("app: sample --hf draws only ids its tokenizer can write, greedy, top-k or not") {
    // The fixture's embedding has 300 rows and its tokenizer 279 ids: the last 21 rows pad it,
    // as Qwen3's 151,936 rows pad its 151,669 ids. Drawing one used to end the program with
    // nothing printed.
    const TempDir tmp;
    const std::string hf = " --hf tests/reference/hf/baseline --prompt 'The gate' --tokens 60";
    for (const char* how : {" --temperature 0", " --top-k 40", " --temperature 1.5"})
        for (int seed = 1; seed <= 3; ++seed) {
            CAPTURE(how);
            CAPTURE(seed);
            const Outcome o = run_app(tmp, "sample" + hf + how + " --seed " + std::to_string(seed));
            INFO(o.err);
            CHECK(o.code == 0);
            CHECK(o.out.rfind("The gate", 0) == 0);
        }
}

TEST_CASE("app: a model brought in with import-hf keeps its tokenizer: --ckpt reads text as --hf does") {
    const TempDir tmp;
    const std::string dir = "tests/reference/hf/headwise", back = (tmp.path / "back.safetensors").string();
    const Outcome imported = run_app(tmp, "import-hf " + dir + " --out " + back);
    INFO(imported.err);
    REQUIRE(imported.code == 0);
    CHECK(imported.out.find("its tokenizer in it") != std::string::npos);
    const std::string text = " --data " + write_text(tmp).string() + " --seq-len 32 --batch 2";
    const Outcome hf = run_app(tmp, "eval --hf " + dir + text), ckpt = run_app(tmp, "eval --ckpt " + back + text);
    INFO(hf.out << hf.err << ckpt.out << ckpt.err);
    REQUIRE(hf.code == 0);
    REQUIRE(ckpt.code == 0);
    CHECK(ckpt.out.find("nats/token") != std::string::npos);  // not read as bytes
    CHECK(number_after(ckpt.out, "mean next-token loss ") == number_after(hf.out, "mean next-token loss "));
    const std::string prompt = " --prompt 'The gate' --tokens 12 --seed 4";
    const Outcome a = run_app(tmp, "sample --hf " + dir + prompt), b = run_app(tmp, "sample --ckpt " + back + prompt);
    CHECK(a.code == 0);
    CHECK(a.out == b.out);
    const Outcome sink = run_app(tmp, "sink --ckpt " + back + text);
    CHECK(sink.code == 0);
    CHECK(sink.out.find("(no BOS, --bos auto: the text's own first token)") != std::string::npos);
}

TEST_CASE("app: every option works for --ckpt and --hf alike: --rope-scaling, --precision, the memory check") {
    const TempDir tmp;
    const std::string dir = "tests/reference/hf/elementwise", text = " --data " + write_text(tmp).string();
    // --rope-scaling on a Hugging Face model (it used to be accepted and dropped).
    const Outcome plain = run_app(tmp, "eval --hf " + dir + text + " --seq-len 64");
    const Outcome yarn = run_app(tmp, "eval --hf " + dir + text + " --seq-len 64 --rope-scaling yarn --rope-factor 4");
    INFO(plain.out << plain.err << yarn.out << yarn.err);
    REQUIRE(plain.code == 0);
    REQUIRE(yarn.code == 0);
    CHECK(yarn.out.find("(RoPE scaling yarn x4)") != std::string::npos);
    CHECK(number_after(yarn.out, "mean next-token loss ") != number_after(plain.out, "mean next-token loss "));
    // bfloat16 on request, for a folder as for a checkpoint.
    const Outcome bf16 = run_app(tmp, "eval --hf " + dir + text + " --seq-len 64 --precision bf16");
    REQUIRE(bf16.code == 0);
    CHECK(bf16.out.find("bfloat16 weights") != std::string::npos);
    CHECK(std::abs(number_after(bf16.out, "mean next-token loss ") - number_after(plain.out, "mean next-token loss ")) < 0.05);

    // sink --hf at a long --seq-len is refused up front, as --ckpt's is, instead of growing
    // until the kernel kills it (a 4-layer toy reached 23.8 GB): here 20,000 random ids need
    // ~13 GB for their attention probabilities, and ulimit -v leaves 600 MB.
    const Outcome refused = gg::testing::run_app_after(
        tmp, "ulimit -v " + std::to_string(mapped_kb() + 600000) + " && ",
        "sink --hf " + dir + " --random-tokens --seq-len 20000 --batch 1 --batches 1");
    check_error(refused, 2, "asks for too much memory");
    CHECK(refused.err.find("an analysis pass") != std::string::npos);
}

TEST_CASE("app: eval --hf scores every token of a text as Hugging Face's perplexity guide does, on every gate layout") {
    // tests/reference/hf_eval.py computed these apart from gatedgrad (bpe_reference.py's tokenizer,
    // hf_qwen3.py's float64 forward): windows of the folder's context (128) every 64 tokens, two
    // files back to back, a window and stride of one's own, and a text shorter than a window.
    const TempDir tmp;
    const nlohmann::json cases = nlohmann::json::parse(gg::testing::read_file("tests/reference/hf/eval_reference.json"));
    for (const char* name : {"baseline", "headwise", "elementwise"})
        for (const nlohmann::json& c : cases.at(name)) {
            std::string args = std::string("eval --hf tests/reference/hf/") + name + " --data";
            for (const auto& file : c.at("files")) args.append(" ").append(file.get<std::string>());
            for (const auto& arg : c.at("args")) args.append(" ").append(arg.get<std::string>());
            CAPTURE(args);
            const Outcome o = run_app(tmp, args);
            INFO(o.out << o.err);
            REQUIRE(o.code == 0);
            const nlohmann::json& want = c.at("reference");
            CHECK(number_after(o.out, "scored ") == want.at("scored").get<double>());
            CHECK(number_after(o.out, "of the text's ") == want.at("tokens").get<double>());
            CHECK(number_after(o.out, ") in ") == want.at("windows").get<double>());
            CHECK(number_after(o.out, "every ") == want.at("stride").get<double>());
            CHECK(std::abs(number_after(o.out, "mean next-token loss ") - want.at("loss").get<double>()) < 1e-4);
            CHECK(o.out.find("no BOS, --bos auto") != std::string::npos);  // Qwen3 puts none first
        }
    check_error(run_app(tmp, "eval --hf tests/reference/hf/baseline --data tests/reference/text/eval_a.txt --bos always"),
                2, "--bos always: this model's tokenizer puts no BOS");
}

TEST_CASE("app: eval --data cuts the model's context to what memory holds, and says so") {
    // A model of a 50,000-token vocabulary and a 65,536-token context: a window of all of it
    // would hold 26 GB of logits, one of the text's ~3,300 tokens over 1 GB, and ulimit -v
    // leaves 300 MB. The window used is the longest that fits, said on the first line, and
    // gives the loss an explicit --seq-len of that length gives without a limit.
    const TempDir tmp;
    LMConfig c;
    c.vocab_size = 50000, c.d_model = 16, c.n_layers = 1, c.attn.n_heads = 2, c.max_len = 65536;
    manual_seed(5);
    const fs::path dir = tmp.path / "long_context";
    hf::save_folder(GatedTransformerLM(c), dir.string());
    fs::copy_file("tests/reference/hf/baseline/tokenizer.json", dir / "tokenizer.json");  // 276 ids
    const fs::path text = tmp.path / "long.txt";
    {
        std::ofstream out(text);
        for (int i = 0; i < 60; ++i)
            out << "The gate sits after attention; a head that has nothing to add closes its gate " << i << ".\n";
    }
    const std::string eval = "eval --hf " + dir.string() + " --data " + text.string();
    const Outcome cut = gg::testing::run_app_after(tmp, "ulimit -v " + std::to_string(mapped_kb() + 300000) + " && ", eval);
    INFO(cut.out << cut.err);
    REQUIRE(cut.code == 0);
    CHECK(cut.out.find("(the model's context of 65536, cut by memory: ") != std::string::npos);
    CHECK(cut.out.find("available (what ulimit -v leaves))") != std::string::npos);
    const auto window = int64_t(number_after(cut.out, "windows of up to "));
    CHECK(window > 2);
    CHECK(window < number_after(cut.out, "of the text's "));  // one window would have held the text
    const Outcome asked = run_app(tmp, eval + " --seq-len " + std::to_string(window) + " --batch 1");  // the cut run's batch
    INFO(asked.out << asked.err);
    REQUIRE(asked.code == 0);
    CHECK(asked.out.find("tokens (--seq-len) every") != std::string::npos);
    CHECK(number_after(asked.out, "mean next-token loss ") == number_after(cut.out, "mean next-token loss "));
}

TEST_CASE("app: --help says the defaults a model from elsewhere gets") {
    const TempDir tmp;
    const Outcome eval = run_app(tmp, "eval --help"), sink = run_app(tmp, "sink --help");
    REQUIRE(eval.code == 0);
    REQUIRE(sink.code == 0);
    CHECK(eval.out.find("with --data, tokens per window (default: the model's context, as much of it as memory allows)") !=
          std::string::npos);
    CHECK(eval.out.find("(default: half a window)") != std::string::npos);
    CHECK(eval.out.find("--bos") != std::string::npos);
    CHECK(sink.out.find("(default: the training length; 256 for a model trained elsewhere)") != std::string::npos);
}

TEST_CASE("app: a Qwen3.5-layout hybrid folder opens through --hf: logits, eval, sample and sink") {
    // tests/reference/hf/qwen3_5: the multimodal wrapper of a random 4-layer hybrid (3 Gated
    // DeltaNet layers, then gated full attention), its reference computed by hf_hybrid.py.
    const TempDir tmp;
    const std::string dir = "tests/reference/hf/qwen3_5";
    CHECK(logits_error(tmp, dir) < 1e-5);

    const std::string text = " --data " + write_text(tmp).string() + " --seq-len 32 --batch 2";
    const Outcome eval = run_app(tmp, "eval --hf " + dir + text);
    INFO(eval.out << eval.err);
    REQUIRE(eval.code == 0);
    CHECK(std::isfinite(number_after(eval.out, "mean next-token loss ")));
    // Greedy decoding carries the linear layers' states and the full layer's keys and values.
    const std::string prompt = " --prompt 'The gate' --tokens 12 --temperature 0";
    const Outcome a = run_app(tmp, "sample --hf " + dir + prompt), b = run_app(tmp, "sample --hf " + dir + prompt);
    INFO(a.out << a.err);
    REQUIRE(a.code == 0);
    CHECK(a.out.rfind("The gate", 0) == 0);
    CHECK(a.out == b.out);
    const Outcome sink = run_app(tmp, "sink --hf " + dir + text);
    INFO(sink.out << sink.err);
    REQUIRE(sink.code == 0);
    CHECK(sink.out.find("\n    3 ") != std::string::npos);  // the one full-attention layer
    CHECK(sink.out.find("sink layers 0 of 1") != std::string::npos);
    CHECK(sink.out.find("linear layer  state norm") != std::string::npos);  // and the three linear ones
}

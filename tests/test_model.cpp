// test_model.cpp — the one door for models (nn/io/model.h): a checkpoint of ours and a Hugging
// Face folder give the same four things, the byte tokenizer is a byte-level BPE that reads text
// as our models were trained on it, and a checkpoint keeps the tokenizer of a model it imported.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "gatedgrad.h"
#include "tests/app_check.h"

namespace {

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;
using gg::testing::TempDir;

const std::string kFixture = "tests/reference/hf/elementwise";

// A small byte model as train saves it: its config in the metadata.
std::string save_byte_model(const fs::path& dir, const Metadata& extra = {}) {
    LMConfig c;
    c.d_model = 16, c.n_layers = 1, c.attn.n_heads = 2, c.max_len = 16;
    manual_seed(3);
    const GatedTransformerLM model(c);
    Metadata metadata{{"config", c.to_json()}};
    metadata.insert(extra.begin(), extra.end());
    const std::string path = (dir / "model.safetensors").string();
    save(model, path, metadata);
    return path;
}

}  // namespace

TEST_CASE("model: the byte tokenizer as a byte-level BPE reads any bytes as our models do, BOS first") {
    const BpeTokenizer t = byte_tokenizer();
    CHECK(is_byte_tokenizer(t));
    std::string all;
    for (int b = 0; b < 256; ++b) all += char(b);
    const std::string text = "the gate \xff\xfe closes\n" + all;
    CHECK(t.encode(text) == encode_bytes(text));
    std::vector<int64_t> with_bos{kBOS};
    for (int64_t id : encode_bytes(text)) with_bos.push_back(id);
    CHECK(t.encode_for_model(text) == with_bos);
    CHECK(t.decode(encode_bytes(text)) == text);
    // A real tokenizer is not one.
    CHECK_FALSE(is_byte_tokenizer(BpeTokenizer::from_file(kFixture + "/tokenizer.json")));
}

TEST_CASE("model: open_model gives a checkpoint and a folder the same four things") {
    const TempDir tmp;
    const fs::path& dir = tmp.path;
    const OpenedModel ours = open_model(save_byte_model(dir));
    CHECK(ours.provenance.format == ModelFormat::checkpoint);
    CHECK(ours.provenance.metadata.count("config") == 1);
    REQUIRE(ours.tokenizer);
    CHECK(ours.byte_tokens);
    CHECK(ours.provenance.tokenizer_source == "the byte tokenizer");
    CHECK(ours.precision == DType::f32);
    CHECK_FALSE(ours.model->is_training());

    const OpenedModel theirs = open_model(kFixture);
    CHECK(theirs.provenance.format == ModelFormat::hf_folder);
    CHECK(theirs.provenance.metadata.empty());
    REQUIRE(theirs.tokenizer);
    CHECK_FALSE(theirs.byte_tokens);
    CHECK(theirs.provenance.tokenizer_source == "tokenizer.json");
    CHECK(theirs.precision == DType::f32);
    CHECK_FALSE(theirs.model->is_training());

    // --precision bf16 for both: bfloat16 weights, to run under Autocast(bf16).
    for (const std::string& path : {save_byte_model(dir), kFixture}) {
        CAPTURE(path);
        const OpenedModel m = open_model(path, {.dtype = DType::bf16});
        CHECK(m.precision == DType::bf16);
        CHECK(m.model->parameters().front().dtype() == DType::bf16);
    }
    // A bfloat16 folder keeps its dtype unless asked.
    CHECK(open_model("tests/reference/hf/tied_bf16").precision == DType::bf16);
    CHECK(open_model("tests/reference/hf/tied_bf16", {.dtype = DType::f32}).precision == DType::f32);
}

TEST_CASE("model: open_model checks the memory before it reads the weights, for both formats") {
    const TempDir tmp;
    const fs::path& dir = tmp.path;
    for (const std::string& path : {save_byte_model(dir), kFixture}) {
        CAPTURE(path);
        CHECK_THROWS_WITH_AS(open_model(path, {.memory = 10'000}), doctest::Contains("asks for too much memory"),
                             std::runtime_error);
        CHECK_NOTHROW(open_model(path, {.memory = 10'000'000}));
    }
}

TEST_CASE("model: ids past the tokenizer (a real checkpoint's padding rows) are not decodable") {
    const OpenedModel m = open_model(kFixture);
    const std::vector<bool> ok = decodable_ids(m);
    REQUIRE(int64_t(ok.size()) == m.model->config().vocab_size);  // 300 rows
    const int64_t ids = m.tokenizer->vocab_size();                 // 279 tokenizer ids
    REQUIRE(ids < int64_t(ok.size()));
    for (int64_t id = 0; id < int64_t(ok.size()); ++id) CHECK(ok[size_t(id)] == (id < ids));
    // Without a tokenizer (a folder that has none), every row may be drawn.
    const std::vector<bool> all = decodable_ids(open_model("tests/reference/hf/sharded_mqa"));
    CHECK(std::count(all.begin(), all.end(), false) == 0);
}

TEST_CASE("model: a checkpoint keeps the tokenizer of the model it imported, and refuses one too large") {
    const TempDir tmp;
    const fs::path& dir = tmp.path;
    const OpenedModel folder = open_model(kFixture);
    const std::string tokenizer = gg::testing::read_file(fs::path(kFixture) / "tokenizer.json");
    const std::string path = (dir / "imported.safetensors").string();
    save(*folder.model, path, {{"config", folder.model->config().to_json()}, {"tokenizer", tokenizer}});
    const OpenedModel back = open_model(path);
    REQUIRE(back.tokenizer);
    CHECK(back.provenance.tokenizer_source == "the checkpoint");
    CHECK_FALSE(back.byte_tokens);
    const std::string text = "The gate closes on the first token.";
    CHECK(back.tokenizer->encode(text) == folder.tokenizer->encode(text));

    // A model of 257 rows whose checkpoint names a tokenizer of 279 ids.
    const std::string small = save_byte_model(dir, {{"tokenizer", tokenizer}});
    CHECK_THROWS_WITH_AS(open_model(small), doctest::Contains("has 279 tokens but the model only 257"), std::runtime_error);
    const std::string broken = save_byte_model(dir, {{"tokenizer", "{"}});
    CHECK_THROWS_WITH_AS(open_model(broken), doctest::Contains("its tokenizer: "), std::runtime_error);
}

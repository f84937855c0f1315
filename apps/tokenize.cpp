// gatedgrad tokenize — the ids a Hugging Face byte-level BPE tokenizer (nn/text/bpe.h) gives a
// text, with no special token added; with --decode, the bytes of ids.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "nn/text/bpe.h"
#include "nn/untrusted.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

struct TokenizeArgs {
    CLI::App* cmd = nullptr;
    std::string tokenizer, text, file;
    bool decode = false;
};

void add_tokenize(CLI::App& app, TokenizeArgs& a) {
    a.cmd = app.add_subcommand("tokenize", "the ids a Hugging Face byte-level BPE tokenizer (GPT-2, Qwen2, Qwen3) gives a "
                                           "text, with no special token added; with --decode the text of ids");
    a.cmd->add_option("--tokenizer", a.tokenizer, "a tokenizer.json, or a model folder holding one")
        ->type_name("FILE|DIR")
        ->required();
    CLI::Option* text = a.cmd->add_option("--text", a.text, "the text (or the ids); default: standard input");
    a.cmd->add_option("--file", a.file, "read the text (or the ids) from this file")->type_name("FILE")->excludes(text);
    a.cmd->add_flag("--decode", a.decode, "read ids separated by white space and write their bytes as they are");
}

int run_tokenize(const TokenizeArgs& a) {
    const fs::path in_folder = fs::path(a.tokenizer) / "tokenizer.json";
    const BpeTokenizer tokenizer = BpeTokenizer::from_file(fs::is_directory(a.tokenizer) ? in_folder.string() : a.tokenizer);
    std::string input = a.text;
    if (!a.file.empty()) {
        input = read_file(a.file, uint64_t(1) << 32);
    } else if (a.cmd->count("--text") == 0) {
        std::stringstream in;
        in << std::cin.rdbuf();
        input = in.str();
    }
    if (!a.decode) {
        std::string line;
        for (int64_t id : tokenizer.encode(input)) line += (line.empty() ? "" : " ") + std::to_string(id);
        std::printf("%s\n", line.c_str());
        return 0;
    }
    std::vector<int64_t> ids;
    std::istringstream words(input);
    for (std::string word; words >> word;) {
        int64_t id = 0;
        const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), id);
        if (error != std::errc() || end != word.data() + word.size())
            throw std::runtime_error("tokenize --decode: '" + printable(word) + "' is not a token id");
        ids.push_back(id);
    }
    const std::string bytes = tokenizer.decode(ids);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return 0;
}

}  // namespace

Command tokenize_command(CLI::App& app) { return make_command<TokenizeArgs>(app, add_tokenize, run_tokenize); }

// json_stream.h — the two large tables of a tokenizer.json, model.vocab and model.merges,
// read without a JSON tree.
//
// They are nearly all of the file (11 MB of Qwen3's 11.4: 151,643 tokens, 151,387 merges).
// As a tree of nlohmann::json values they cost more than all the rest of loading: a string
// and a node for every token, every merge and both halves of it, each allocated then freed.
// So a light scan finds where the two tables lie in the text (it only skips strings and
// brackets: the parsers check everything it skipped), the rest of the file, with an empty
// {} and [] in their place, is parsed as any untrusted JSON (nn/untrusted.h), and each table
// is read by nlohmann's parser as a stream of values (its SAX interface) straight into the
// tokenizer's own tables. A file whose tables the scan does not find (a key written with an
// escape, "voc\u0061b") is parsed whole, and the two tables are read back from the tree.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gg::nn {

// `text` cut in three: `rest`, the file with an empty {} or [] in place of each table found,
// and the text of each table (empty where it was not found).
struct TokenizerJsonParts {
    std::string rest;
    std::string_view vocab, merges;
};
TokenizerJsonParts cut_tokenizer_json(std::string_view text);

// Reads `object`, the JSON text of model.vocab, member by member: entry(token, value) for
// each, where value is the member's number, or an empty object or array where the member is
// one (entry refuses it). Throws std::invalid_argument "BpeTokenizer: FILE: model.vocab ..."
// where the text is not a JSON object.
void stream_vocab(std::string_view object, const std::string& file,
                  const std::function<void(std::string& token, const nlohmann::json& value)>& entry);

// Reads `array`, the JSON text of model.merges, element by element: merge(rank, element),
// where element is the string or array of strings it holds, or null where it holds something
// deeper or longer (merge refuses both). Throws as stream_vocab where it is not a JSON array.
void stream_merges(std::string_view array, const std::string& file,
                   const std::function<void(size_t rank, const nlohmann::json& element)>& merge);

}  // namespace gg::nn

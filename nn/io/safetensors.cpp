// The safetensors format, read and written on plain bytes.
//
// Layout of a file:
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  JSON header (UTF-8), for example
//                {"__metadata__": {"epoch": "3"},
//                 "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
//                 "b": {"dtype": "F32", "shape": [3],    "data_offsets": [24, 36]}}
//   [rest]     the data section: every tensor's raw bytes, little-endian, row-major
//
// data_offsets are [begin, end) relative to the start of the data section,
// not to the start of the file. Writers pad the JSON with trailing spaces so
// the data section starts at a multiple of 8 bytes, which lets a reader that
// maps the file into memory use the tensors in place with proper alignment.
//
// A file is untrusted input: the header could claim anything. The parser
// therefore checks every number before it uses it to index into the bytes.
#include "nn/io/safetensors.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <tuple>


#include <nlohmann/json.hpp>

#include "nn/untrusted.h"

namespace gg {

namespace {

using nlohmann::json;

// A real header is a few KB per thousand tensors; a length this large means
// the file is not safetensors at all (or is hostile). Same limit as the
// reference Python/Rust implementation.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// gatedgrad writes at most 5 dims and PyTorch tensors rarely have 10; a shape of
// thousands of ones is a valid one-byte tensor whose shape no message should print.
constexpr size_t kMaxHeaderDims = 32;

const std::map<std::string, size_t>& dtype_sizes() {
    static const std::map<std::string, size_t> sizes = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
        {"I32", 4}, {"I8", 1},  {"U8", 1},  {"BOOL", 1},
    };
    return sizes;
}

// Every parse error names the file, so a message read in a log is enough to
// find the broken input.
[[noreturn]] void fail(const std::string& what, const std::string& msg) {
    throw std::runtime_error("safetensors: " + what + ": " + msg);
}

std::string range_str(uint64_t begin, uint64_t end) {
    return std::string("[") + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

std::string bracketed_shape(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// numel * element size, or nullopt when that does not fit in 64 bits. A
// corrupt header can claim a shape like [2^40, 2^40]; multiplying blindly
// would wrap around to a small number that might pass the size check.
// Dims must already be known non-negative.
std::optional<uint64_t> byte_count(const std::vector<int64_t>& shape, size_t element_size) {
    uint64_t n = element_size;
    for (int64_t d : shape) {
        const auto u = static_cast<uint64_t>(d);
        if (u != 0 && n > std::numeric_limits<uint64_t>::max() / u) return std::nullopt;
        n *= u;
    }
    return n;
}

// A tensor together with where its bytes sit in the data section.
struct Placed {
    SafetensorsEntry entry;  // bytes still empty
    uint64_t begin, end;
};

// Decodes and checks one tensor record of the header against the size of the data
// section. Messages quote names only through nn::printable and never print a JSON value
// (a shape nested 100k arrays deep would make a 200 KB message, printed by recursion).
Placed parse_entry(const std::string& name, const json& info, uint64_t data_size, const std::string& what) {
    const std::string where = "tensor '" + nn::printable(name) + "'";
    if (!info.is_object())
        fail(what, where + " is a JSON " + info.type_name() + ", expected an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
        if (!info.contains(key)) fail(what, where + " is missing \"" + key + "\"");

    Placed p;
    p.entry.name = name;

    const json& dtype = info.at("dtype");
    if (!dtype.is_string())
        fail(what, where + ": \"dtype\" must be a string, got a JSON " + dtype.type_name());
    p.entry.dtype = dtype.get<std::string>();
    const auto size_it = dtype_sizes().find(p.entry.dtype);
    if (size_it == dtype_sizes().end())
        fail(what, where + " has unknown dtype '" + nn::printable(p.entry.dtype) + "'");

    const json& shape = info.at("shape");
    if (!shape.is_array())
        fail(what, where + ": \"shape\" must be an array of integers, got a JSON " + shape.type_name());
    if (shape.size() > kMaxHeaderDims)
        fail(what, where + " has " + std::to_string(shape.size()) + " dimensions (at most " +
                       std::to_string(kMaxHeaderDims) + ")");
    for (const json& d : shape) {
        if (!d.is_number_integer())
            fail(what, where + ": \"shape\" must be an array of integers, but holds a JSON " + d.type_name());
        // nlohmann keeps non-negative JSON integers as unsigned, negative ones as signed.
        if (!d.is_number_unsigned())
            fail(what, where + " has negative dimension " + std::to_string(d.get<int64_t>()) + " in its shape");
        if (d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            fail(what, where + " has dimension " + std::to_string(d.get<uint64_t>()) + " too large for int64");
        p.entry.shape.push_back(d.get<int64_t>());
    }

    const json& offsets = info.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
        fail(what, where + ": \"data_offsets\" must be two non-negative integers [begin, end]");
    p.begin = offsets[0].get<uint64_t>();
    p.end = offsets[1].get<uint64_t>();
    const std::string range = range_str(p.begin, p.end);
    if (p.begin > p.end) fail(what, where + " has data_offsets " + range + " with begin > end");
    if (p.end > data_size)
        fail(what, where + " claims bytes " + range + " but the data section has " +
                       std::to_string(data_size) + " bytes");

    const std::string desc = where + " (" + p.entry.dtype + ", shape " + bracketed_shape(p.entry.shape) + ")";
    const auto expected = byte_count(p.entry.shape, size_it->second);
    if (!expected) fail(what, desc + ": byte size overflows 64 bits");
    if (p.end - p.begin != *expected)
        fail(what, desc + " needs " + std::to_string(*expected) + " bytes but data_offsets " + range +
                       " hold " + std::to_string(p.end - p.begin));
    return p;
}

// "__metadata__" is free-form, but the format fixes it to string -> string.
std::map<std::string, std::string> parse_metadata(const json& meta, const std::string& what) {
    if (!meta.is_object())
        fail(what, std::string("\"__metadata__\" is a JSON ") + meta.type_name() +
                       ", expected an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : meta.items()) {
        if (!value.is_string())
            fail(what, "\"__metadata__\" value for '" + nn::printable(key) + "' is a JSON " + value.type_name() +
                           ", expected a string");
        out[key] = value.get<std::string>();
    }
    return out;
}

}  // namespace

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
    for (const SafetensorsEntry& e : entries)
        if (e.name == name) return &e;
    return nullptr;
}

size_t safetensors_dtype_size(const std::string& dtype) {
    const auto it = dtype_sizes().find(dtype);
    if (it == dtype_sizes().end())
        throw std::invalid_argument("safetensors: unknown dtype '" + dtype + "'");
    return it->second;
}

namespace {

// A file's header, checked against the size of the data section that follows it: the
// metadata, and every tensor with its byte range (its bytes not read yet).
struct Header {
    std::map<std::string, std::string> metadata;
    std::vector<Placed> tensors;  // sorted by begin
    uint64_t length = 0;          // N, the JSON's size in bytes
};

// The 8-byte length that opens a file of `file_size` bytes, checked against that size.
uint64_t header_length(const uint8_t (&prefix)[8], uint64_t file_size, const std::string& what) {
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | prefix[i];
    if (header_len > kMaxHeaderBytes)  // most other files (text, JSON, PNG) land here
        fail(what, "not a safetensors file: its first 8 bytes, read as the header length, give " +
                       std::to_string(header_len) + " bytes (at most " + std::to_string(kMaxHeaderBytes) + ")");
    if (header_len > file_size - 8)
        fail(what, "header length " + std::to_string(header_len) + " is larger than the " +
                       std::to_string(file_size - 8) + " bytes that follow it");
    return header_len;
}

Header parse_header(std::string_view text, uint64_t data_size, const std::string& what) {
    // Trailing padding spaces are ordinary JSON whitespace.
    json j;
    try {
        j = nn::parse_untrusted_json(text);
    } catch (const std::invalid_argument& e) {
        fail(what, std::string("header: ") + e.what());
    }
    if (!j.is_object()) fail(what, std::string("header is a JSON ") + j.type_name() + ", expected an object");

    Header out;
    out.length = text.size();
    for (const auto& [name, info] : j.items()) {
        if (name == "__metadata__")
            out.metadata = parse_metadata(info, what);
        else
            out.tensors.push_back(parse_entry(name, info, data_size, what));
    }

    // No two tensors may share bytes. Once sorted by begin, any overlap shows up between
    // neighbours, so one pass suffices.
    std::vector<Placed>& placed = out.tensors;
    std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
        return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
    });
    for (size_t i = 1; i < placed.size(); ++i) {
        const Placed& prev = placed[i - 1];
        const Placed& cur = placed[i];
        if (cur.begin < prev.end)
            fail(what, "tensors '" + nn::printable(prev.entry.name) + "' " + range_str(prev.begin, prev.end) +
                           " and '" + nn::printable(cur.entry.name) + "' " + range_str(cur.begin, cur.end) +
                           " overlap");
    }
    return out;
}

}  // namespace

SafetensorsFile parse_safetensors(const std::vector<uint8_t>& file_bytes, const std::string& what) {
    if (file_bytes.size() < 8)
        fail(what, "file is " + std::to_string(file_bytes.size()) +
                       " bytes, shorter than the 8-byte header length");
    uint8_t prefix[8];
    std::copy_n(file_bytes.begin(), 8, prefix);
    const uint64_t header_len = header_length(prefix, file_bytes.size(), what);
    const char* header = reinterpret_cast<const char*>(file_bytes.data()) + 8;
    Header h = parse_header({header, header_len}, file_bytes.size() - 8 - header_len, what);

    SafetensorsFile out{std::move(h.metadata), {}};
    const uint8_t* data = file_bytes.data() + 8 + header_len;
    for (Placed& p : h.tensors) {
        p.entry.bytes.assign(data + p.begin, data + p.end);
        out.entries.push_back(std::move(p.entry));
    }
    return out;
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
    // The header first, checked against the file's size: a file that is not safetensors
    // fails after reading a few bytes, not after reading it all.
    try {
        file_ = std::make_unique<nn::RegularFile>(path);  // not a FIFO, not /dev/zero
    } catch (const std::runtime_error& e) {  // "cannot read PATH: why", said here as the other errors are
        const std::string why = std::string(e.what()).substr(("cannot read " + path + ": ").size());
        fail(path, std::string("cannot read: ") + why);
    }
    const uint64_t size = file_->size();
    if (size < 8) fail(path, "file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
    uint8_t prefix[8];
    file_->read(0, prefix, 8);
    const uint64_t header_len = header_length(prefix, size, path);
    std::string text(header_len, '\0');
    file_->read(8, text.data(), header_len);
    Header h = parse_header(text, size - 8 - header_len, path);
    metadata_ = std::move(h.metadata);
    for (Placed& p : h.tensors) {
        ranges_[p.entry.name] = {8 + header_len + p.begin, 8 + header_len + p.end};
        positions_[p.entry.name] = entries_.size();
        entries_.push_back(std::move(p.entry));
    }
}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
    const auto it = positions_.find(name);
    return it == positions_.end() ? nullptr : &entries_[it->second];
}

void SafetensorsReader::read(const std::string& name, void* dst) const {
    const auto it = ranges_.find(name);
    if (it == ranges_.end()) fail(path_, "no tensor '" + nn::printable(name) + "'");
    const auto [begin, end] = it->second;
    try {
        file_->read(begin, dst, end - begin);
    } catch (const std::runtime_error& e) {
        fail(path_, std::string(e.what()) + " (tensor '" + nn::printable(name) + "')");
    }
}

SafetensorsFile read_safetensors(const std::string& path) {
    const SafetensorsReader reader(path);
    SafetensorsFile out{reader.metadata(), reader.entries()};
    for (SafetensorsEntry& e : out.entries) {
        e.bytes.resize(size_t(byte_count(e.shape, safetensors_dtype_size(e.dtype)).value()));
        reader.read(e.name, e.bytes.data());
    }
    return out;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
    // 1. Check every entry and build the header before touching the disk, so
    // a bad argument cannot leave anything behind. ordered_json keeps the
    // tensors in the order given, which makes the header easy to read.
    const auto bad = [&](const std::string& msg) {
        return std::invalid_argument("safetensors: " + path + ": " + msg);
    };
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
    std::set<std::string> seen;
    uint64_t offset = 0;
    for (const SafetensorsEntry& e : file.entries) {
        const std::string where = "tensor '" + e.name + "'";
        if (e.name == "__metadata__") throw bad(where + ": the name is reserved for metadata");
        if (!seen.insert(e.name).second) throw bad(where + " appears twice");
        const auto size_it = dtype_sizes().find(e.dtype);
        if (size_it == dtype_sizes().end()) throw bad(where + " has unknown dtype '" + e.dtype + "'");
        for (int64_t d : e.shape)
            if (d < 0) throw bad(where + " has negative dimension in shape " + bracketed_shape(e.shape));
        const auto expected = byte_count(e.shape, size_it->second);
        if (expected != e.bytes.size())
            throw bad(where + " (" + e.dtype + ", shape " + bracketed_shape(e.shape) + ") has " +
                      std::to_string(e.bytes.size()) + " bytes but needs " +
                      (expected ? std::to_string(*expected) : std::string("more than 2^64")));
        header[e.name] = {{"dtype", e.dtype},
                          {"shape", e.shape},
                          {"data_offsets", {offset, offset + e.bytes.size()}}};
        offset += e.bytes.size();
    }

    // Pad so that 8 + N, where the data starts, is a multiple of 8.
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(text.size() >> (8 * i));

    // 2. Replace `path` atomically (nn/files.h), from the pieces as they are: the tensors'
    // bytes are never gathered into one buffer.
    std::vector<std::string_view> pieces = {{reinterpret_cast<const char*>(len), sizeof len}, text};
    for (const SafetensorsEntry& e : file.entries)
        pieces.emplace_back(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size());
    nn::write_file_atomically(path, pieces);
}

}  // namespace gg

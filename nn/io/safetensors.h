// The safetensors file format, on plain bytes.
//
// A safetensors file is: an 8-byte little-endian header length N, N bytes of
// JSON describing every tensor (dtype, shape, byte range), then the raw tensor
// data. This layer knows nothing about gg::Tensor; it moves names, shapes and
// bytes in and out of files so it can be tested on its own and wrapped later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/files.h"

namespace gg {

// One tensor's record in a safetensors file.
struct SafetensorsEntry {
    std::string name;
    std::string dtype;            // safetensors spelling: "F32", "F64", "I64", ...
    std::vector<int64_t> shape;   // empty for a scalar
    std::vector<uint8_t> bytes;   // little-endian, row-major, exactly numel * element size
};

struct SafetensorsFile {
    std::map<std::string, std::string> metadata;  // the "__metadata__" object
    std::vector<SafetensorsEntry> entries;         // in file order of their data offsets
    const SafetensorsEntry* find(const std::string& name) const;  // nullptr when absent
};

// Bytes per element of a safetensors dtype ("F32" -> 4). Knows F64, F32, F16,
// BF16, I64, I32, I8, U8 and BOOL; throws std::invalid_argument otherwise.
size_t safetensors_dtype_size(const std::string& dtype);

// Reads and validates a whole file: the header first, checked against the file's
// size, then the tensors' bytes. Throws std::runtime_error with a one-line message
// starting "safetensors: <path>: " on any I/O error or malformed content (which
// includes a header nested deeper than 64 levels or naming a tensor twice;
// "safetensors: <path>: not a safetensors file: ..." when it cannot be one at all).
SafetensorsFile read_safetensors(const std::string& path);

// A file opened to read one tensor at a time, straight into the caller's memory: the header
// is read and checked against the file's size when it opens (the same checks and messages as
// read_safetensors), each tensor's bytes only when asked for. A model of several GB then
// needs no second copy of itself in memory while it loads.
class SafetensorsReader {
public:
    // Opens `path` (a regular file, checked as nn::read_file checks it) and keeps it open.
    explicit SafetensorsReader(const std::string& path);
    const std::string& path() const { return path_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // Every tensor's name, dtype and shape (bytes left empty), in file order.
    const std::vector<SafetensorsEntry>& entries() const { return entries_; }
    const SafetensorsEntry* find(const std::string& name) const;
    // The bytes of tensor `name` (numel × element size of them) into dst.
    void read(const std::string& name, void* dst) const;

private:
    std::string path_;
    std::unique_ptr<nn::RegularFile> file_;
    std::map<std::string, std::string> metadata_;
    std::vector<SafetensorsEntry> entries_;
    std::map<std::string, size_t> positions_;                      // name → its place in entries_
    std::map<std::string, std::pair<uint64_t, uint64_t>> ranges_;  // name → [begin, end) in the file
};

// Validates and decodes a file already in memory; `what` names it in error
// messages (usually the path).
SafetensorsFile parse_safetensors(const std::vector<uint8_t>& file_bytes, const std::string& what);

// Writes atomically (nn/files.h: write_file_atomically): the data goes to a temp file beside
// `path` ("<path>.tmp.<pid>.<n>", created exclusively), is fsync'ed, then renamed over
// `path`, so `path` holds either the old file or the complete new one. Entries are written in
// the given order with the data padded to start at a multiple of 8 bytes. Throws
// std::invalid_argument for bad entries (unknown dtype, negative dims, bytes not matching
// shape x dtype, duplicate or reserved names) before touching the disk, and
// std::runtime_error on I/O failure; the temp file never survives a failure. Temp files of
// `path` left by a writer that was killed (no process has their pid any more) are removed first.
void write_safetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace gg

#include "nn/io/safetensors.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using gg::SafetensorsEntry;
using gg::SafetensorsFile;

namespace {

// A fresh directory under the system temp dir, removed with everything in it.
struct TempDir {
    fs::path path;
    TempDir() {
        std::random_device rd;
        path = fs::temp_directory_path() /
               ("gg_safetensors_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

template <typename T>
std::vector<uint8_t> to_bytes(std::initializer_list<T> values) {
    std::vector<uint8_t> out(values.size() * sizeof(T));
    std::memcpy(out.data(), values.begin(), out.size());  // the test machines are little-endian
    return out;
}

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file as the Python library writes it: length, JSON exactly as given, data.
std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data) {
    std::vector<uint8_t> out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

// The message parse_safetensors throws, or "" when it accepts the bytes.
std::string parse_error(const std::vector<uint8_t>& bytes) {
    try {
        gg::parse_safetensors(bytes, "bad.st");
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

void check_rejected(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> words) {
    const std::string msg = parse_error(bytes);
    CAPTURE(msg);
    CHECK(msg.rfind("safetensors: bad.st: ", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    for (const char* w : words) CHECK(msg.find(w) != std::string::npos);
}

SafetensorsFile sample() {
    SafetensorsFile f;
    f.metadata = {{"format", "gatedgrad"}, {"epoch", "3"}};
    f.entries = {
        {"layer.w", "F32", {2, 3}, to_bytes<float>({1, 2, 3, 4, 5, 6})},
        {"layer.b", "F64", {3}, to_bytes<double>({0.5, -1.5, 1e300})},
        {"step", "I64", {}, to_bytes<int64_t>({-42})},
        {"empty", "F32", {0, 5}, {}},
    };
    return f;
}

void check_same(const SafetensorsFile& a, const SafetensorsFile& b) {
    CHECK(a.metadata == b.metadata);
    REQUIRE(a.entries.size() == b.entries.size());
    for (size_t i = 0; i < a.entries.size(); ++i) {
        CAPTURE(i);
        CHECK(a.entries[i].name == b.entries[i].name);
        CHECK(a.entries[i].dtype == b.entries[i].dtype);
        CHECK(a.entries[i].shape == b.entries[i].shape);
        CHECK(a.entries[i].bytes == b.entries[i].bytes);
    }
}

bool has_temp_files(const fs::path& dir) {
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
    return false;
}

// A minimal valid F32 [2] tensor named 'w' at [0, 8) with 8 bytes of data,
// used as the base that the corruption cases below alter one field at a time.
const std::vector<uint8_t> kEight(8, 0);

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return R"({"w":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
}

}  // namespace

TEST_CASE("safetensors: dtype sizes") {
    CHECK(gg::safetensors_dtype_size("F32") == 4);
    CHECK(gg::safetensors_dtype_size("F64") == 8);
    CHECK(gg::safetensors_dtype_size("I64") == 8);
    CHECK(gg::safetensors_dtype_size("BF16") == 2);
    CHECK(gg::safetensors_dtype_size("BOOL") == 1);
    CHECK_THROWS_AS(gg::safetensors_dtype_size("F8"), std::invalid_argument);
    CHECK_THROWS_AS(gg::safetensors_dtype_size("f32"), std::invalid_argument);
}

TEST_CASE("safetensors: round trip of several tensors with metadata") {
    TempDir dir;
    const std::string path = dir.file("model.st");
    const SafetensorsFile original = sample();
    gg::write_safetensors(path, original);
    const SafetensorsFile loaded = gg::read_safetensors(path);
    check_same(original, loaded);

    REQUIRE(loaded.find("step") != nullptr);
    CHECK(loaded.find("step")->shape.empty());
    CHECK(loaded.find("nope") == nullptr);
    CHECK_FALSE(has_temp_files(dir.path));

    SafetensorsFile bare;  // no metadata, no tensors: still a valid file
    gg::write_safetensors(path, bare);
    check_same(bare, gg::read_safetensors(path));
}

TEST_CASE("safetensors: header is padded so data starts at a multiple of 8") {
    TempDir dir;
    // Names of every length mod 8 move the unpadded header end around.
    for (size_t len = 1; len <= 9; ++len) {
        CAPTURE(len);
        SafetensorsFile f;
        f.entries = {{std::string(len, 'x'), "U8", {3}, {7, 8, 9}}};
        const std::string path = dir.file("a.st");
        gg::write_safetensors(path, f);
        const std::vector<uint8_t> raw = read_all(path);
        uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | raw[static_cast<size_t>(i)];
        CHECK((8 + n) % 8 == 0);
        CHECK(raw.size() == 8 + n + 3);
        CHECK(raw[8 + n] == 7);                   // data right after the header
        CHECK(raw[8] == '{');
        const std::string header(raw.begin() + 8, raw.begin() + 8 + static_cast<long>(n));
        const size_t close = header.find_last_of('}');
        CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);  // only spaces after
        check_same(f, gg::read_safetensors(path));
    }
}

TEST_CASE("safetensors: a file as written by the Python library parses") {
    // Python's safetensors writes compact JSON with no alignment padding here
    // (this header is 195 bytes), lists entries by name rather than offset,
    // and may use dtypes gatedgrad does not compute with.
    const std::string header =
        R"({"__metadata__":{"format":"pt"},)"
        R"("a":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},)"
        R"("h":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]},)"
        R"("z":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    REQUIRE(header.size() % 8 != 0);
    const std::vector<uint8_t> data = {
        0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40,  // z = [1.0f, 2.0f]
        0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // a = [7]
        0x80, 0x3f, 0x00, 0xc0,                          // h = [1.0, -2.0] in bfloat16
    };
    const SafetensorsFile f = gg::parse_safetensors(make_file(header, data), "python.st");
    CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});
    REQUIRE(f.entries.size() == 3);
    CHECK(f.entries[0].name == "z");  // sorted by data offset, not by name
    CHECK(f.entries[1].name == "a");
    CHECK(f.entries[2].name == "h");
    CHECK(f.entries[0].bytes == to_bytes<float>({1.0f, 2.0f}));
    CHECK(f.entries[1].bytes == to_bytes<int64_t>({7}));
    CHECK(f.entries[2].dtype == "BF16");
    CHECK(f.entries[2].bytes == std::vector<uint8_t>{0x80, 0x3f, 0x00, 0xc0});
}

TEST_CASE("safetensors: corrupt files are rejected with a precise message") {
    SUBCASE("too short") { check_rejected({1, 0, 0}, {"3 bytes", "shorter"}); }
    SUBCASE("header length larger than the file") {
        std::vector<uint8_t> b = make_file("{}", {});
        b[0] = 50;
        check_rejected(b, {"header length 50", "larger", "2 bytes"});
    }
    SUBCASE("absurd header length: not a safetensors file at all") {
        std::vector<uint8_t> b = make_file("{}", {});
        b[7] = 1;  // 2^56 + 2
        CHECK(parse_error(b) ==
              "safetensors: bad.st: not a safetensors file: its first 8 bytes, read as the header length, give "
              "72057594037927938 bytes (at most 100000000)");
        const std::string json = "{\n  \"model\": {}\n}\n";  // a config.json passed as --ckpt
        check_rejected(std::vector<uint8_t>(json.begin(), json.end()), {"not a safetensors file"});
    }
    SUBCASE("header not JSON") { check_rejected(make_file("{\"w\":", {}), {"not valid JSON"}); }
    SUBCASE("header not an object") { check_rejected(make_file("[1,2]", {}), {"array", "expected an object"}); }
    SUBCASE("entry not an object") { check_rejected(make_file(R"({"w":5})", {}), {"'w'", "expected an object"}); }
    SUBCASE("missing fields") {
        check_rejected(make_file(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", kEight), {"'w'", "missing", "dtype"});
        check_rejected(make_file(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", kEight), {"'w'", "missing", "shape"});
        check_rejected(make_file(R"({"w":{"dtype":"F32","shape":[2]}})", kEight), {"'w'", "missing", "data_offsets"});
    }
    SUBCASE("wrong JSON types") {
        check_rejected(make_file(entry("4", "[2]", "[0,8]"), kEight), {"'w'", "\"dtype\" must be a string"});
        check_rejected(make_file(entry("\"F32\"", "2", "[0,8]"), kEight), {"'w'", "\"shape\" must be an array"});
        check_rejected(make_file(entry("\"F32\"", "[2.0]", "[0,8]"), kEight), {"'w'", "\"shape\" must be an array"});
        check_rejected(make_file(entry("\"F32\"", "[2]", "[0,8,9]"), kEight), {"'w'", "\"data_offsets\""});
        check_rejected(make_file(entry("\"F32\"", "[2]", "[\"0\",8]"), kEight), {"'w'", "\"data_offsets\""});
        check_rejected(make_file(entry("\"F32\"", "[2]", "[-8,8]"), kEight), {"'w'", "non-negative"});
    }
    SUBCASE("unknown dtype") {
        check_rejected(make_file(entry("\"F8_E4M3\"", "[2]", "[0,8]"), kEight), {"'w'", "unknown dtype 'F8_E4M3'"});
    }
    SUBCASE("negative dimension") {
        check_rejected(make_file(entry("\"F32\"", "[-2]", "[0,8]"), kEight), {"'w'", "negative dimension -2"});
    }
    SUBCASE("dimension beyond int64") {
        check_rejected(make_file(entry("\"F32\"", "[9223372036854775808,0]", "[0,0]"), kEight), {"'w'", "too large"});
    }
    SUBCASE("begin after end") {
        check_rejected(make_file(entry("\"F32\"", "[2]", "[8,0]"), kEight), {"'w'", "[8, 0)", "begin > end"});
    }
    SUBCASE("end beyond the data section") {
        check_rejected(make_file(entry("\"F32\"", "[100]", "[0,400]"), std::vector<uint8_t>(256)),
                       {"tensor 'w' claims bytes [0, 400) but the data section has 256 bytes"});
    }
    SUBCASE("size does not match shape") {
        check_rejected(make_file(entry("\"F32\"", "[3]", "[0,8]"), kEight),
                       {"'w'", "F32", "[3]", "needs 12 bytes", "[0, 8)", "hold 8"});
    }
    SUBCASE("byte size overflow") {
        // 2^32 * 2^32 * 4 bytes wraps to 0 in 64-bit arithmetic: must not pass as a 0-byte tensor.
        check_rejected(make_file(entry("\"F32\"", "[4294967296,4294967296]", "[0,0]"), {}), {"'w'", "overflows"});
    }
    SUBCASE("overlapping tensors") {
        const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
        check_rejected(make_file(header, std::vector<uint8_t>(12)), {"'a' [0, 8)", "'b' [4, 12)", "overlap"});
    }
    SUBCASE("overlap hidden behind a neighbour") {
        const std::string header = R"({"a":{"dtype":"U8","shape":[10],"data_offsets":[0,10]},)"
                                   R"("b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},)"
                                   R"("c":{"dtype":"U8","shape":[1],"data_offsets":[5,6]}})";
        check_rejected(make_file(header, std::vector<uint8_t>(10)), {"overlap"});
    }
    SUBCASE("metadata values must be strings") {
        check_rejected(make_file(R"({"__metadata__":{"epoch":3}})", {}), {"__metadata__", "'epoch'", "expected a string"});
        check_rejected(make_file(R"({"__metadata__":["x"]})", {}), {"__metadata__", "expected an object"});
    }
}

TEST_CASE("safetensors: adjacent and empty tensors are not overlaps") {
    const std::string header = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                               R"("e":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},)"
                               R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})";
    const SafetensorsFile f = gg::parse_safetensors(make_file(header, {1, 2, 3, 4}), "ok.st");
    REQUIRE(f.entries.size() == 3);
    CHECK(f.find("b")->bytes == std::vector<uint8_t>{3, 4});
    CHECK(f.find("e")->bytes.empty());
}

TEST_CASE("safetensors: reading a missing file names the path") {
    TempDir dir;
    const std::string path = dir.file("missing.st");
    CHECK_THROWS_WITH_AS(gg::read_safetensors(path), doctest::Contains(("safetensors: " + path).c_str()),
                         std::runtime_error);
}

TEST_CASE("safetensors: bad entries are rejected on write") {
    TempDir dir;
    const std::string path = dir.file("w.st");
    SafetensorsFile f;
    SUBCASE("bytes do not match shape") {
        f.entries = {{"w", "F32", {2, 2}, std::vector<uint8_t>(12)}};
        CHECK_THROWS_WITH_AS(gg::write_safetensors(path, f), doctest::Contains("'w' (F32, shape [2, 2]) has 12 bytes but needs 16"),
                             std::invalid_argument);
    }
    SUBCASE("duplicate names") {
        f.entries = {{"w", "U8", {1}, {1}}, {"w", "U8", {1}, {2}}};
        CHECK_THROWS_WITH_AS(gg::write_safetensors(path, f), doctest::Contains("'w' appears twice"), std::invalid_argument);
    }
    SUBCASE("unknown dtype") {
        f.entries = {{"w", "F8", {1}, {1}}};
        CHECK_THROWS_WITH_AS(gg::write_safetensors(path, f), doctest::Contains("unknown dtype 'F8'"), std::invalid_argument);
    }
    SUBCASE("negative dimension") {
        f.entries = {{"w", "U8", {-1}, {}}};
        CHECK_THROWS_WITH_AS(gg::write_safetensors(path, f), doctest::Contains("negative dimension"), std::invalid_argument);
    }
    SUBCASE("reserved name") {
        f.entries = {{"__metadata__", "U8", {1}, {1}}};
        CHECK_THROWS_WITH_AS(gg::write_safetensors(path, f), doctest::Contains("reserved"), std::invalid_argument);
    }
    CHECK_FALSE(fs::exists(path));
    CHECK_FALSE(has_temp_files(dir.path));
}

TEST_CASE("safetensors: a failed write leaves the old file untouched") {
    TempDir dir;
    const std::string path = dir.file("model.st");
    gg::write_safetensors(path, sample());
    const std::vector<uint8_t> before = read_all(path);

    SUBCASE("invalid entry") {
        SafetensorsFile bad = sample();
        bad.entries[0].bytes.pop_back();
        CHECK_THROWS_AS(gg::write_safetensors(path, bad), std::invalid_argument);
    }
    SUBCASE("rename fails after the temp file was written") {
        // A directory in place of a second target makes rename() fail late,
        // after the temp file is complete: it must still be cleaned up.
        const std::string blocked = dir.file("blocked.st");
        fs::create_directory(blocked);
        fs::copy_file(path, dir.file("blocked.st/keep"));
        CHECK_THROWS_WITH_AS(gg::write_safetensors(blocked, sample()), doctest::Contains("renaming"),
                             std::runtime_error);
        CHECK(fs::is_directory(blocked));
    }
    SUBCASE("target directory does not exist") {
        CHECK_THROWS_WITH_AS(gg::write_safetensors(dir.file("no/such/dir.st"), sample()),
                             doctest::Contains("cannot create"), std::runtime_error);
    }
    CHECK(read_all(path) == before);
    CHECK_FALSE(has_temp_files(dir.path));

    // And a successful overwrite replaces it completely.
    SafetensorsFile smaller;
    smaller.entries = {{"only", "U8", {1}, {9}}};
    gg::write_safetensors(path, smaller);
    check_same(smaller, gg::read_safetensors(path));
    CHECK_FALSE(has_temp_files(dir.path));
}

TEST_CASE("safetensors: hostile headers end in a short one-line error, never a crash") {
    // Deep nesting: a recursive printer of the offending value overflowed the stack (and at
    // 60k levels made a 120 KB message). Every field, every depth: refused at 64 levels.
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    for (const std::string& header : {entry("\"F32\"", deep, "[0,8]"), entry(deep, "[2]", "[0,8]"),
                                      entry("\"F32\"", "[2]", deep), R"({"__metadata__":{"a":)" + deep + "}}"}) {
        const std::string msg = parse_error(make_file(header, kEight));
        CAPTURE(msg.substr(0, 200));
        CHECK(msg.find("nested deeper than 64 levels") != std::string::npos);
        CHECK(msg.size() < 200);
    }
    // A number past double: nlohmann throws out_of_range, which must not escape as such.
    check_rejected(make_file(entry("\"F32\"", "[1e3088]", "[0,8]"), kEight), {"not valid JSON", "overflow"});
    // A tensor named twice: the reader would keep the last one without a word.
    check_rejected(make_file(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                             R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                             std::vector<uint8_t>(2)),
                   {"key 'w' twice"});
    check_rejected(make_file(R"({"__metadata__":{"k":"1","k":"2"}})", {}), {"key 'k' twice"});
    // Bytes that are not UTF-8, and control characters, reach the message escaped.
    const std::string raw = parse_error(make_file("{\"w\xff\xfe\":1}", {}));
    CAPTURE(raw);
    CHECK(raw.find("not valid JSON") != std::string::npos);
    CHECK(raw.find("\\xff") != std::string::npos);
    CHECK(std::all_of(raw.begin(), raw.end(), [](char c) { return c >= 0x20 && c < 0x7f; }));
    const std::string escape = parse_error(make_file(entry("\"\\u001b[2J\"", "[2]", "[0,8]"), kEight));
    CAPTURE(escape);
    CHECK(escape.find("unknown dtype '\\x1b[2J'") != std::string::npos);
    // A shape of 10k ones is a valid one-byte tensor, and 10k dims in every later message.
    std::string ones = "[1";
    for (int i = 1; i < 10000; ++i) ones += ",1";
    check_rejected(make_file(entry("\"U8\"", ones + "]", "[0,1]"), {0}), {"10000 dimensions (at most 32)"});
    // A 100 KB name is quoted by its first 64 bytes.
    const std::string long_name = parse_error(make_file("{\"" + std::string(100000, 'n') + "\":5}", {}));
    CHECK(long_name.find("'" + std::string(64, 'n') + "...'") != std::string::npos);
    CHECK(long_name.size() < 200);
}

TEST_CASE("safetensors: a file that is not regular is refused before reading it") {
    CHECK_THROWS_WITH_AS(gg::read_safetensors("/dev/zero"), doctest::Contains("not a regular file"), std::runtime_error);
}

TEST_CASE("safetensors: temp files of killed writers are removed by the next save, a live writer's are kept") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    // A pid that is certainly free: a child that has exited and been reaped.
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    REQUIRE(child > 0);
    ::waitpid(child, nullptr, 0);
    const std::string stale = path + ".tmp." + std::to_string(child), live = path + ".tmp." + std::to_string(::getppid());
    const std::string other = dir.file("other.safetensors.tmp." + std::to_string(child));
    for (const std::string& p : {stale, live, other}) std::ofstream(p) << "half a checkpoint";
    gg::write_safetensors(path, sample());
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(live));   // its writer may still finish
    CHECK(fs::exists(other));  // another file's business
    check_same(sample(), gg::read_safetensors(path));
}

// test_untrusted.cpp — JSON from someone else (nn/untrusted.h): every limit it promises, and
// time linear in the text's size however the values are arranged.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "nn/untrusted.h"

namespace {

using gg::nn::kMaxJsonDepth;
using gg::nn::kMaxJsonValues;
using gg::nn::parse_untrusted_json;

std::string parse_error(const std::string& text) {
    try {
        parse_untrusted_json(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "(parsed)";
}

// Runs `work` in a child process allowed `cpu_seconds` of CPU time: whether it finished within
// them. CPU time, not time on the clock, so a busy machine cannot make it fail; work that is
// quadratic where it should be linear takes hours at the sizes given, and is stopped.
bool finishes_within_cpu_seconds(rlim_t cpu_seconds, const std::function<void()>& work) {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        const rlimit limit{cpu_seconds, cpu_seconds};
        setrlimit(RLIMIT_CPU, &limit);
        try {
            work();
        } catch (...) {
            _exit(1);
        }
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("untrusted json: 200k sibling objects, and 400k in an array, parse in time linear in their number") {
    // A safetensors header's shape: one object per tensor. With a per-value callback, nlohmann
    // scans an object's parent after the object ends: 10k sibling objects took 0.5 s of CPU,
    // 20k 3.4 s, and 200k would take minutes; objects in an array, 100k 4.4 s and 200k 17.6 s.
    // Linear, 200k take a fraction of a second (bench/core_bench json); allowed 30 s of CPU.
    std::string text = "{";
    for (int i = 0; i < 200'000; ++i)
        text.append(i ? ",\"t" : "\"t").append(std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}");
    text += "}";
    CHECK(finishes_within_cpu_seconds(30, [&] {
        if (parse_untrusted_json(text).size() != 200'000) throw std::logic_error("wrong tree");
    }));
    // Objects side by side in an array, as a tokenizer's added_tokens are: 400k.
    std::string array = "[";
    for (int i = 0; i < 400'000; ++i) array += i ? ",{\"id\":1}" : "{\"id\":1}";
    array += "]";
    CHECK(finishes_within_cpu_seconds(30, [&] { parse_untrusted_json(array); }));
}

TEST_CASE("untrusted json: the tree it builds is the text's, in every kind of value") {
    const auto j = parse_untrusted_json(R"({"a": [1, -2, 3.5, "x", true, false, null, {}, []], "b": {"c": {"d": 18446744073709551615}}})");
    CHECK(j.dump() == R"({"a":[1,-2,3.5,"x",true,false,null,{},[]],"b":{"c":{"d":18446744073709551615}}})");
    CHECK(j["a"][0].is_number_unsigned());
    CHECK(j["a"][1].is_number_integer());
    CHECK(parse_untrusted_json("7") == 7);
    CHECK(parse_untrusted_json("  \"s\" ") == "s");
}

TEST_CASE("untrusted json: depth, value count and repeated keys are refused in one line") {
    const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
    CHECK_NOTHROW(parse_untrusted_json(nested(kMaxJsonDepth)));
    CHECK(parse_error(nested(kMaxJsonDepth + 1)) == "JSON nested deeper than 64 levels");
    CHECK(parse_error(nested(100'000)) == "JSON nested deeper than 64 levels");
    std::string objects = "1";
    for (int i = 0; i < 70; ++i) objects = "{\"a\":" + objects + "}";
    CHECK(parse_error(objects) == "JSON nested deeper than 64 levels");

    std::string values = "[0";  // the array itself is a value too
    for (size_t i = 1; i < kMaxJsonValues - 1; ++i) values += ",0";
    CHECK_NOTHROW(parse_untrusted_json(values + "]"));
    CHECK(parse_error(values + ",0]") == "JSON with more than 4000000 values");

    CHECK(parse_error(R"({"k": 1, "k": 2})") == "JSON object has the key 'k' twice");
    CHECK(parse_error(R"({"a": {"k": 1, "j": {"k": 2}, "k": 3}})") == "JSON object has the key 'k' twice");
    CHECK_NOTHROW(parse_untrusted_json(R"({"k": {"k": {"k": 1}}, "j": [{"k": 1}, {"k": 2}]})"));
    CHECK(parse_error(R"({"\u001b[2J": 1, "\u001b[2J": 2})") == "JSON object has the key '\\x1b[2J' twice");
}

TEST_CASE("untrusted json: syntax errors and numbers out of range name the place, escaped") {
    CHECK(parse_error(R"({"a": 1,})") ==
          "not valid JSON: parse error at line 1, column 9: syntax error while parsing object key - unexpected '}'; "
          "expected string literal");
    CHECK(parse_error("[1] [2]").find("not valid JSON: parse error at line 1, column 5") == 0);
    CHECK(parse_error("[1e3088]") == "not valid JSON: number overflow parsing '1e3088'");
    CHECK(parse_error("").find("not valid JSON: parse error at line 1, column 1") == 0);
    const std::string raw = parse_error("{\"w\xff\xfe\":1}");
    CAPTURE(raw);
    CHECK(raw.find("\\xff") != std::string::npos);
}

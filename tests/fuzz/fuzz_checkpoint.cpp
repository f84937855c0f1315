// fuzz_checkpoint.cpp — the libFuzzer target over checkpoint and config loading
// (load_untrusted.h). Built by tools/fuzz with clang, -fsanitize=fuzzer,address,undefined;
// a finding is a crash, a sanitizer report, a timeout, an allocation past -malloc_limit_mb,
// or an error message that is not one clean line (reported here by abort()).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/load_untrusted.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto problems = gg::fuzz::load_untrusted({reinterpret_cast<const char*>(data), size});
    for (const std::string& p : problems) std::fprintf(stderr, "load_untrusted: %s\n", p.c_str());
    if (!problems.empty()) std::abort();
    return 0;
}

// fuzz_tokenizer.cpp — the libFuzzer target over tokenizer.json reading and encode
// (load_tokenizer.h). Built as fuzz_checkpoint.cpp is, with clang, -fsanitize=fuzzer,address,
// undefined; a finding is a crash, a sanitizer report, a timeout, an allocation past
// -malloc_limit_mb, or an error message that is not one clean line (reported by abort()).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/load_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto problems = gg::fuzz::load_tokenizer({reinterpret_cast<const char*>(data), size});
    for (const std::string& p : problems) std::fprintf(stderr, "load_tokenizer: %s\n", p.c_str());
    if (!problems.empty()) std::abort();
    return 0;
}

// fuzz_hf_folder.cpp — the libFuzzer target over Hugging Face folders (hf_folder.h): config.json,
// the index and the safetensors files cut from one input. Built by tools/fuzz as
// fuzz_checkpoint.cpp is; a finding is a crash, a sanitizer report, a timeout, an allocation past
// -malloc_limit_mb, or an error message that is not one clean line (reported here by abort()).
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/hf_folder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto problems = gg::fuzz::load_hf_folder({reinterpret_cast<const char*>(data), size});
    for (const std::string& p : problems) std::fprintf(stderr, "load_hf_folder: %s\n", p.c_str());
    if (!problems.empty()) std::abort();
    return 0;
}

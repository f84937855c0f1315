// launch_error.h — what the emulator's checks throw, for the tests that expect a kernel to be
// refused (a misaligned access, a deadlock, a lane reading outside its fragment).
#pragma once
#include <stdexcept>
#include <string>

namespace gg::testing {

// The message `run` threw, or "" when it did not throw.
template <class F>
std::string launch_error(F&& run) {
    try {
        run();
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

}  // namespace gg::testing

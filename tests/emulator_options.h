// emulator_options.h — for the tests of the emulator itself: its options (schedule, race
// detector; cuda/emulator/emulator.h) set for one test and put back after it.
#pragma once
#include <cstdint>

#include "cuda/launch.h"

namespace gg::testing {

struct EmulatorOptions {
    EmulatorOptions(emu::Schedule schedule, bool race_check, uint64_t seed = 1) : saved(emu::options()) {
        emu::options() = {schedule, seed, race_check};
    }
    // Only the schedule: the race detector stays as the environment set it.
    explicit EmulatorOptions(emu::Schedule schedule) : saved(emu::options()) { emu::options().schedule = schedule; }
    ~EmulatorOptions() { emu::options() = saved; }
    EmulatorOptions(const EmulatorOptions&) = delete;
    EmulatorOptions& operator=(const EmulatorOptions&) = delete;

    emu::Options saved;
};

}  // namespace gg::testing

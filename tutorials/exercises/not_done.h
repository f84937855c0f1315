// not_done.h — what every exercise throws until it is written (tutorials/exercises/README.md).
#pragma once
#include <stdexcept>
#include <string>

namespace exercises {

struct NotDone : std::logic_error {
    // exercise: its number and name, "02.1 cube".
    explicit NotDone(const std::string& exercise)
        : std::logic_error("exercise " + exercise + " is not done yet: write it, then check it with tools/exercise " +
                           exercise.substr(0, exercise.find(' '))) {}
};

}  // namespace exercises

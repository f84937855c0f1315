// not_done.h — what every exercise throws until it is written (tutorials/exercises/README.md).
#pragma once
#include <stdexcept>
#include <string>

namespace exercises {

struct NotDone : std::logic_error {
    explicit NotDone(const std::string& exercise)
        : std::logic_error("exercise " + exercise + " is not done yet: write it, then run meson test -C build --suite exercises") {}
};

}  // namespace exercises

// processes.h — independent training runs side by side, one child process each.
//
// The experiment tutorials train many small models that share nothing but their data.
// A forked child is a copy of the parent: the corpus loaded before the fork is shared
// (copy-on-write), each child seeds its own generators, and a crash or a NaN in one run
// cannot touch another. The parent does no tensor work itself, so no OpenMP or BLAS
// thread pool exists when it forks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tutorial {

// Calls work(i) for every i in [0, n), each in its own child process, at most `jobs` at
// a time, and returns what each returned (the child writes it to an unlinked temporary
// file the parent opened before forking). What a child prints goes straight to the
// terminal. Throws naming the runs that failed.
std::vector<std::string> run_in_processes(int64_t n, int jobs, const std::function<std::string(int64_t)>& work);

// Runs `work` with this process's standard output going to a temporary file, and returns
// what it printed.
std::string capture_stdout(const std::function<void()>& work);

// Runs the parts at the same time, one process each. The first prints as it goes; what
// the others print is held and printed after it, in order, so the output reads as if
// the parts had run one after another.
void run_side_by_side(const std::vector<std::function<void()>>& parts);

}  // namespace tutorial

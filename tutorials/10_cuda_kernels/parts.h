// parts.h — the parts of tutorial 10, one file each.
#pragma once

namespace tutorial {
void part_basics();  // basics.cpp: threads, blocks, shared memory, barriers, warps
}  // namespace tutorial

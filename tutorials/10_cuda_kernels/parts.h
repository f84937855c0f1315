// parts.h — the parts of tutorial 10, one file each.
#pragma once

namespace tutorial {
void part_basics();       // basics.cpp: threads, blocks, shared memory, barriers, warps
// Each returns whether every kernel agreed with its CPU reference.
bool part_gemm_ladder();  // ladder.cpp: the ten rungs of cuda/gemm_ladder/
bool part_attention();    // attention.cpp: the fused attention kernels
}  // namespace tutorial

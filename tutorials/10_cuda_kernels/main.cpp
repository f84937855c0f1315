// Tutorial 10 — CUDA kernels: a thread, a block and a warp, then the GEMM ladder and the
// attention kernel. Every kernel runs in the emulator (cuda/emulator/), so this program needs no
// GPU.
//
// Build and run from the repository root:
//   tools/build tutorial_10_cuda_kernels && ./build/tutorials/tutorial_10_cuda_kernels
#include "tutorials/10_cuda_kernels/parts.h"

int main() {
    tutorial::part_basics();
    const bool ladder_matches = tutorial::part_gemm_ladder();
    const bool attention_matches = tutorial::part_attention();
    return ladder_matches && attention_matches ? 0 : 1;
}

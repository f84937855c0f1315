// The emulator's build of tests/mma_probe.cu (g++ against cuda/emulator/): the fragment table that
// tools/gpu-check compares, line by line, with the GPU's.
#include "tests/mma_probe.cu"

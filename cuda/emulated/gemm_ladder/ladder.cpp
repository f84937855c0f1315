// The emulator build of cuda/gemm_ladder/ladder.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/ladder.cu"

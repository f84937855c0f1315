// The emulator build of cuda/gemm_ladder/1_naive.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/1_naive.cu"

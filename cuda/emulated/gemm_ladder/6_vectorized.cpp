// The emulator build of cuda/gemm_ladder/6_vectorized.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/6_vectorized.cu"

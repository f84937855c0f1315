// The emulator build of cuda/gemm_ladder/6_vectorized.cu (g++ against cuda/emu/emulator.h).
#include "cuda/gemm_ladder/6_vectorized.cu"

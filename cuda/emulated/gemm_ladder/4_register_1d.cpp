// The emulator build of cuda/gemm_ladder/4_register_1d.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/4_register_1d.cu"

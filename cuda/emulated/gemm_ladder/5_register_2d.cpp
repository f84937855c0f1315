// The emulator build of cuda/gemm_ladder/5_register_2d.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/5_register_2d.cu"

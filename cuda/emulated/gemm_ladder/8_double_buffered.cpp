// The emulator build of cuda/gemm_ladder/8_double_buffered.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/8_double_buffered.cu"

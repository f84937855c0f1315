// The emulator build of cuda/gemm_ladder/2_coalesced.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/2_coalesced.cu"

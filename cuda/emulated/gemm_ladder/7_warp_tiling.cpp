// The emulator build of cuda/gemm_ladder/7_warp_tiling.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/7_warp_tiling.cu"

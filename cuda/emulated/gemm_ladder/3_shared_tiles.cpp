// The emulator build of cuda/gemm_ladder/3_shared_tiles.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/3_shared_tiles.cu"

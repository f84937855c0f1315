// The emulator build of cuda/gemm_ladder/9_tensor_cores.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/9_tensor_cores.cu"

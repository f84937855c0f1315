// The emulator build of cuda/gemm.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm.cu"

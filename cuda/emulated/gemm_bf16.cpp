// The emulator build of cuda/gemm_bf16.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_bf16.cu"

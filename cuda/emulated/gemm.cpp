// The emulator build of cuda/gemm.cu (g++ against cuda/emu/emulator.h).
#include "cuda/gemm.cu"

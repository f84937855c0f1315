// The emulator build of cuda/reduce.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/reduce.cu"

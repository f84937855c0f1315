// The emulator build of cuda/memory.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/memory.cu"

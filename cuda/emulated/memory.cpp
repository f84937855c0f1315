// The emulator build of cuda/memory.cu (g++ against cuda/emu/emulator.h).
#include "cuda/memory.cu"

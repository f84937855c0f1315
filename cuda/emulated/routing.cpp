// The emulator build of cuda/routing.cu (g++ against cuda/emu/emulator.h).
#include "cuda/routing.cu"

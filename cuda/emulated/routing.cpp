// The emulator build of cuda/routing.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/routing.cu"

// The emulator build of cuda/rope.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/rope.cu"

// The emulator build of cuda/rope.cu (g++ against cuda/emu/emulator.h).
#include "cuda/rope.cu"

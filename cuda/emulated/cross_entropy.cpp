// The emulator build of cuda/cross_entropy.cu (g++ against cuda/emu/emulator.h).
#include "cuda/cross_entropy.cu"

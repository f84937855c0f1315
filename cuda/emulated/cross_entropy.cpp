// The emulator build of cuda/cross_entropy.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/cross_entropy.cu"

// The emulator build of cuda/elementwise.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/elementwise.cu"

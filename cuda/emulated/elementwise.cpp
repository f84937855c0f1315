// The emulator build of cuda/elementwise.cu (g++ against cuda/emu/emulator.h).
#include "cuda/elementwise.cu"

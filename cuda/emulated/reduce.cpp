// The emulator build of cuda/reduce.cu (g++ against cuda/emu/emulator.h).
#include "cuda/reduce.cu"

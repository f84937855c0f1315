// The emulator build of cuda/swiglu.cu (g++ against cuda/emu/emulator.h).
#include "cuda/swiglu.cu"

// The emulator build of cuda/swiglu.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/swiglu.cu"

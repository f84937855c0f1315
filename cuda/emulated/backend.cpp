// The emulator build of cuda/backend.cu (g++ against cuda/emu/emulator.h).
#include "cuda/backend.cu"

// The emulator build of cuda/embedding.cu (g++ against cuda/emu/emulator.h).
#include "cuda/embedding.cu"

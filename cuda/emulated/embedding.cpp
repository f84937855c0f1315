// The emulator build of cuda/embedding.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/embedding.cu"

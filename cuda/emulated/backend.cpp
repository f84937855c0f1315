// The emulator build of cuda/backend.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/backend.cu"

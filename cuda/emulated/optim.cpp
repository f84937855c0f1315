// The emulator build of cuda/optim.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/optim.cu"

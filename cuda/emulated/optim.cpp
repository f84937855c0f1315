// The emulator build of cuda/optim.cu (g++ against cuda/emu/emulator.h).
#include "cuda/optim.cu"

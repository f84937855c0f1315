// The emulator build of cuda/softmax.cu (g++ against cuda/emu/emulator.h).
#include "cuda/softmax.cu"

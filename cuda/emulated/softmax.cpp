// The emulator build of cuda/softmax.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/softmax.cu"

// The emulator build of cuda/device_error.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/device_error.cu"

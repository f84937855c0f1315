// The emulator build of cuda/rms_norm.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/rms_norm.cu"

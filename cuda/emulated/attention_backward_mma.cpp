// The emulator build of cuda/attention_backward_mma.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/attention_backward_mma.cu"

// The emulator build of cuda/attention_forward.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/attention_forward.cu"

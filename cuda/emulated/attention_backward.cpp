// The emulator build of cuda/attention_backward.cu (g++ against cuda/emu/emulator.h).
#include "cuda/attention_backward.cu"

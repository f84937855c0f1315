// The emulator build of cuda/gemm_ladder/10_async_pipeline.cu (g++ against cuda/emulator/emulator.h).
#include "cuda/gemm_ladder/10_async_pipeline.cu"

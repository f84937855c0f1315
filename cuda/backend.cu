// backend.cu — the CUDA table of this build (tensor/backend.h): the host function of every
// kernel family (cuda/kernels.h), entry by entry. cuda/cuda.cpp decides which build's table
// serves Device::CUDA. The designated initialisers make the compiler check that each
// function lands in the entry of its name.
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {
#ifdef __CUDACC__
constexpr const char* kName = "cuda";
#else
constexpr const char* kName = "cuda (emulator)";
#endif

const Backend table{
    .name = kName,
    .allocate = allocate,
    .deallocate = deallocate,
    .to_host = to_host,
    .from_host = from_host,
    .synchronize = synchronize,
    .fill = fill,
    .arange = arange,
    .copy = copy,
    .unary = unary,
    .binary = binary,
    .where = where,
    .reduce = reduce,
    .softmax = softmax,
    .softmax_backward = softmax_backward,
    .gemm = gemm,
    .index_select_rows = index_select_rows,
    .index_add_rows = index_add_rows,
    .gather_last = gather_last,
    .scatter_add_last = scatter_add_last,
    .topk_last = topk_last,
    .cross_entropy = cross_entropy,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .attention_keep_bytes = 0,
    .rms_norm_forward = rms_norm_forward,
    .rms_norm_backward = rms_norm_backward,
    .swiglu_forward = swiglu_forward,
    .swiglu_backward = swiglu_backward,
    .sigmoid_gate_forward = sigmoid_gate_forward,
    .sigmoid_gate_backward = sigmoid_gate_backward,
    .rope = rope,
    .adamw_step = adamw_step,
    .sgd_step = sgd_step,
    .sum_squares = sum_squares,
    .scale_list = scale_list,
};
}  // namespace

const Backend& backend_table() { return table; }

}  // namespace gg::cuda::GG_CUDA_BUILD

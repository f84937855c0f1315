// kernels.h — the host side of every CUDA kernel family: one function per entry of the
// backend table (tensor/backend.h), with the same signature and the same meaning as the
// CPU's. cuda/backend.cu assembles them into the table. Each family is one .cu file:
//
//   elementwise.cu       fill, arange, copy, unary, binary, where (strided N-d views)
//   reduce.cu            reduce, sum_squares (over a tensor list: cuda/tensor_list.h)
//   softmax.cu           softmax, softmax_backward
//   cross_entropy.cu     cross_entropy (the loss, and its gradient in the same pass)
//   embedding.cu         index_select_rows, index_add_rows
//   routing.cu           gather_last, scatter_add_last, topk_last (MoE)
//   rms_norm.cu          rms_norm_forward, rms_norm_backward
//   swiglu.cu            swiglu_forward, swiglu_backward, sigmoid_gate_forward, sigmoid_gate_backward
//   rope.cu              rope
//   optim.cu             adamw_step and scale_list (over a tensor list: cuda/tensor_list.h), sgd_step
//   attention_forward.cu, attention_backward.cu   FlashAttention-style fused attention;
//                        bf16 with D 16, 32, 64 or 128 goes to the tensor-core kernels of
//                        attention_forward_mma.cu, attention_backward_mma.cu
//   gemm.cu              gemm: our warp-tiled kernel (cuBLAS is an option, gpu only);
//                        bf16 goes to the tensor-core kernel of gemm_bf16.cu
//   memory.cu            allocate, deallocate, to_host, from_host, synchronize
//
// The same declarations serve both builds (see GG_CUDA_BUILD in cuda/launch.h). Every entry
// but the optimisers takes bf16 too (cuda/dispatch_floating.h says how it is computed).
#pragma once
#include "cuda/launch.h"
#include "tensor/backend.h"

namespace gg::cuda::GG_CUDA_BUILD {

void* allocate(size_t nbytes);
void deallocate(void* ptr, size_t nbytes);
void to_host(void* host_dst, const void* device_src, size_t nbytes);
void from_host(void* device_dst, const void* host_src, size_t nbytes);
void synchronize();

void fill(const View& out, double value);
void arange(const View& out, double start, double step);
void copy(const View& out, const View& in);
void unary(UnaryOp op, const View& out, const View& in, double exponent);
void binary(BinaryOp op, const View& out, const View& a, const View& b);
void where(const View& out, const View& cond, const View& a, const View& b);

void reduce(ReduceOp op, const View& out, const View& in, int64_t outer, int64_t R, int64_t inner);
void sum_squares(const View& acc, std::span<const View> xs);

void softmax(const View& out, const View& in, int64_t rows, int64_t cols, bool log);
void softmax_backward(const View& dx, const View& y, const View& dy, int64_t rows, int64_t cols, bool log);

void cross_entropy(const View& loss, const View& dlogits, const View& logits, const View& targets,
                   const View& row_scale, int64_t ignore_index);

void index_select_rows(const View& out, const View& table, const View& idx);
void index_add_rows(const View& table, const View& idx, const View& src);

void gather_last(const View& out, const View& in, const View& idx);
void scatter_add_last(const View& out, const View& idx, const View& src);
void topk_last(const View& values, const View& indices, const View& in, int64_t k);

void rms_norm_forward(const View& y, const View& rstd, const View& x, const View& weight, int64_t rows, int64_t cols,
                      double eps);
void rms_norm_backward(const View& dx, const View& dweight, const View& dy, const View& x, const View& weight,
                       const View& rstd, int64_t rows, int64_t cols);
void swiglu_forward(const View& y, const View& a, const View& b);
void swiglu_backward(const View& da, const View& db, const View& dy, const View& a, const View& b);
void sigmoid_gate_forward(const View& y, const View& s, const View& a);
void sigmoid_gate_backward(const View& ds, const View& da, const View& dy, const View& s, const View& a);
void rope(const View& out, const View& x, const View& cos, const View& sin, bool transpose);

void adamw_step(std::span<const AdamWTensors> params);
void sgd_step(const SGDStep& s, const View& param, const View& grad, const View& momentum_buffer);
void scale_list(double factor, std::span<const View> xs);

void attention_forward(const AttentionShape& s, const View& O, const View& lse, const View& probs, const View& Q,
                       const View& K, const View& V, const View& sink);
// Recomputes the probabilities whether or not probs holds them (tensor/backend.h).
void attention_backward(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
                        const View& Q, const View& K, const View& V, const View& O, const View& lse,
                        const View& probs);

void gemm(DType dtype, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
          const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b, double beta,
          void* C, int64_t ldc, int64_t stride_c);

// The whole table of this build (cuda/backend.cu).
const Backend& backend_table();

}  // namespace gg::cuda::GG_CUDA_BUILD

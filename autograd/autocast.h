// autocast.h — mixed precision as torch.autocast: a scope in which the ops that multiply
// matrices run in a 16-bit dtype and the ops that sum many terms stay in float32.
//
//   {
//       gg::Autocast guard(DType::bf16);        // f32: a scope that changes nothing
//       out = model.forward(ids, targets);      // GEMMs in bfloat16, accumulated in float32
//   }
//   out.loss.backward();                         // outside: backward follows forward's dtypes
//
// Inside the scope, as in PyTorch's policy for CUDA:
//   lower  — matmul (so every Linear) and scaled_dot_product_attention cast float32 inputs
//            to bfloat16 and return bfloat16. Half the bytes per operand, and the products
//            lose nothing that matters: bfloat16 keeps float32's exponent, so no value
//            overflows, and each product is summed in float32.
//   float32 — softmax, log_softmax, logsumexp, cross-entropy, the z-loss, RMSNorm, sum and
//            mean cast bfloat16 inputs up to float32: each adds up many terms, and a sum in
//            an 8-bit significand stops growing once it is 2⁸ times the next term.
//   promote — an op with a bfloat16 and a float32 operand (add, mul, where, RoPE, ...)
//            widens the bfloat16 one: the residual stream stays float32.
// Every cast is a differentiable `to` whose backward casts the gradient back, so the
// parameters (float32 "master weights") receive float32 gradients and an optimiser never
// sees bfloat16. Outside any scope nothing is cast, and mixing dtypes is an error.
#pragma once
#include <optional>

#include "tensor/tensor.h"

namespace gg {

class Autocast {
public:
    // dtype: bf16 turns autocast on until the guard goes; f32 turns it off (a nested scope
    // that runs in full precision). Any other dtype is an error.
    explicit Autocast(DType dtype);
    ~Autocast();
    Autocast(const Autocast&) = delete;
    Autocast& operator=(const Autocast&) = delete;

private:
    std::optional<DType> previous_;
};

// The dtype of the innermost active scope on this thread; empty when autocast is off.
std::optional<DType> autocast_dtype();

// For the ops of the lower list: x in the autocast dtype when a scope is on and x is float32;
// x itself otherwise.
Tensor autocast_lower(const Tensor& x);
// For the ops of the float32 list: x in float32 when a scope is on and x is bfloat16.
Tensor autocast_float32(const Tensor& x);
// For the promote rule: whether a scope is on and one of a, b is bfloat16, the other float32
// (the op then runs on autocast_float32 of each).
bool autocast_mixes(const Tensor& a, const Tensor& b);

}  // namespace gg

// Tutorial 11 — mixed precision: what bfloat16 keeps, what it loses, and why a model
// trained in it still sums, normalises and updates its weights in float32.
//
// Build and run from the repository root:
//   meson compile -C build tutorials/tutorial_11_mixed_precision && ./build/tutorials/tutorial_11_mixed_precision
#include <cmath>
#include <cstdio>

#include "gatedgrad.h"

namespace {

// A float format by its field widths: the largest finite value, the smallest normal one and
// the gap between 1 and the next value (the relative precision of every value).
void describe_format(const char* name, int exponent_bits, int mantissa_bits) {
    const int bias = (1 << (exponent_bits - 1)) - 1;
    const double largest = std::ldexp(2 - std::ldexp(1, -mantissa_bits), bias);
    const double smallest_normal = std::ldexp(1, 1 - bias);
    std::printf("%-9s %8d %8d %12.3g %12.3g %12.3g\n", name, exponent_bits, mantissa_bits, largest, smallest_normal,
                std::ldexp(1, -mantissa_bits));
}

// x rounded to float16 (5 exponent bits, 10 mantissa bits), as the hardware stores it.
float to_f16(float x) { return float(_Float16(x)); }

}  // namespace

int main() {
    // 1. Three 16-or-19-bit formats next to float32. bfloat16 keeps float32's 8 exponent
    //    bits (its range) and drops 16 mantissa bits; float16 splits its bits the other way;
    //    TF32 is what NVIDIA's tensor cores read float32 inputs as (19 bits in 32).
    std::printf("1. formats: exponent and mantissa bits, range, precision\n");
    std::printf("%-9s %8s %8s %12s %12s %12s\n", "format", "exp bits", "man bits", "largest", "min normal", "1 ulp at 1");
    describe_format("float32", 8, 23);
    describe_format("TF32", 8, 10);
    describe_format("float16", 5, 10);
    describe_format("bfloat16", 8, 7);

    // 2. What each keeps of a few numbers. float16 loses the small and the large ones (a
    //    gradient of 1e-8 becomes 0, an activation of 1e5 becomes inf: hence loss scaling);
    //    bfloat16 keeps every magnitude, with 2-3 significant digits.
    std::printf("\n2. rounding a few float32 values\n%14s %14s %14s\n", "float32", "float16", "bfloat16");
    for (float x : {1.0f / 3, 257.0f, 1e-8f, 1e5f, 3e38f})
        std::printf("%14.7g %14.7g %14.7g\n", x, to_f16(x), gg::round_to_bf16(x));

    // 3. A sum that stays in bfloat16 stops growing: once the total is 2^8 times the term,
    //    adding the term changes it by less than half a unit in its last place. 10000 terms
    //    of 0.01 should give 100.
    const int n = 10000;
    float single = 0;
    gg::bfloat16 half = 0.0f;
    for (int i = 0; i < n; ++i) {
        single += 0.01f;
        half = float(half) + float(gg::bfloat16(0.01f));  // stored back in bfloat16 every time
    }
    std::printf("\n3. adding 0.01 ten thousand times\n   float32 accumulator:  %.4f\n   bfloat16 accumulator: %.4f\n",
                single, float(half));
    //    The library's bfloat16 kernels keep their sums in float32 (or wider) and round once.
    //    The terms themselves are bfloat16(0.01) = 0.0100098, so their sum is 100.098, not
    //    100; stored as bfloat16 (unit 0.5 at 100) it reads 100, and so does a matmul's.
    const gg::Tensor terms = gg::full({n}, 0.01, gg::DType::bf16);
    std::printf("   each term bfloat16(0.01) = %.7f; their float32 sum %.4f\n", terms.narrow(0, 0, 1).item(),
                gg::sum(terms.to(gg::DType::f32)).item());
    std::printf("   gg::sum of a bfloat16 tensor of them: %.4f (dtype %s)\n", gg::sum(terms).item(),
                gg::dtype_name(gg::sum(terms).dtype()));
    const gg::Tensor dot = gg::matmul(gg::ones({1, n}, gg::DType::bf16), terms.view({n, 1}));
    std::printf("   a bfloat16 matmul (1, %d) @ (%d, 1):  %.4f (dtype %s)\n", n, n, dot.item(),
                gg::dtype_name(dot.dtype()));

    // 4. Why the weights stay float32 ("master weights"): an update of lr · g = 1e-3 on a
    //    weight of 1 is below half of bfloat16's unit at 1 (2^-8 = 0.0039), so a bfloat16
    //    weight never moves; a float32 one takes every step.
    float w32 = 1;
    gg::bfloat16 w16 = 1.0f;
    for (int step = 0; step < 100; ++step) {
        w32 -= 1e-3f;
        w16 = float(w16) - 1e-3f;
    }
    std::printf("\n4. 100 updates of -0.001 on a weight of 1\n   float32 weight:  %.4f\n   bfloat16 weight: %.4f\n", w32,
                float(w16));

    // 5. Autocast puts these together, as torch.autocast does: inside the scope a Linear's
    //    GEMM takes bfloat16 copies of its float32 input and weight and returns bfloat16;
    //    the loss (a softmax's sums) is float32; backward leaves float32 gradients on the
    //    float32 parameters, so the optimiser never sees bfloat16.
    gg::Generator gen(0);
    gg::nn::Linear layer(16, 8);
    const gg::Tensor x = gg::randn({4, 16}, gen), targets = gg::randint(0, 8, {4}, gen);
    gg::Tensor logits, loss;
    {
        gg::Autocast guard(gg::DType::bf16);
        logits = layer.forward(x);
        loss = gg::cross_entropy(logits, targets);
    }
    loss.backward();
    std::printf("\n5. under gg::Autocast(bf16)\n   input %s, weight %s -> logits %s -> loss %s\n",
                gg::dtype_name(x.dtype()), gg::dtype_name(layer.weight.dtype()), gg::dtype_name(logits.dtype()),
                gg::dtype_name(loss.dtype()));
    std::printf("   weight.grad %s, bias.grad %s\n", gg::dtype_name(layer.weight.grad().dtype()),
                gg::dtype_name(layer.bias.grad().dtype()));
}

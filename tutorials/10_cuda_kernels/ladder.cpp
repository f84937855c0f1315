// ladder.cpp — part 2 of tutorial 10: the GEMM ladder (cuda/gemm_ladder/). Ten kernels
// compute the same C = A·B, each one optimisation further than the last. Every rung runs here
// in the emulator, on a small problem whose sizes fit no tile, and is checked against a
// plain triple loop. The emulator measures no time; what it can show is what each rung
// changes, and from the rung's tiling (gg::cuda::tiling, ladder.h) how many loads from global
// and shared memory every multiply-add costs: the quantity the ladder drives down.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "cuda/gemm_ladder/ladder.h"
#include "tensor/bf16.h"
#include "tensor/random.h"
#include "tutorials/10_cuda_kernels/parts.h"

namespace tutorial {

namespace {

using gg::cuda::Rung;

struct RungNote {
    Rung rung;
    const char* file;
    const char* change;
};

// One line each of what the rung's file explains at its top.
constexpr RungNote kNotes[] = {
    {Rung::naive, "1_naive.cu", "one thread per element of C; the lanes of a warp walk down a column"},
    {Rung::coalesced, "2_coalesced.cu", "lanes walk along a row: a warp's 32 loads of B are one transaction"},
    {Rung::shared_tiles, "3_shared_tiles.cu", "32x32 tiles of A and B staged in shared memory, reused 32 times"},
    {Rung::register_1d, "4_register_1d.cu", "each thread a column of 8 results: a value of B serves 8 of them"},
    {Rung::register_2d, "5_register_2d.cu", "each thread an 8x8 block: an outer product of 8 + 8 registers"},
    {Rung::vectorized, "6_vectorized.cu", "float4: one instruction moves 4 floats; A's slice transposed"},
    {Rung::warp_tiling, "7_warp_tiling.cu", "block -> warp -> thread tiles: no shared-memory bank conflicts"},
    {Rung::double_buffered, "8_double_buffered.cu", "two shared buffers: the next slice loads during this one's FMAs"},
    {Rung::tensor_cores, "9_tensor_cores.cu", "bf16 inputs, mma.sync on tensor cores fed by ldmatrix, f32 sums"},
    {Rung::async_pipeline, "10_async_pipeline.cu", "cp.async 3 slices ahead into 4 swizzled stages of shared memory"},
};

// num/den in lowest terms: "1/64", "9/8", "2".
std::string fraction(int num, int den) {
    const int g = std::gcd(num, den);
    num /= g, den /= g;
    return den == 1 ? std::to_string(num) : std::to_string(num) + "/" + std::to_string(den);
}

// Loads per multiply-add of a tile of rows × cols results that loads each operand once for
// all of them: a column of A (rows values) and a row of B (cols values) per k, for rows·cols
// multiply-adds, so (rows + cols) / (rows · cols).
std::string loads_per_fma(int rows, int cols) { return fraction(rows + cols, rows * cols); }

// What one rung's tiling costs, printed from its constants; inputs of `bytes` bytes each.
void print_tiling(const gg::cuda::Tiling& t, int M, int N, int bytes) {
    const int blocks = ((M + t.block_m - 1) / t.block_m) * ((N + t.block_n - 1) / t.block_n);
    const int slots = blocks * t.block_m * t.block_n;
    std::printf("  %d threads a block, %dx%d of C a block, %d a thread; %dx%d takes %d block%s, %d%% of their %d "
                "results inside C\n",
                t.threads, t.block_m, t.block_n, t.block_m * t.block_n / t.threads, M, N, blocks,
                blocks == 1 ? "" : "s", 100 * M * N / slots, slots);
    // Without shared memory every multiply-add loads its two operands from global memory
    // (caches aside); with it, a block loads each element of a K slice once for its whole tile.
    const bool staged = t.slice_k > 0;
    const int global_m = staged ? t.block_m : t.reg_m, global_n = staged ? t.block_n : t.reg_n;
    const double global = double(global_m + global_n) / (global_m * global_n);
    std::printf("  loads per multiply-add: global %s (%.4g FLOP per byte)", loads_per_fma(global_m, global_n).c_str(),
                2.0 / (bytes * global));
    if (!staged) {
        std::printf(", no shared memory\n");
        return;
    }
    std::printf(", shared %s", loads_per_fma(t.reg_m, t.reg_n).c_str());
    if (t.vector > 1)
        std::printf(" (%d to a load: %s of a load instruction)", t.vector,
                    fraction(t.reg_m + t.reg_n, t.reg_m * t.reg_n * t.vector).c_str());
    std::printf("\n");
    if (t.stages > 1)
        std::printf("  %d K slices of %d in shared memory at once: %d loading while one is multiplied\n", t.stages,
                    t.slice_k, t.stages - 1);
}

// Per element of C (M, N), the sum of |a_k · b_k|: the scale a rounding error of the terms
// is measured against.
std::vector<double> term_magnitudes(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B) {
    std::vector<double> scale(size_t(M) * N, 0.0);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n)
            for (int k = 0; k < K; ++k) scale[m * N + n] += std::abs(double(A[m * K + k]) * B[k * N + n]);
    return scale;
}

// max_i |x_i − y_i| / scale_i.
double max_relative_error(const std::vector<float>& x, const std::vector<double>& y, const std::vector<double>& scale) {
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(double(x[i]) - y[i]) / scale[i]);
    return worst;
}

}  // namespace

bool part_gemm_ladder() {
    // Sizes on no tile grid, so that every rung's edge handling runs; N and K multiples of 8,
    // so that rungs 6–8 take their float4 path (vector_tiles.h) and rungs 9–10 their 16-byte
    // chunks and cp.async (mma_tiles.h).
    const int M = 70, N = 56, K = 40;
    std::printf("\n== 4. the GEMM ladder: C = A B with A (%d, %d), B (%d, %d), each rung in the emulator\n", M, K, K,
                N);
    gg::Generator gen(10);
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N);
    for (auto* matrix : {&A, &B})
        for (float& x : *matrix) x = float(2 * gen.uniform() - 1);

    // The plain triple loop, summed in double.
    std::vector<double> reference(size_t(M) * N, 0.0);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n)
            for (int k = 0; k < K; ++k) reference[m * N + n] += double(A[m * K + k]) * B[k * N + n];
    const std::vector<double> scale = term_magnitudes(M, N, K, A, B);
    // A dot product of K terms summed in float is off by at most K·2⁻²⁴ of Σ|terms|, whatever
    // the order of the additions: the bound rungs 1–8 are held to.
    const double float_bound = K * std::ldexp(1.0, -24);
    std::vector<double> float_result;  // rung 1's C: the f32 result the tensor-core rungs are held against
    bool all_match = true;

    // The tensor-core rungs take A and B in bf16.
    std::vector<gg::bfloat16> A16(A.begin(), A.end()), B16(B.begin(), B.end());
    for (const RungNote& note : kNotes) {
        const bool bf16 = gg::cuda::takes_bf16(note.rung);
        std::vector<float> C(size_t(M) * N);
        if (bf16) gg::cuda::emulated::gemm_ladder(note.rung, M, N, K, 1.0f, A16.data(), B16.data(), 0.0f, C.data());
        else gg::cuda::emulated::gemm_ladder(note.rung, M, N, K, 1.0f, A.data(), B.data(), 0.0f, C.data());
        std::printf("\nrung %d %s (cuda/gemm_ladder/%s): %s\n", int(note.rung), gg::cuda::rung_name(note.rung),
                    note.file, note.change);
        print_tiling(gg::cuda::tiling(note.rung), M, N, bf16 ? 2 : 4);
        if (!bf16) {
            const double error = max_relative_error(C, reference, scale);
            std::printf("  largest |C - triple loop| relative to the sum of |a b|: %.1e (bound K x 2^-24 = %.1e)\n",
                        error, float_bound);
            all_match = all_match && error <= float_bound;
            if (note.rung == Rung::naive) float_result.assign(C.begin(), C.end());
            continue;
        }
        // An input rounded to 7 stored mantissa bits is off by at most 2^-8 of itself, so a
        // product of two by about twice that: the bound on the error per term.
        const int mantissa = 7;
        const double input_bound = std::ldexp(2.0, -(mantissa + 1));
        const float x = 0.1f, rounded = gg::round_to_bf16(x);
        std::printf("  bf16 keeps %d of float's 23 mantissa bits: 0.1f becomes %.9g (off by %.1e of itself)\n",
                    mantissa, rounded, std::abs(rounded - x) / x);
        const double error = max_relative_error(C, float_result, scale);
        std::printf("  largest |C - rung 1's f32 C| relative to the sum of |a b|: %.1e (bound 2 x 2^-%d = %.1e)\n",
                    error, mantissa + 1, input_bound);
        all_match = all_match && error <= input_bound + 2 * float_bound;
    }
    std::printf("\nThe emulator gives no speed: on a GPU, bench/gpu measures every rung against cuBLAS.\n");
    return all_match;
}

}  // namespace tutorial

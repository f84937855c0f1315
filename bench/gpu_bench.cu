// gpu_bench.cu — the GPU measurements behind bench/gpu: every kernel of the library against
// the best a user could pick instead, in one process, as JSON lines.
//
//   gpu_bench gemm|attention|memory [--quick]   → one JSON object per line on stdout
//
//   gemm       every rung of the teaching ladder (cuda/gemm_ladder/), the library's own GEMM
//              (cuda/gemm.cu) and cuBLAS in FP32, TF32 and bf16 (f32 accumulation), at
//              1024³, 2048³, 4096³: TFLOP/s, and the share of cuBLAS at the same precision;
//              the library's bf16 GEMM (cuda/gemm_bf16.cu) against cuBLAS bf16 with bf16 C;
//              then the library's GEMM on the products of a medium-preset training step.
//   attention  the fused FlashAttention-style kernels (cuda/attention_*.cu), forward and
//              forward + backward, B 8, H 8, D 64, causal, T 1024/2048/4096, against the
//              materialised baseline: S = Q Kᵀ by cuBLAS, mask, our softmax, O = P V by cuBLAS;
//              then the bf16 tensor-core kernels (cuda/attention_*_mma.cu) on the same inputs
//              rounded to bf16, against the f32 fused ones.
//   memory     the memory-bound kernels on 64 MiB operands in GB/s, against the device's own
//              device-to-device copy (cudaMemcpy), measured in the same run.
//
// Every time is the median of several runs, each bracketed by CUDA events on the library's
// stream, after a warm-up run. A result that is wrong (checked against cuBLAS or against the
// unfused path) is still reported, with "ok": false.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda/cuda.h"
#include "cuda/gemm.h"
#include "cuda/gemm_ladder/ladder.h"
#include "cuda/launch.h"
#include "gatedgrad.h"

using namespace gg;

namespace {

bool quick = false;  // --quick: the smallest size of each section only (a smoke run)

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(s));
}

// Median milliseconds of fn over at least 5 runs and at least 100 ms (at most 50 runs).
double median_ms(const std::function<void()>& fn) {
    cudaStream_t stream = cuda::current_stream();
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    fn();  // warm-up: first-touch allocations, cuBLAS heuristics, instruction caches
    check(cudaStreamSynchronize(stream), "warm-up");
    std::vector<double> times;
    double total = 0;
    while (times.size() < 50 && (times.size() < 5 || total < 100)) {
        check(cudaEventRecord(start, stream), "cudaEventRecord");
        fn();
        check(cudaEventRecord(stop, stream), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        times.push_back(ms);
        total += ms;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// One JSON line: "section" and "name" first, then numbers.
void emit(const std::string& section, const std::string& name, const std::vector<std::pair<std::string, double>>& nums,
          bool ok = true, const std::string& note = "") {
    std::string line = "{\"section\": \"" + section + "\", \"name\": \"" + name + "\"";
    for (const auto& [key, value] : nums) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6g", value);
        line += ", \"" + key + "\": " + (std::isfinite(value) ? buf : "null");
    }
    line += std::string(", \"ok\": ") + (ok ? "true" : "false");
    if (!note.empty()) line += ", \"note\": \"" + note + "\"";
    std::printf("%s}\n", line.c_str());
    std::fflush(stdout);
}

float* ptr(const Tensor& t) { return static_cast<float*>(t.view_desc().data); }

// max |a − b| / max |b|: how far a result is from the reference, relative to its scale.
double relative_error(const Tensor& a, const Tensor& b) {
    const double scale = amax(abs(b), {}).item();
    return amax(abs(a - b), {}).item() / std::max(scale, 1e-30);
}

// ---- GEMM ---------------------------------------------------------------------------------

__global__ void to_bf16(const float* in, __nv_bfloat16* out, int64_t n) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16(in[i]);
}

__global__ void from_bf16(const __nv_bfloat16* in, float* out, int64_t n) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __bfloat162float(in[i]);
}

// Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ: cuBLAS gets B first, with the sizes swapped.
void cublas_gemm(cublasHandle_t h, cublasComputeType_t compute, cudaDataType_t in_type, int n, const void* A,
                 const void* B, float* C) {
    const float one = 1, zero = 0;
    check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, in_type, n, A, in_type, n, &zero, C, CUDA_R_32F,
                       n, compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
}

void bench_gemm() {
    cublasHandle_t h = cuda::cublas_handle();
    const std::vector<int> sizes = quick ? std::vector<int>{1024} : std::vector<int>{1024, 2048, 4096};
    for (int n : sizes) {
        Generator gen(1);
        const Tensor A = randn({n, n}, gen, DType::f32, Device::CUDA), B = randn({n, n}, gen, DType::f32, Device::CUDA);
        const Tensor C = zeros({n, n}, DType::f32, Device::CUDA), ref = zeros({n, n}, DType::f32, Device::CUDA);
        const int64_t nn = int64_t(n) * n;
        const Tensor A16 = zeros({nn / 2}, DType::f32, Device::CUDA), B16 = zeros({nn / 2}, DType::f32, Device::CUDA);
        auto* a16 = reinterpret_cast<__nv_bfloat16*>(ptr(A16));
        auto* b16 = reinterpret_cast<__nv_bfloat16*>(ptr(B16));
        cuda::launch("to_bf16", to_bf16, dim3(unsigned((nn + 255) / 256)), dim3(256), 0, ptr(A), a16, nn);
        cuda::launch("to_bf16", to_bf16, dim3(unsigned((nn + 255) / 256)), dim3(256), 0, ptr(B), b16, nn);
        const double flop = 2.0 * double(n) * n * n;
        const auto tflops = [&](double ms) { return flop / (ms * 1e-3) / 1e12; };

        // The references: cuBLAS at each precision (pedantic FP32 keeps TF32 out of it).
        struct Reference {
            const char* name;
            cublasComputeType_t compute;
            cudaDataType_t type;
            const void *a, *b;
            double ms;
        };
        Reference refs[] = {{"cublas_fp32", CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, ptr(A), ptr(B), 0},
                            {"cublas_tf32", CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, ptr(A), ptr(B), 0},
                            {"cublas_bf16", CUBLAS_COMPUTE_32F, CUDA_R_16BF, a16, b16, 0}};
        for (Reference& r : refs) {
            r.ms = median_ms([&] { cublas_gemm(h, r.compute, r.type, n, r.a, r.b, ptr(C)); });
            emit("gemm", r.name, {{"n", n}, {"ms", r.ms}, {"tflops", tflops(r.ms)}});
        }
        cublas_gemm(h, CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F, n, ptr(A), ptr(B), ptr(ref));

        // Our kernels, each against the cuBLAS of its own precision.
        const auto ours = [&](const std::string& name, const std::function<void()>& run, const Reference& peer,
                              double tolerance) {
            run();
            const double err = relative_error(C, ref);
            const double ms = median_ms(run);
            emit("gemm", name,
                 {{"n", n}, {"ms", ms}, {"tflops", tflops(ms)}, {"pct_of_cublas", 100 * peer.ms / ms},
                  {"rel_error", err}},
                 err < tolerance, std::string("vs ") + peer.name);
        };
        // Rungs 1–8 take the f32 inputs, against FP32 cuBLAS; the tensor-core rungs 9–10 take the
        // bf16 ones and write f32, as cublas_bf16 does, against it.
        const auto* a16_ladder = reinterpret_cast<const bfloat16*>(a16);
        const auto* b16_ladder = reinterpret_cast<const bfloat16*>(b16);
        for (cuda::Rung rung : cuda::kRungs) {
            if (n > 2048 && rung == cuda::Rung::naive) continue;  // minutes of a strided walk: skipped at 4096
            const bool bf16 = cuda::takes_bf16(rung);
            const auto run = [&] {
                if (bf16) cuda::gpu::gemm_ladder(rung, n, n, n, 1.f, a16_ladder, b16_ladder, 0.f, ptr(C));
                else cuda::gpu::gemm_ladder(rung, n, n, n, 1.f, ptr(A), ptr(B), 0.f, ptr(C));
            };
            ours(std::string("rung_") + std::to_string(int(rung)) + "_" + cuda::rung_name(rung), run,
                 bf16 ? refs[2] : refs[0], bf16 ? 2e-2 : 1e-5);
        }
        const Backend& table = backend(Device::CUDA);
        ours("library_gemm",
             [&] {
                 table.gemm(DType::f32, 1, false, false, n, n, n, 1.0, ptr(A), n, 0, ptr(B), n, 0, 0.0, ptr(C), n, 0);
             },
             refs[0], 1e-5);

        // The library's bf16 GEMM (cuda/gemm_bf16.cu, mma.sync) and cuBLAS bf16 through the same
        // table contract: the same bf16 inputs, C in bf16, sums in f32. The error is against FP32
        // cuBLAS on the unrounded inputs: bf16 inputs and output, ~1e-2 relative.
        const Tensor C16 = zeros({nn / 2}, DType::f32, Device::CUDA);
        const auto bf16_gemm = [&](bool cublas) {
            (cublas ? cuda::gpu::gemm_cublas : table.gemm)(DType::bf16, 1, false, false, n, n, n, 1.0, a16, n, 0, b16,
                                                           n, 0, 0.0, ptr(C16), n, 0);
        };
        const double cublas_bf16_ms = median_ms([&] { bf16_gemm(true); });
        emit("gemm", "cublas_bf16_out", {{"n", n}, {"ms", cublas_bf16_ms}, {"tflops", tflops(cublas_bf16_ms)}});
        bf16_gemm(false);
        cuda::launch("from_bf16", from_bf16, dim3(unsigned((nn + 255) / 256)), dim3(256), 0,
                     reinterpret_cast<const __nv_bfloat16*>(ptr(C16)), ptr(C), nn);
        const double bf16_err = relative_error(C, ref);
        const double bf16_ms = median_ms([&] { bf16_gemm(false); });
        emit("gemm", "library_gemm_bf16",
             {{"n", n}, {"ms", bf16_ms}, {"tflops", tflops(bf16_ms)}, {"pct_of_cublas", 100 * cublas_bf16_ms / bf16_ms},
              {"rel_error", bf16_err}},
             bf16_err < 2e-2, "vs cublas_bf16_out");
    }
}

// The library's GEMM on the products of one training step of the medium preset (d_model 384,
// 32 × 256 tokens), against cuBLAS FP32 on the same call, for each width W a weight maps 384
// features to (384: attention's projections; 1024: the SwiGLU hidden layer; 1152 and 1536:
// three and four projections side by side): the forward x·Wᵀ, the input gradient dY·W and
// the weight gradient dYᵀ·X, whose long K takes the split-K path.
void bench_gemm_training_shapes() {
    struct Shape {
        std::string name;
        bool trans_a, trans_b;
        int64_t M, N, K;
    };
    const int64_t tokens = 8192, d = 384;
    std::vector<Shape> shapes;
    for (int64_t width : {d, int64_t(1024), 3 * d, 4 * d}) {
        const std::string w = std::to_string(width);
        shapes.push_back({"x_wt_" + w, false, true, tokens, width, d});
        shapes.push_back({"dy_w_" + w, false, false, tokens, d, width});
        shapes.push_back({"dyt_x_" + w, true, false, width, d, tokens});
    }
    const Backend& table = backend(Device::CUDA);
    for (const Shape& s : shapes) {
        Generator gen(2);
        const Tensor A = randn({s.trans_a ? s.K : s.M, s.trans_a ? s.M : s.K}, gen, DType::f32, Device::CUDA);
        const Tensor B = randn({s.trans_b ? s.N : s.K, s.trans_b ? s.K : s.N}, gen, DType::f32, Device::CUDA);
        const Tensor C = zeros({s.M, s.N}, DType::f32, Device::CUDA), ref = zeros({s.M, s.N}, DType::f32, Device::CUDA);
        const int64_t lda = A.shape()[1], ldb = B.shape()[1];
        const auto run = [&](bool cublas, const Tensor& out) {
            (cublas ? cuda::gpu::gemm_cublas : table.gemm)(DType::f32, 1, s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0,
                                                           ptr(A), lda, 0, ptr(B), ldb, 0, 0.0, ptr(out), s.N, 0);
        };
        run(true, ref);
        run(false, C);
        const double err = relative_error(C, ref);
        const double theirs = median_ms([&] { run(true, ref); }), ms = median_ms([&] { run(false, C); });
        const double flop = 2.0 * double(s.M) * double(s.N) * double(s.K);
        emit("gemm", "train_shape_" + s.name,
             {{"M", double(s.M)}, {"N", double(s.N)}, {"K", double(s.K)}, {"ms", ms}, {"tflops", flop / ms / 1e9},
              {"cublas_ms", theirs}, {"pct_of_cublas", 100 * theirs / ms}, {"rel_error", err}},
             err < 1e-5, "vs cublas_fp32");
    }
}

// ---- attention ----------------------------------------------------------------------------

// S[b, i, j] = −inf for j > i: the causal mask of the materialised baseline.
__global__ void mask_causal(float* S, int64_t T, int64_t total) {
    const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= total) return;
    const int64_t j = e % T, i = (e / T) % T;
    if (j > i) S[e] = -INFINITY;
}

// The library's fused attention (cuda/attention_*.cu; the tensor-core kernels when the inputs
// are bf16): its outputs and gradients, lse in f32 either way.
struct FusedAttention {
    AttentionShape shape;
    Tensor O, lse, dQ, dK, dV;
    FusedAttention(const AttentionShape& s, const Tensor& Q)
        : shape(s), O(zeros_like(Q)), lse(zeros({s.B, s.H, s.Tq}, DType::f32, Device::CUDA)), dQ(zeros_like(Q)),
          dK(zeros_like(Q)), dV(zeros_like(Q)) {}
    void forward(const Tensor& Q, const Tensor& K, const Tensor& V) const {
        backend(Device::CUDA).attention_forward(shape, O.view_desc(), lse.view_desc(), View{}, Q.view_desc(),
                                                K.view_desc(), V.view_desc(), View{});
    }
    void backward(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& dO) const {
        backend(Device::CUDA).attention_backward(shape, dQ.view_desc(), dK.view_desc(), dV.view_desc(), dO.view_desc(),
                                                 Q.view_desc(), K.view_desc(), V.view_desc(), O.view_desc(),
                                                 lse.view_desc(), View{});
    }
};

// The materialised baseline: (B·H, T, T) scores, probabilities and their gradients, the
// products by cuBLAS, the softmax and its backward the library's. Row-major X (T, D) is
// column-major Xᵀ (D, T) with leading dimension D, so each product is written transposed.
struct MaterialisedAttention {
    int64_t BH, T, D;
    float scale;
    Tensor S, P, dP, O, dQ, dK, dV;
    MaterialisedAttention(const AttentionShape& s, const Tensor& Q)
        : BH(s.B * s.H), T(s.Tq), D(s.D), scale(float(s.scale)), S(zeros({BH, T, T}, DType::f32, Device::CUDA)),
          P(zeros_like(S)), dP(zeros_like(S)), O(zeros_like(Q)), dQ(zeros_like(Q)), dK(zeros_like(Q)),
          dV(zeros_like(Q)) {}

    // C = α op(A) op(B) for every (b, h), column-major, as cublasSgemmStridedBatched takes it.
    void batched(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const Tensor& A, int64_t lda, int64_t stride_a, const Tensor& B, int64_t ldb, int64_t stride_b,
                 const Tensor& C, int64_t ldc, int64_t stride_c, const char* what) const {
        const float zero = 0;
        check(cublasSgemmStridedBatched(cuda::cublas_handle(), op_a, op_b, int(m), int(n), int(k), &alpha, ptr(A),
                                        int(lda), stride_a, ptr(B), int(ldb), stride_b, &zero, ptr(C), int(ldc),
                                        stride_c, int(BH)),
              what);
    }
    void forward(const Tensor& Q, const Tensor& K, const Tensor& V) const {
        const int64_t TD = T * D, TT = T * T, total = BH * T * T;
        batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, scale, K, D, TD, Q, D, TD, S, T, TT, "S = Q K^T");  // Sᵀ = K Qᵀ
        cuda::launch("mask_causal", mask_causal, dim3(unsigned((total + 255) / 256)), dim3(256), 0, ptr(S), T, total);
        backend(Device::CUDA).softmax(P.view_desc(), S.view_desc(), BH * T, T, false);
        batched(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, 1, V, D, TD, P, T, TT, O, D, TD, "O = P V");  // Oᵀ = Vᵀ Pᵀ
    }
    void backward(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& dO) const {
        const int64_t TD = T * D, TT = T * T;
        batched(CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, 1, dO, D, TD, P, T, TT, dV, D, TD, "dV = P^T dO");  // dVᵀ = dOᵀ P
        batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, 1, V, D, TD, dO, D, TD, dP, T, TT, "dP = dO V^T");  // dPᵀ = V dOᵀ
        backend(Device::CUDA).softmax_backward(S.view_desc(), P.view_desc(), dP.view_desc(), BH * T, T, false);  // dS into S
        batched(CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, scale, K, D, TD, S, T, TT, dQ, D, TD, "dQ = dS K");    // dQᵀ = Kᵀ dSᵀ
        batched(CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, scale, Q, D, TD, S, T, TT, dK, D, TD, "dK = dS^T Q");  // dKᵀ = Qᵀ dS
    }
};

// The largest relative error of the four results (O, dQ, dK, dV) of `a` against `b`'s, in f32.
template <class A, class B>
double attention_error(const A& a, const B& b) {
    const auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
    return std::max({relative_error(f32(a.O), f32(b.O)), relative_error(f32(a.dQ), f32(b.dQ)),
                     relative_error(f32(a.dK), f32(b.dK)), relative_error(f32(a.dV), f32(b.dV))});
}

void bench_attention() {
    const std::vector<int64_t> lengths = quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 2048, 4096};
    for (int64_t T : lengths) {
        const int64_t B = 8, H = 8, D = 64;
        Generator gen(2);
        const Tensor Q = randn({B, H, T, D}, gen, DType::f32, Device::CUDA), K = randn({B, H, T, D}, gen, DType::f32, Device::CUDA);
        const Tensor V = randn({B, H, T, D}, gen, DType::f32, Device::CUDA), dO = randn({B, H, T, D}, gen, DType::f32, Device::CUDA);
        const AttentionShape s{B, H, H, T, T, D, true, 0, 1 / std::sqrt(double(D))};
        const FusedAttention fused(s, Q);
        const MaterialisedAttention base(s, Q);

        // Correctness first: the two paths agree.
        fused.forward(Q, K, V);
        fused.backward(Q, K, V, dO);
        base.forward(Q, K, V);
        base.backward(Q, K, V, dO);
        const double err = attention_error(fused, base);
        const bool ok = err < 1e-3;

        // Causal: half of the T² score matrix; forward 2 GEMMs, backward 5 (one recomputes S).
        const double fwd_flop = 4.0 * B * H * T * T * D / 2, bwd_flop = 2.5 * fwd_flop;
        const double fused_fwd = median_ms([&] { fused.forward(Q, K, V); });
        const double fused_all = median_ms([&] { fused.forward(Q, K, V); fused.backward(Q, K, V, dO); });
        const double base_fwd = median_ms([&] { base.forward(Q, K, V); });
        const double base_all = median_ms([&] { base.forward(Q, K, V); base.backward(Q, K, V, dO); });
        const double mib = 1.0 / (1 << 20);
        const double fused_bytes = double(Q.numel()) * 4 * 8 + double(fused.lse.numel()) * 4;  // Q K V O dO dQ dK dV, lse
        const double base_bytes = fused_bytes + double(base.S.numel()) * 4 * 3;                // + S, P, dP
        emit("attention", "fused_forward", {{"T", double(T)}, {"ms", fused_fwd}, {"tflops", fwd_flop / fused_fwd / 1e9}},
             ok);
        emit("attention", "fused_forward_backward",
             {{"T", double(T)}, {"ms", fused_all}, {"tflops", (fwd_flop + bwd_flop) / fused_all / 1e9},
              {"speedup_vs_materialised", base_all / fused_all}, {"memory_mib", fused_bytes * mib},
              {"rel_error_vs_materialised", err}},
             ok);
        emit("attention", "materialised_forward", {{"T", double(T)}, {"ms", base_fwd}, {"tflops", fwd_flop / base_fwd / 1e9}});
        emit("attention", "materialised_forward_backward",
             {{"T", double(T)}, {"ms", base_all}, {"tflops", (fwd_flop + bwd_flop) / base_all / 1e9},
              {"memory_mib", base_bytes * mib}});

        // bf16 on the tensor cores (cuda/attention_forward_mma.cu, attention_backward_mma.cu): the
        // same inputs rounded to bf16; checked against the f32 fused results above, which differ
        // by the rounding of the inputs, P and dS (a few 2⁻⁸ of the largest value).
        const Tensor Qh = Q.to(DType::bf16), Kh = K.to(DType::bf16), Vh = V.to(DType::bf16), dOh = dO.to(DType::bf16);
        const FusedAttention half(s, Qh);
        half.forward(Qh, Kh, Vh);
        half.backward(Qh, Kh, Vh, dOh);
        const double bf16_err = attention_error(half, fused);
        const bool bf16_ok = bf16_err < 3e-2;
        const double bf16_fwd = median_ms([&] { half.forward(Qh, Kh, Vh); });
        const double bf16_all = median_ms([&] { half.forward(Qh, Kh, Vh); half.backward(Qh, Kh, Vh, dOh); });
        emit("attention", "fused_bf16_forward",
             {{"T", double(T)}, {"ms", bf16_fwd}, {"tflops", fwd_flop / bf16_fwd / 1e9}}, bf16_ok);
        emit("attention", "fused_bf16_forward_backward",
             {{"T", double(T)}, {"ms", bf16_all}, {"tflops", (fwd_flop + bwd_flop) / bf16_all / 1e9},
              {"speedup_vs_f32_fused", fused_all / bf16_all}, {"rel_error_vs_f32_fused", bf16_err}},
             bf16_ok);
    }
}

// ---- memory-bound kernels -----------------------------------------------------------------

void bench_memory() {
    const Backend& table = backend(Device::CUDA);
    const int64_t n = int64_t(16) << 20;  // 16 Mi floats: 64 MiB per operand
    const double bytes = double(n) * 4;
    Generator gen(3);
    const auto rnd = [&](const Shape& shape) { return randn(shape, gen, DType::f32, Device::CUDA); };
    const Tensor x = rnd({n}), y = rnd({n}), out = zeros({n}, DType::f32, Device::CUDA);

    const double copy_ms = median_ms([&] {
        check(cudaMemcpyAsync(ptr(out), ptr(x), size_t(bytes), cudaMemcpyDeviceToDevice, cuda::current_stream()),
              "cudaMemcpyAsync");
    });
    const double copy_gbs = 2 * bytes / copy_ms / 1e6;
    emit("memory", "cudaMemcpy_d2d", {{"mib", bytes / (1 << 20)}, {"ms", copy_ms}, {"gbs", copy_gbs}});

    // Each kernel with the bytes it must move at the least (every operand read or written once).
    const auto kernel = [&](const std::string& name, double moved, const std::function<void()>& run) {
        const double ms = median_ms(run);
        const double gbs = moved / ms / 1e6;
        emit("memory", name, {{"ms", ms}, {"gbs", gbs}, {"pct_of_copy", 100 * gbs / copy_gbs}});
    };
    kernel("copy", 2 * bytes, [&] { table.copy(out.view_desc(), x.view_desc()); });
    kernel("add", 3 * bytes, [&] { table.binary(BinaryOp::add, out.view_desc(), x.view_desc(), y.view_desc()); });
    kernel("exp", 2 * bytes, [&] { table.unary(UnaryOp::exp, out.view_desc(), x.view_desc(), 0); });
    // The same add on views one float into each tensor: not 16-byte aligned, so one element
    // per access (cuda/packs.h), which is what every element-wise kernel did before packs.
    const auto from_second = [&](const Tensor& t) { return make_view(ptr(t) + 1, DType::f32, {n - 1}, {1}); };
    kernel("add_misaligned", 3 * bytes,
           [&] { table.binary(BinaryOp::add, from_second(out), from_second(x), from_second(y)); });
    const int64_t cols = 4096, rows = n / cols;
    kernel("softmax_4096", 2 * bytes, [&] { table.softmax(out.view_desc(), x.view_desc(), rows, cols, false); });
    kernel("softmax_backward_4096", 3 * bytes,
           [&] { table.softmax_backward(out.view_desc(), x.view_desc(), y.view_desc(), rows, cols, false); });
    // Cross-entropy reads its (N, V) shape from the logits' view: the loss alone (evaluation),
    // then the loss with its gradient in the same pass (training: the logits read, dlogits
    // written), at V = 4096 (rows kept whole in registers) and a GPT-2-sized V = 50304 (the
    // first 8192 columns kept, the rest read twice).
    for (const int64_t V : {cols, int64_t(50304)}) {
        const int64_t N = n / V;
        const double logits_bytes = double(N * V) * 4;
        const Tensor targets = randint(0, V, {N}, gen).to(Device::CUDA), loss = zeros({N}, DType::f32, Device::CUDA);
        const Tensor row_scale = full({N}, 1.0 / double(N), DType::f32, Device::CUDA);
        const View logits = x.narrow(0, 0, N * V).view({N, V}).view_desc();
        const View dlogits = out.narrow(0, 0, N * V).view({N, V}).view_desc();
        const std::string v = std::to_string(V);
        kernel("cross_entropy_" + v, logits_bytes, [&] {
            table.cross_entropy(loss.view_desc(), View{}, logits, targets.view_desc(), View{}, -100);
        });
        kernel("cross_entropy_with_gradient_" + v, 2 * logits_bytes, [&] {
            table.cross_entropy(loss.view_desc(), dlogits, logits, targets.view_desc(), row_scale.view_desc(), -100);
        });
    }
    // RMSNorm backward's dx reads each row of dy and x once (kept in registers, warp rows at
    // d = 1024, block rows at 4096); its dweight then reads them again down the columns.
    for (const int64_t d : {int64_t(1024), int64_t(4096)}) {
        const int64_t r = n / d;
        const Tensor w = rnd({d}), rstd = zeros({r}, DType::f32, Device::CUDA), dw = zeros({d}, DType::f32, Device::CUDA);
        const std::string name = std::to_string(d);
        kernel("rms_norm_forward_" + name, 2 * bytes, [&] {
            table.rms_norm_forward(out.view_desc(), rstd.view_desc(), x.view_desc(), w.view_desc(), r, d, 1e-6);
        });
        kernel("rms_norm_backward_" + name, 3 * bytes, [&] {
            table.rms_norm_backward(out.view_desc(), dw.view_desc(), y.view_desc(), x.view_desc(), w.view_desc(),
                                    rstd.view_desc(), r, d);
        });
    }
    const Tensor p = rnd({n}), m = zeros({n}, DType::f32, Device::CUDA), v = zeros({n}, DType::f32, Device::CUDA);
    const AdamWStep step{1e-3, 0.9, 0.95, 1e-8, 0.1, 0.1, 0.05};
    // p, m, v read and written; g read.
    const AdamWTensors whole{step, p.view_desc(), x.view_desc(), m.view_desc(), v.view_desc()};
    kernel("adamw_step", 7 * bytes, [&] { table.adamw_step({&whole, 1}); });
    const Tensor acc = zeros({}, DType::f64, Device::CUDA);
    const View xv = x.view_desc();
    kernel("sum_squares", bytes, [&] { table.sum_squares(acc.view_desc(), {&xv, 1}); });
    // About the same bytes cut as a model's parameters: 255 pairs of a 256 × 256 matrix (64 Ki
    // elements) and a 256-element norm weight, 510 tensors alternating large and small as a
    // transformer's do. One launch for the whole list (cuda/tensor_list.h), where one launch
    // per tensor made 510.
    const int64_t matrix = 256 * 256, tensors = n / (matrix + 256);
    std::vector<AdamWTensors> params;
    std::vector<View> grads;
    for (int64_t i = 0, at = 0; i < 2 * tensors; at += i % 2 ? 256 : matrix, ++i) {
        const int64_t size = i % 2 ? 256 : matrix;
        const auto part = [&](const Tensor& t) { return make_view(ptr(t) + at, DType::f32, {size}, {1}); };
        params.push_back({step, part(p), part(x), part(m), part(v)});
        grads.push_back(part(x));
    }
    const double list_bytes = double(tensors * (matrix + 256)) * 4;
    kernel("adamw_step_list_510", 7 * list_bytes, [&] { table.adamw_step(params); });
    kernel("sum_squares_list_510", list_bytes, [&] { table.sum_squares(acc.view_desc(), grads); });
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc < 2) throw std::invalid_argument("usage: gpu_bench gemm|attention|memory [--quick]");
        for (int i = 2; i < argc; ++i) quick = quick || std::strcmp(argv[i], "--quick") == 0;
        if (cuda::selection().mode != cuda::Mode::gpu)
            throw std::runtime_error("needs a GPU: " + (cuda::selection().error.empty()
                                                                      ? std::string("GATEDGRAD_CUDA selects the emulator")
                                                                      : cuda::selection().error));
        const std::string section = argv[1];
        if (section == "gemm") bench_gemm(), bench_gemm_training_shapes();
        else if (section == "attention") bench_attention();
        else if (section == "memory") bench_memory();
        else throw std::invalid_argument("gpu_bench: unknown section '" + section + "': gemm, attention or memory");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpu_bench: %s\n", e.what());
        return 1;
    }
}

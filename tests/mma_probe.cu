// mma_probe.cu — where the tensor cores put each element, asked of the hardware itself: the
// bf16 GEMM and attention kernels (cuda/gemm_bf16.cu, cuda/attention_mma.cuh) hard-code the
// fragment layout of ldmatrix and mma.sync m16n8k16 (cuda/mma.h), and the emulator models it
// (cuda/emulator/mma.h); if either disagreed with the GPU, every test on the emulator would pass
// while the GPU computed something else.
//
// One source, two programs: nvcc builds it for the GPU (tests/mma_probe), g++ against the
// emulator (tests/mma_probe_emulated.cpp includes this file). Each fills shared memory with
// elements whose value is their own index (exact in bf16), lets ldmatrix (x1, x2, x4, plain
// and .trans) and mma.sync deliver them, and prints which element each lane received in
// each register, one line per register: the table. Each also checks its table against the
// PTX ISA's ("Matrix fragments for mma.m16n8k16"), written out here independently of both,
// and exits 1 at the first difference; tools/gpu-check then compares the two tables line by
// line. Without a GPU the nvcc build says "no device" and exits 77. It takes well under a second.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/kernels.h"
#include "cuda/launch.h"
#include "cuda/mma.h"
#include "tensor/bf16.h"
#include "tests/ldmatrix_probe.h"
#ifdef __CUDACC__
#include "cuda/runtime.h"
#endif

using gg::bfloat16;
namespace device = gg::cuda::GG_CUDA_BUILD;

namespace {

// A (16×16) is the identity and B (16×8) holds 8k + n, so D = A·B names in each accumulator
// the element (row, col) of D it holds: 8·row + col. The operands come through ldmatrix, as the
// kernels feed them: A row-major (x4), B k-major (x2 .trans).
__global__ void mma_probe(float* out) {  // out: (32 lanes, 4 accumulators)
    GG_SHARED(bfloat16[16][24], As);  // rows padded to 48 bytes: still 16-byte aligned
    GG_SHARED(bfloat16[16][24], Bs);
    const int lane = int(threadIdx.x);
    for (int e = lane; e < 256; e += 32) As[e / 16][e % 16] = bfloat16(e / 16 == e % 16 ? 1.0f : 0.0f);
    for (int e = lane; e < 128; e += 32) Bs[e / 8][e % 8] = bfloat16(float(e));
    __syncwarp();
    uint32_t a[4], b[2];
    gg::cuda::ldmatrix<4>(a, &As[lane % 16][8 * (lane / 16)]);
    gg::cuda::ldmatrix<2, true>(b, &Bs[lane % 16][0]);
    const float zero[4] = {0, 0, 0, 0};
    float d[4];
    gg::cuda::mma_m16n8k16_bf16(d, a, b, zero);
    for (int i = 0; i < 4; ++i) out[lane * 4 + i] = d[i];
}

// Runs a probe on one warp and copies its n results back.
template <class T, class Kernel>
std::vector<T> run(const char* name, Kernel kernel, int n) {
    T* on_device = static_cast<T*>(device::allocate(sizeof(T) * size_t(n)));
    gg::cuda::launch(name, kernel, 1, 32, 0, on_device);
    device::synchronize();
    std::vector<T> host(static_cast<size_t>(n));
    device::to_host(host.data(), on_device, sizeof(T) * size_t(n));
    device::deallocate(on_device, sizeof(T) * size_t(n));
    return host;
}

int differences = 0;

void row(const std::string& what, int lane, int reg, int got_first, int got_second, int want_first, int want_second) {
    std::printf("%s lane %2d reg %d: %3d %3d\n", what.c_str(), lane, reg, got_first, got_second);
    if ((got_first != want_first || got_second != want_second) && differences++ == 0)
        std::fprintf(stderr, "mma_probe: %s lane %d register %d holds %d, %d; the PTX ISA's layout says %d, %d\n",
                     what.c_str(), lane, reg, got_first, got_second, want_first, want_second);
}

// Each register of each lane against the PTX ISA's layout (tests/ldmatrix_probe.h).
template <int X, bool Trans>
void ldmatrix_table() {
    const std::vector<uint32_t> out =
        run<uint32_t>("ldmatrix_probe", gg::testing::ldmatrix_probe<X, Trans>, 32 * X);
    const std::string what = "ldmatrix.x" + std::to_string(X) + (Trans ? ".trans" : "");
    for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < X; ++j) {
            const auto want = gg::testing::ldmatrix_expected(Trans, lane, j);
            const uint32_t r = out[size_t(lane * X + j)];
            row(what, lane, j, int(r & 0xffffu), int(r >> 16), want.first, want.second);
        }
}

// d[0], d[1] = D(g, 2q), D(g, 2q + 1); d[2], d[3] = D(g + 8, 2q), D(g + 8, 2q + 1).
void mma_table() {
    const std::vector<float> out = run<float>("mma_probe", mma_probe, 32 * 4);
    for (int lane = 0; lane < 32; ++lane)
        for (int half = 0; half < 2; ++half) {
            const int g = lane / 4, q = lane % 4, first = 8 * (g + 8 * half) + 2 * q;
            row("mma.m16n8k16.d", lane, 2 * half, int(out[size_t(lane * 4 + 2 * half)]),
                int(out[size_t(lane * 4 + 2 * half + 1)]), first, first + 1);
        }
}

}  // namespace

int main() {
#ifdef __CUDACC__
    const std::string why = gg::cuda::gpu::probe_devices();
    if (!why.empty()) {
        std::fprintf(stderr, "mma_probe: no device: %s\n", why.c_str());
        return 77;
    }
#endif
    try {
        ldmatrix_table<1, false>();
        ldmatrix_table<2, false>();
        ldmatrix_table<4, false>();
        ldmatrix_table<1, true>();
        ldmatrix_table<2, true>();
        ldmatrix_table<4, true>();
        mma_table();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mma_probe: %s\n", e.what());
        return 1;
    }
    if (differences > 0) std::fprintf(stderr, "mma_probe: %d registers differ from the PTX ISA's layout\n", differences);
    return differences > 0 ? 1 : 0;
}

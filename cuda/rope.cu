// rope.cu — RoPE's rotation of x (B, H, T, D), any strides, into out (B, H, T, D) with
// contiguous channels, with the (T, D) tables cos and sin (tensor/backend.h):
//
//   out_c = x_c cos_c − s x_{c+D/2} sin_c,   out_{c+D/2} = x_{c+D/2} cos_{c+D/2} + s x_c sin_{c+D/2}
//
// for c < D/2, with s = 1, or s = −1 for the transposed rotation (backward). One thread per
// channel pair (b, h, t, c) in a grid-stride loop of 256-thread blocks; neighbouring threads
// take neighbouring pairs of one row, so a warp reads a row of x and of each table together.
// The CPU's formula in T (cpu/fused.cpp), so the emulator matches it bit for bit; bf16
// is loaded as float, rotated in float and rounded once when stored.
#include <algorithm>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;


// x: (B, H, T, D) with strides xs; cos, sin: (T, D); out: (B, H, T, D) with strides (os, 1).
template <class T>
__global__ void rope_pairs(T* out, const T* x, const T* cos, const T* sin, int64_t B, int64_t H, int64_t L,
                           int64_t D, int64_t xs0, int64_t xs1, int64_t xs2, int64_t xs3, int64_t os0, int64_t os1,
                           int64_t os2, compute_t<T> sign) {
    using C = compute_t<T>;
    const int64_t half = D / 2, pairs = B * H * L * half;
    for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += int64_t(gridDim.x) * blockDim.x) {
        const int64_t c = p % half, row = p / half;  // row = (b·H + h)·L + t
        const int64_t t = row % L, h = row / L % H, b = row / (L * H);
        const T* xr = x + b * xs0 + h * xs1 + t * xs2;  // (D), stride xs3
        const T *cr = cos + t * D, *sr = sin + t * D;    // (D) each
        T* outr = out + b * os0 + h * os1 + t * os2;     // (D)
        const C x1 = xr[c * xs3], x2 = xr[(c + half) * xs3];
        outr[c] = T(x1 * C(cr[c]) - sign * x2 * C(sr[c]));
        outr[c + half] = T(x2 * C(cr[c + half]) + sign * x1 * C(sr[c + half]));
    }
}

}  // namespace

void rope(const View& out, const View& x, const View& cos, const View& sin, bool transpose) {
    const int64_t pairs = x.numel() / 2;
    if (pairs == 0) return;
    dispatch_floating_bf16(x.dtype, [&]<class T>() {
        launch("rope_pairs", rope_pairs<T>, grid_covering(pairs, kThreads), dim3(kThreads), 0, static_cast<T*>(out.data),
               static_cast<const T*>(x.data), static_cast<const T*>(cos.data), static_cast<const T*>(sin.data),
               x.shape[0], x.shape[1], x.shape[2], x.shape[3], x.strides[0], x.strides[1], x.strides[2],
               x.strides[3], out.strides[0], out.strides[1], out.strides[2],
               transpose ? compute_t<T>(-1) : compute_t<T>(1));
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

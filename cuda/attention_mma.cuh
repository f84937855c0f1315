// attention_mma.cuh — what the bf16 tensor-core attention kernels share
// (cuda/attention_forward_mma.cu, cuda/attention_backward_mma.cu): the tiles in shared memory,
// the two warp products every one of those kernels is made of, and the host's choice between
// them and the SIMT kernels of attention_tiles.cuh.
//
// Tiles. As in attention_tiles.cuh, a block of kWarps = 4 warps owns kTile = 64 rows of one
// head and streams tiles of 64 rows of the other operand; warp w owns rows 16w .. 16w + 15,
// one mma row block. A tile sits in shared memory in bf16, row after row, at a stride of
// ld = D + 8 values: every row starts on 16 bytes (ldmatrix reads a row of 8 values at once)
// and the stride is an odd number of 16-byte units (D / 8 + 1), so the 8 rows of one 8×8 matrix
// start in 8 different 16-byte slots of the 128 bytes the 32 banks cover: an ldmatrix takes no
// bank conflict. Rows past the end of the sequence are
// zeros: the products then read only defined values, and masked probabilities (0) times a
// padding value (0) add nothing, where NaN left in shared memory would poison every sum.
//
// Fragments (cuda/mma.h: lane l, g = l / 4, q = l mod 4). A warp's 16 × 64 block of scores is
// 8 mma tiles of 16 × 8 in f32, s[n][0..3]: lane l holds rows g (s[n][0], s[n][1]) and g + 8
// (s[n][2], s[n][3]), columns 8n + 2q and 8n + 2q + 1. A row's 64 values are spread over the
// 4 lanes of one g, so a row's maximum or sum is two __shfl_xor_sync (1, 2) away.
//
// The two products, for a streamed tile Y (64, D) and the warp's rows X (16, D):
//   scores      S = X Yᵀ (16, 64): per 16 columns of D, one ldmatrix.x4 of X gives the A
//               fragment and four ldmatrix.x4 of Y the B fragments of the 8 mma tiles, which
//               are Y's rows read k-contiguously as B stored "col" wants.
//   accumulate  acc += W Y (16, D), W (16, 64) weights made from scores (probabilities, dS):
//               the accumulator layout of two neighbouring 16 × 8 tiles, rounded to bf16, is the
//               A fragment of a 16 × 16 tile (a0 = s[2k][0..1], a1 = s[2k][2..3], a2 = s[2k+1][0..1],
//               a3 = s[2k+1][2..3]), so W never leaves the registers; Y is read through
//               ldmatrix.x4.trans, which turns its rows (k) into the columns B wants.
// Each product of two bf16 is exact in f32 and the sums stay in f32; what bf16 costs is the
// rounding of the inputs (the caller's) and of W to bf16: at most 2⁻⁸ (bf16 has 8 significant
// bits) of each term of acc.
//
// Operands. Q, K, V, dO and the results O, dQ, dK, dV are read and written through their
// batch, head and row strides (Operand, attention_tiles.cuh), as the SIMT kernels do: the heads
// split from one projection (nn/attention.cpp) take this path in place, with no contiguous copy.
// A row's D channels are contiguous.
//
// Limits. D is 16, 32, 64 or 128, a template parameter (kD) so that every fragment array is
// indexed by constants and stays in registers, and every row of every tensor starts on 16 bytes:
// rows are read 16 bytes at a time, so each pointer is 16-byte aligned and its batch, head and
// row strides are multiples of 8 bf16. Anything else goes to the SIMT kernels, which the
// entries choose on the host (mma_fits).
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "cuda/async_copy.h"
#include "cuda/attention_tiles.cuh"
#include "cuda/mma.h"
#include "cuda/packs.h"

namespace gg::cuda::GG_CUDA_BUILD::attention::mma {

constexpr int kMmaRows = 16;                 // rows of an mma tile; a warp owns one row block
constexpr int kMmaCols = 8;                  // columns of an mma tile of scores
constexpr int kMmaK = 16;                    // the sum of one mma
constexpr int kScoreTiles = kTile / kMmaCols;  // 8 mma tiles across a warp's 64 scores
constexpr int kPad = 8;                      // bf16 after each row of a tile in shared memory
constexpr int kRowPack = 8;                  // bf16 in 16 bytes
constexpr float kLog2e = 1.4426950408889634f;
// The blocks per SM the kernels ask registers for (__launch_bounds__): 2 blocks of 128 threads
// leave up to 255 registers a thread, which a warp's accumulators (up to 2 × 64 for dK and dV at
// D = 128) and its tiles of scores need; left to itself, ptxas held the D = 64 forward to 128
// and spilled.
constexpr int kMinBlocks = 2;
static_assert(kWarps * kMmaRows == kTile, "each warp owns one 16-row block of the tile");

// A warp's scores or weights against N mma tiles of 8 columns (N = kScoreTiles: a whole tile of
// 64): s[n][e] is row g + 8·(e / 2), column 8n + 2q + e mod 2.
template <int N>
using Scores = float[N][4];
// A warp's 16 × kD accumulator, the same layout over the columns of D.
template <int kD>
using Accumulator = float[kD / kMmaCols][4];
using Fragment = uint32_t[4];  // an A fragment: a 16 × 16 tile of bf16
// Scores<N> rounded to bf16, as the A fragments of its N / 2 tiles of 16 × 16: half the registers.
template <int N>
using Weights = Fragment[N / 2];

// Strides and sizes, in bf16 values, for head size kD.
template <int kD>
struct Tiles {
    static_assert(kD == 16 || kD == 32 || kD == 64 || kD == 128, "kD is 16, 32, 64 or 128");
    static constexpr int ld = kD + kPad;  // row stride: see "Tiles" above
    static constexpr int tile = kTile * ld;
    static constexpr int steps = kD / kMmaK;  // 16-column slices of D
};

// Where a lane sits in its warp (cuda/mma.h's g and q).
struct MmaLane {
    int warp, lane, g, q;
    // The warp's row of element e of a fragment, 0 .. 15.
    __device__ int row(int e) const { return g + 8 * (e / 2); }
    // The column of element e of mma tile n, 0 .. 8·tiles − 1.
    __device__ int col(int n, int e) const { return kMmaCols * n + 2 * q + e % 2; }
};
__device__ inline MmaLane this_mma_lane() {
    const int t = int(threadIdx.x);
    return {t / 32, t % 32, t % 32 / 4, t % 4};
}

template <int kTilesN>
__device__ void clear(float (&acc)[kTilesN][4]) {
    GG_UNROLL
    for (int n = 0; n < kTilesN; ++n) {
        GG_UNROLL
        for (int e = 0; e < 4; ++e) acc[n][e] = 0;
    }
}

// ---- moving tiles --------------------------------------------------------------------------

// tile (64, ld) ← rows [row0, row0 + 64) of head bh of src (rows, kD), an operand with `heads`
// heads, zeros past `rows`, by the whole block. Consecutive threads take consecutive 16 bytes of
// a row, so a warp's reads are coalesced whatever the row stride. A thread steps one pointer by
// the row stride: an address of its own for each row took the dK/dV kernel at D = 128 past its
// 255 registers. The copies are cp.async (cuda/async_copy.h): global memory goes straight to
// shared memory, no register holds a row in transit and the thread goes on at once; a row past
// `rows` is a copy of 0 source bytes, 16 bytes of zeros. They land at the thread's next
// cp.async wait (tiles_landed, run_stream), which the block's barrier then makes visible.
template <int kD>
__device__ void load_tile(bfloat16* tile, const Operand<const bfloat16>& src, int64_t bh, int64_t heads,
                          int64_t row0, int64_t rows) {
    constexpr int chunks = kD / kRowPack, pass = kThreads / chunks;  // 16-byte chunks a row; rows a pass
    const int r = int(threadIdx.x) / chunks, d = int(threadIdx.x) % chunks * kRowPack;
    const int64_t valid = rows - row0 - r;  // this thread's rows n·pass exist below `valid`
    const bfloat16* head = src.rows(bh, heads);  // a valid address for the copies that read nothing
    const bfloat16* from = head + (row0 + r) * src.row + d;
    GG_UNROLL
    for (int n = 0; n < kTile / pass; ++n) {
        const bool inside = n * pass < valid;
        cp_async16(tile + (r + n * pass) * Tiles<kD>::ld + d, inside ? from + n * pass * src.row : head,
                   inside ? 16 : 0);
    }
}

// Every tile this thread started copying (load_tile) has landed, and, after the barrier, every
// thread's: the end of a kernel's prologue, before the warps read the tiles it loaded.
__device__ inline void tiles_landed() {
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
}

// ---- streaming tiles through two stages ---------------------------------------------------

// A stream of tiles through two stages of shared memory: `stream` knows end() (tiles 0 .. end),
// empty(t) (a tile outside the causal/window band, skipped) and load(t, stage) (by the whole
// block). While the warps work on the tile of one stage, the cp.async copies of the next tile
// of the band are in flight into the other (double buffering: load tile j + 1 while computing
// tile j), and each thread waits for its own copies only after its share of the work; so a
// tile costs one wait and one barrier.

// The first tile of the band, loaded into stage 0 (end() when there is none). The caller's
// tiles_landed() completes it, with whatever else the block loaded before.
template <class Stream>
__device__ int64_t start_stream(const Stream& stream) {
    int64_t t = 0;
    while (t < stream.end() && stream.empty(t)) ++t;
    if (t < stream.end()) stream.load(t, 0);
    return t;
}

// body(t, stage) for every tile t of the band from `first` (start_stream's), in order.
template <class Stream, class Body>
__device__ void run_stream(const Stream& stream, int64_t first, const Body& body) {
    int stage = 0;
    for (int64_t t = first; t < stream.end(); stage ^= 1) {
        int64_t next = t + 1;
        while (next < stream.end() && stream.empty(next)) ++next;
        if (next < stream.end()) stream.load(next, stage ^ 1);  // its last readers passed the barrier below
        cp_async_commit();
        body(t, stage);
        cp_async_wait<0>();  // this thread's copies of the next tile have landed
        __syncthreads();     // every warp is done with this stage, and the next one is complete
        t = next;
    }
}

// The key and value tiles that a block of queries [i0, i_end) of one head streams, from K and V
// (B, Hkv, Tk, kD) of its kv head bhk; stages holds two of (K (64, ld), V (64, ld)).
template <int kD>
struct KeyValueStream {
    const AttentionShape& s;
    int64_t i0, i_end, bhk;
    Operand<const bfloat16> k, v;  // (B, Hkv, Tk, kD)
    bfloat16* stages;

    __device__ int64_t end() const { return (s.Tk + kTile - 1) / kTile; }
    __device__ TileMask mask(int64_t t) const {
        return classify(s, i0, i_end, t * kTile, ::min((t + 1) * kTile, s.Tk));
    }
    __device__ bool empty(int64_t t) const { return mask(t) == TileMask::empty; }
    __device__ bfloat16* keys(int stage) const { return stages + 2 * stage * Tiles<kD>::tile; }
    __device__ bfloat16* values(int stage) const { return keys(stage) + Tiles<kD>::tile; }
    __device__ void load(int64_t t, int stage) const {
        load_tile<kD>(keys(stage), k, bhk, s.Hkv, t * kTile, s.Tk);
        load_tile<kD>(values(stage), v, bhk, s.Hkv, t * kTile, s.Tk);
    }
};

// ---- fragments -------------------------------------------------------------------------------

// a ← the 16 × 16 block of rows (16 rows at stride ld) at columns d0 .. d0 + 15: one
// ldmatrix.x4, lane l naming row l mod 16, column d0 + 8·(l / 16) (cuda/mma.h).
template <int kD>
__device__ void load_fragment(Fragment& a, const bfloat16* rows, int d0, const MmaLane& lane) {
    ldmatrix<4>(a, rows + (lane.lane % 16) * Tiles<kD>::ld + d0 + 8 * (lane.lane / 16));
}

// w ← a warp's scores s rounded to bf16: columns 16k .. 16k + 15 are w[k], with a0 = s[2k][0..1],
// a1 = s[2k][2..3], a2 = s[2k+1][0..1], a3 = s[2k+1][2..3] (see "accumulate" above).
template <int N>
__device__ void round_weights(Weights<N>& w, const Scores<N>& s) {
    GG_UNROLL
    for (int k = 0; k < N / 2; ++k) {
        w[k][0] = pack_bf16x2(s[2 * k][0], s[2 * k][1]);
        w[k][1] = pack_bf16x2(s[2 * k][2], s[2 * k][3]);
        w[k][2] = pack_bf16x2(s[2 * k + 1][0], s[2 * k + 1][1]);
        w[k][3] = pack_bf16x2(s[2 * k + 1][2], s[2 * k + 1][3]);
    }
}
// The value of w at element e of mma tile n of the scores it was rounded from.
template <int K>
__device__ float weight(const Fragment (&w)[K], int n, int e) {
    return float(bfloat16::from_bits(uint16_t(w[n / 2][2 * (n % 2) + e / 2] >> (16 * (e % 2)))));
}

// ---- the two products ------------------------------------------------------------------------

// s += X[:, d0 .. d0 + 16) · Y[:, d0 .. d0 + 16)ᵀ: a, the A fragment of the warp's rows X at
// those columns, against 8N rows Y (8N, ld). Mma tiles n and n + 1 take their B fragments from
// one ldmatrix.x4: lane l names Y's row 8n + 8·(l / 16) + l mod 8 at column d0 + 8·(l / 8 mod 2),
// so matrices 0..3 are (tile n, d0 + 0..7), (n, d0 + 8..15), (n + 1, ..), (n + 1, ..).
template <int kD, int N>
__device__ void scores_step(Scores<N>& s, const Fragment& a, const bfloat16* y, int d0, const MmaLane& lane) {
    GG_UNROLL
    for (int n = 0; n < N; n += 2) {
        uint32_t b[4];
        ldmatrix<4>(b, y + (kMmaCols * n + 8 * (lane.lane / 16) + lane.lane % 8) * Tiles<kD>::ld + d0 +
                           8 * (lane.lane / 8 % 2));
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        mma_m16n8k16_bf16(s[n], a, b0, s[n]);
        mma_m16n8k16_bf16(s[n + 1], a, b1, s[n + 1]);
    }
}

// s = X Yᵀ (16, 8N): X the warp's 16 rows of a tile, Y 8N rows of a tile (8N, ld), both in
// shared memory.
template <int kD, int N>
__device__ void tile_scores(Scores<N>& s, const bfloat16* x, const bfloat16* y, const MmaLane& lane) {
    clear(s);
    GG_UNROLL
    for (int step = 0; step < Tiles<kD>::steps; ++step) {
        Fragment a;
        load_fragment<kD>(a, x, kMmaK * step, lane);
        scores_step<kD>(s, a, y, kMmaK * step, lane);
    }
}

// acc += W Z (16, kD): W the warp's 16 × 16K weights in bf16, Z 16K rows of a tile (16K, ld) in
// shared memory. Per 16 rows k0 of Z, mma tiles n and n + 1 of D take their B
// fragments from one ldmatrix.x4.trans: lane l names Z's row k0 + 8·(l / 8 mod 2) + l mod 8 at
// column 8n + 8·(l / 16), so matrices 0..3 are (rows k0 + 0..7, tile n), (k0 + 8..15, n),
// (k0 + 0..7, n + 1), (k0 + 8..15, n + 1), each transposed into B's k-pairs.
template <int kD, int K>
__device__ void tile_accumulate(Accumulator<kD>& acc, const Fragment (&w)[K], const bfloat16* z,
                                const MmaLane& lane) {
    GG_UNROLL
    for (int k = 0; k < K; ++k) {
        const int k0 = kMmaK * k;
        GG_UNROLL
        for (int n = 0; n < kD / kMmaCols; n += 2) {
            uint32_t b[4];
            ldmatrix<4, true>(b, z + (k0 + 8 * (lane.lane / 8 % 2) + lane.lane % 8) * Tiles<kD>::ld +
                                     kMmaCols * n + 8 * (lane.lane / 16));
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            mma_m16n8k16_bf16(acc[n], w[k], b0, acc[n]);
            mma_m16n8k16_bf16(acc[n + 1], w[k], b1, acc[n + 1]);
        }
    }
}

// The keys query i sees (visible_keys, attention_tiles.cuh) as columns of the key tile from j0:
// [lo, hi], none when lo > hi, none for a query past Tq. Offsets within the tile make the test of
// a score two int compares: tested in 64-bit for every score, the mask of the band's edge took
// more registers than the rest of the forward kernel together.
struct TileColumns {
    int lo, hi;
    __device__ bool contains(int col) const { return col >= lo && col <= hi; }
};
__device__ inline TileColumns visible_columns(const AttentionShape& s, int64_t i, int64_t j0) {
    if (i >= s.Tq) return {0, -1};
    const KeyRange keys = visible_keys(s, i);
    return {int(::min(::max(keys.first - j0, int64_t(0)), int64_t(kTile))),
            int(::max(::min(keys.last - j0, int64_t(kTile - 1)), int64_t(-1)))};
}

// out[row0 + the warp's row of e][columns] ← acc · factor[e / 2] in bf16, rows below `rows`;
// out is head bh (rows, kD) of an operand with `heads` heads. Each lane writes its pairs of
// columns as one 4-byte store.
template <int kD>
__device__ void store_rows(const Operand<bfloat16>& out, int64_t bh, int64_t heads, int64_t row0, int64_t rows,
                           const Accumulator<kD>& acc, const float (&factor)[2], const MmaLane& lane) {
    bfloat16* head = out.rows(bh, heads);  // (rows, kD) at row stride out.row
    GG_UNROLL
    for (int half = 0; half < 2; ++half) {
        const int64_t row = row0 + lane.row(2 * half);
        if (row >= rows) continue;
        GG_UNROLL
        for (int n = 0; n < kD / kMmaCols; ++n) {
            Pack<bfloat16, 2> v;
            v.at[0] = bfloat16(acc[n][2 * half] * factor[half]);
            v.at[1] = bfloat16(acc[n][2 * half + 1] * factor[half]);
            store_pack<2>(head + row * out.row + lane.col(n, 0), v);
        }
    }
}

// ---- host side -------------------------------------------------------------------------------

// Whether the tensor-core kernels take this call: a softmax-family score function (softmax,
// softmax1, sink: sigmoid and softpick take the SIMT kernels, which compute every score function),
// bf16 tensors (B, heads, T, D), D one of the head sizes they are built for, and in every tensor
// each row's D channels contiguous and every row starting on 16 bytes: the pointer 16-byte
// aligned, the batch, head and row strides multiples of 8 bf16 (see Limits). A dim of size 1 is
// never stepped over, so its stride counts for nothing.
inline bool mma_fits(const AttentionShape& s, DType dtype, std::initializer_list<View> tensors) {
    const int64_t D = s.D;
    bool fit = is_softmax(s.score_fn) && dtype == DType::bf16 && (D == 16 || D == 32 || D == 64 || D == 128);
    for (const View& x : tensors) {
        fit = fit && x.ndim == 4 && x.strides[3] == 1 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
        for (int d = 0; d + 1 < x.ndim; ++d) fit = fit && (x.shape[d] == 1 || x.strides[d] % kRowPack == 0);
    }
    return fit;
}

// Calls f.template operator()<kD>() with kD = D, one of the sizes mma_fits accepts.
template <class F>
void dispatch_head_size(int64_t D, F&& f) {
    if (D == 16) f.template operator()<16>();
    else if (D == 32) f.template operator()<32>();
    else if (D == 64) f.template operator()<64>();
    else f.template operator()<128>();
}

}  // namespace gg::cuda::GG_CUDA_BUILD::attention::mma

namespace gg::cuda::GG_CUDA_BUILD {

// The tensor-core forward and backward for the calls mma_fits accepts, with the entries'
// arguments (cuda/kernels.h; probs aside, which the forward entry writes from lse).
void attention_forward_mma(const AttentionShape& s, const View& O, const View& lse, const View& Q, const View& K,
                           const View& V, const View& sink);
void attention_backward_mma(const AttentionShape& s, const View& dQ, const View& dK, const View& dV, const View& dO,
                            const View& Q, const View& K, const View& V, const View& O, const View& lse);

}  // namespace gg::cuda::GG_CUDA_BUILD

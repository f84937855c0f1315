// embedding.cu — row gather and scatter-add for embeddings (and index_select / index_add).
//
//   index_select_rows:  out[i, :] = table[idx[i], :]         table (V, D), idx (N) → out (N, D)
//   index_add_rows:     table[idx[i], :] += src[i, :]        table (V, D), idx (N), src (N, D)
//
// index_select_rows: one thread per element of out, grid-strided over N·D; a row is copied as
// 2-, 4- or 8-byte words whatever the dtype, so one kernel serves every dtype of that size.
//
// index_add_rows adds repeated ids up, deterministically and without float atomics: every
// table row is written by one block only, which adds the rows of src in increasing position,
// exactly the CPU's order (so the result is bitwise the CPU's; bf16 rows are summed in float
// and rounded once, as the f32 sum of the same values rounded to bf16). The mapping:
//   - block (i, tile) of the grid (N positions × column tiles of 256) looks at position i;
//   - it owns row idx[i] only if i is the first position with that id (a block-wide vote over
//     the ids before i); otherwise the owner adds src[i] and this block stops;
//   - the owner walks the positions j ≥ i in chunks of 256: each thread tests one id, a
//     ballot in each warp and the per-warp counts compact the matching positions, in order,
//     into shared memory; then each thread adds src[j, c] for its column c of the tile to an
//     accumulator that started at table[id, c], and finally stores it.
// The id scans cost O(N²) comparisons in all (N²/2 for the first-position votes, up to N² for
// the walks), done 256 at a time from ids that stay in cache: cheap for the tokens of a
// training batch (N of a few thousand). A counting sort of the positions by id would make it
// O(N), but needs scratch memory of V + N integers.
//
// Ids outside [0, V) are reported with report_index_error (cuda/device_error.h) and their rows
// skipped: an embedding's output row is left unwritten, a bad id of index_add adds nothing.
#include "cuda/device_error.h"
#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/row_reduce.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;

// table: (V, D), idx: (N) → out: (N, D), in words W of the element's size.
template <class W>
__global__ void index_select_elements(W* out, const W* table, const int64_t* idx, int64_t N, int64_t V, int64_t D,
                                      DeviceError* error) {
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < N * D; e += int64_t(gridDim.x) * blockDim.x) {
        const int64_t i = e / D, c = e % D, id = idx[i];
        if (id >= 0 && id < V) out[e] = table[id * D + c];
        else if (c == 0) report_index_error(error, kEmbedding, id, i, V);
    }
}

// Whether a position before i holds `id` (then that position's block owns the row).
__device__ bool seen_before(const int64_t* idx, int64_t i, int64_t id) {
    for (int64_t j0 = 0; j0 < i; j0 += blockDim.x) {
        const int64_t j = j0 + threadIdx.x;
        if (__syncthreads_or(j < i && idx[j] == id)) return true;
    }
    return false;
}

// table: (V, D) += rows of src: (N, D) at idx: (N); grid (positions, column tiles), block 256.
template <class T>
__global__ void index_add_owned_rows(T* table, const int64_t* idx, const T* src, int64_t N, int64_t V, int64_t D,
                                     DeviceError* error) {
    GG_SHARED(int64_t[kThreads], matches);            // positions j with idx[j] == id, increasing
    GG_SHARED(unsigned[kThreads / kWarpSize], found);  // matches per warp in this chunk
    const unsigned lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int64_t tiles = (D + kThreads - 1) / kThreads;
    for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
        const int64_t id = idx[i];
        if (id < 0 || id >= V) {
            if (threadIdx.x == 0 && blockIdx.y == 0) report_index_error(error, kIndexAdd, id, i, V);
            continue;
        }
        if (seen_before(idx, i, id)) continue;
        for (int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
            const int64_t c = tile * kThreads + threadIdx.x;
            compute_t<T> acc = c < D ? compute_t<T>(table[id * D + c]) : compute_t<T>(0);
            for (int64_t j0 = i; j0 < N; j0 += kThreads) {
                const int64_t j = j0 + threadIdx.x;
                const bool match = j < N && idx[j] == id;
                const unsigned votes = __ballot_sync(kFullWarp, match);
                if (lane == 0) found[warp] = __popc(votes);
                __syncthreads();
                unsigned offset = 0, count = 0;  // matches of earlier warps; of the whole chunk
                for (unsigned w = 0; w < kThreads / kWarpSize; ++w) {
                    if (w < warp) offset += found[w];
                    count += found[w];
                }
                if (match) matches[offset + __popc(votes & ((1u << lane) - 1))] = j;
                __syncthreads();
                if (c < D)
                    for (unsigned m = 0; m < count; ++m) acc += compute_t<T>(src[matches[m] * D + c]);
                __syncthreads();  // the next chunk writes found and matches again
            }
            if (c < D) table[id * D + c] = T(acc);
        }
    }
}

}  // namespace

void index_select_rows(const View& out, const View& table, const View& idx) {
    const int64_t N = idx.shape[0], V = table.shape[0], D = table.shape[1];
    if (N * D == 0) return;
    const dim3 grid(unsigned(std::min<int64_t>((N * D + kThreads - 1) / kThreads, kMaxBlocks)));
    auto copy_rows = [&]<class W>() {
        launch("index_select_elements", index_select_elements<W>, grid, dim3(kThreads), 0, static_cast<W*>(out.data),
               static_cast<const W*>(table.data), static_cast<const int64_t*>(idx.data), N, V, D, device_error());
    };
    if (dtype_size(table.dtype) == 2) copy_rows.template operator()<uint16_t>();
    else if (dtype_size(table.dtype) == 4) copy_rows.template operator()<uint32_t>();
    else copy_rows.template operator()<uint64_t>();
}

void index_add_rows(const View& table, const View& idx, const View& src) {
    const int64_t N = idx.shape[0], V = table.shape[0], D = table.shape[1];
    if (N * D == 0) return;
    const dim3 grid(unsigned(std::min(N, kMaxBlocks)), unsigned(std::min((D + kThreads - 1) / kThreads, kMaxBlocks)));
    dispatch_any(table.dtype, [&]<class T>() {
        launch("index_add_owned_rows", index_add_owned_rows<T>, grid, dim3(kThreads), 0, static_cast<T*>(table.data),
               static_cast<const int64_t*>(idx.data), static_cast<const T*>(src.data), N, V, D, device_error());
    });
}

}  // namespace gg::cuda::GG_CUDA_BUILD

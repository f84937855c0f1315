// reduce.cu — sum, max and min over the middle axis of a contiguous (outer, R, inner) block,
// and the sum of squares behind the gradient norm.
//
//   out[o, j] = ⊕_{r < R} in[o, r, j],  ⊕ ∈ {+, max, min}            in (outer, R, inner) → out (outer, inner)
//   acc += Σ_i x_i²                                                    x (n), acc a float64 scalar
//
// As on the CPU, floats accumulate in double and int64 in int64, and max/min propagate NaN
// (a NaN anywhere in the reduced run makes the result NaN). bf16 is read as float, summed in
// double, and the result rounded to bf16 once.
//
// Two mappings for reduce, by the shape of the block (cuda/row_reduce.h):
//   - inner ≥ 32 (a reduction over a leading axis, e.g. a bias gradient): column-wise, a
//     (32, min(R, 16)) block per 32 neighbouring outputs of one o; a warp reads 32 contiguous
//     elements of each row r, the 16 row groups' partials meet in shared memory. Where that
//     gives few blocks and R is long, R is cut into chunks whose partials a second kernel
//     folds in order (cuda/row_reduce.h, "Tall columns").
//   - inner < 32 (e.g. a sum over the last dim): row-wise, each output's R elements, at
//     stride inner, go to one warp (R ≤ 1024) or one block of 256 threads.
// sum_squares takes a list of tensors (every gradient of a model) in two launches: blocks of
// 256 threads each sum a 16384-element chunk of one tensor (cuda/tensor_list.h; in 16-byte
// packs where the tensor is aligned, cuda/packs.h) into that chunk's partial, then one block
// adds the partials in chunk order to acc. Both passes combine in a fixed order, so the
// result depends on the sizes and the alignments (the pack widths), never on timing.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/dispatch_floating.h"
#include "cuda/kernels.h"
#include "cuda/row_reduce.h"
#include "cuda/tensor_list.h"

namespace gg::cuda::GG_CUDA_BUILD {

namespace {

// Accumulates in double for floats (bf16 among them), as the CPU does; in int64 for int64.
template <class T>
using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

// The combine step and starting value of each ReduceOp; max/min propagate NaN.
struct Sum : Add {
    template <class A>
    static constexpr A identity = A(0);
};
struct Max {
    template <class A>
    static constexpr A identity = kLowest<A>;
    template <class A>
    __device__ A operator()(A acc, A x) const { return is_nan(x) || x > acc ? x : acc; }
};
struct Min {
    template <class A>
    static constexpr A identity = kHighest<A>;
    template <class A>
    __device__ A operator()(A acc, A x) const { return is_nan(x) || x < acc ? x : acc; }
};

// in: (outer, R, inner) → out: (outer, inner), inner ≥ 32; grid (inner / 32, outer · chunks),
// block (32, Y). Block (x, g) folds rows chunk_rows(g % chunks) of o = g / chunks: the totals
// go to out when there is one chunk, to partials (outer · chunks, inner) otherwise.
template <class T, class Op>
__global__ void reduce_columns(T* out, Acc<T>* partials, const T* in, int64_t outer, int64_t chunks, int64_t R,
                               int64_t inner) {
    const int64_t j = int64_t(blockIdx.x) * kWarpSize + threadIdx.x;
    for (int64_t g = blockIdx.y; g < outer * chunks; g += gridDim.y) {
        const RowRange rows = chunk_rows(g % chunks, chunks, R);
        const T* block = in + ((g / chunks) * R + rows.begin) * inner;  // (rows, inner)
        const Acc<T> total = column_reduce(
            j < inner, rows.end - rows.begin, Op::template identity<Acc<T>>,
            [&](int64_t r) { return Acc<T>(block[r * inner + j]); }, Op{});
        if (threadIdx.y == 0 && j < inner) {
            if (chunks == 1) out[g * inner + j] = T(total);
            else partials[g * inner + j] = total;
        }
    }
}

// in: (outer, R, inner) → out: (outer, inner), inner < 32; output q = o · inner + j is one row
// of R elements at stride inner.
template <class T, class Op>
__global__ void reduce_rows(T* out, const T* in, int64_t outer, int64_t R, int64_t inner) {
    for (int64_t q = first_row(); q < outer * inner; q += row_step()) {
        const T* run = in + (q / inner) * R * inner + q % inner;  // (R) at stride inner
        Acc<T> acc = Op::template identity<Acc<T>>;
        for (int64_t r = threadIdx.x; r < R; r += blockDim.x) acc = Op{}(acc, Acc<T>(run[r * inner]));
        acc = row_reduce(acc, Op{});
        if (threadIdx.x == 0) out[q] = T(acc);
    }
}

template <class T, class Op>
void launch_reduce(const View& out, const View& in, int64_t outer, int64_t R, int64_t inner) {
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(in.data);
    if (inner >= kWarpSize) {
        const auto first_pass = [&](const LaunchShape& shape, int64_t chunks, Acc<T>* partials) {
            launch("reduce_columns", reduce_columns<T, Op>, shape.grid, shape.block, 0, o, partials, x, outer, chunks,
                   R, inner);
        };
        column_reduction<Acc<T>>(o, outer, R, inner, Op{}, first_pass);
    } else {
        const LaunchShape shape = row_launch(outer * inner, R);
        launch("reduce_rows", reduce_rows<T, Op>, shape.grid, shape.block, 0, o, x, outer, R, inner);
    }
}

// One tensor of a sum of squares: x (n) of `dtype`, its chunks from first_chunk on.
struct SquaresEntry {
    const void* x;
    int64_t n, first_chunk;
    DType dtype;
    bool packed;  // x 16-byte aligned
};

// Σ x² over elements [c.begin, c.end) of x, this thread's share, in double.
template <class T>
__device__ double chunk_sum_squares(const T* x, const ListChunk& c, bool packed) {
    double acc = 0;
    for_each_pack_of<kPackWidth<T>>(c, packed, [&]<int V>(int64_t i) {
        visit_pack<V>(i, [&](int64_t, T xi) { acc += double(xi) * double(xi); }, x);
    });
    return acc;
}

// list: (count) entries, `chunks` chunks in all → partials[k] = Σ x² over chunk k; block b
// sums chunks b, b + G, ... (cuda/tensor_list.h).
__global__ void sum_squares_chunks(double* partials, const SquaresEntry* list, int64_t count, int64_t chunks) {
    for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const ListChunk c = find_chunk(list, count, chunk);
        const SquaresEntry e = list[c.tensor];
        double acc;
        if (e.dtype == DType::f32) acc = chunk_sum_squares(static_cast<const float*>(e.x), c, e.packed);
        else if (e.dtype == DType::f64) acc = chunk_sum_squares(static_cast<const double*>(e.x), c, e.packed);
        else acc = chunk_sum_squares(static_cast<const bfloat16*>(e.x), c, e.packed);
        acc = row_reduce(acc, Add{});
        if (threadIdx.x == 0) partials[chunk] = acc;
    }
}

// *acc += Σ partials[0, chunks), in order; one block.
__global__ void sum_squares_total(double* acc, const double* partials, int64_t chunks) {
    double sum = 0;
    for (int64_t k = threadIdx.x; k < chunks; k += blockDim.x) sum += partials[k];
    sum = row_reduce(sum, Add{});
    if (threadIdx.x == 0) *acc += sum;
}

}  // namespace

void reduce(ReduceOp op, const View& out, const View& in, int64_t outer, int64_t R, int64_t inner) {
    if (op != ReduceOp::sum && R == 0) throw std::invalid_argument("reduce: max/min over an empty dim");
    if (outer * inner == 0) return;
    dispatch_any(out.dtype, [&]<class T>() {
        switch (op) {
            case ReduceOp::sum: launch_reduce<T, Sum>(out, in, outer, R, inner); break;
            case ReduceOp::max: launch_reduce<T, Max>(out, in, outer, R, inner); break;
            case ReduceOp::min: launch_reduce<T, Min>(out, in, outer, R, inner); break;
        }
    });
}

void sum_squares(const View& acc, std::span<const View> xs) {
    std::vector<SquaresEntry> list;
    for (const View& x : xs) {
        if (x.numel() == 0) continue;
        if (x.dtype != DType::f32 && x.dtype != DType::f64 && x.dtype != DType::bf16)
            throw std::invalid_argument(std::string("sum_squares: needs floating tensors, not ") + dtype_name(x.dtype));
        list.push_back({x.data, x.numel(), 0, x.dtype, aligned16(x.data)});
    }
    if (list.empty()) return;
    const int64_t chunks = number_chunks(list);
    const size_t bytes = size_t(chunks) * sizeof(double);
    auto* partials = static_cast<double*>(allocate(bytes));
    with_device_list(list, [&](const SquaresEntry* entries) {
        launch("sum_squares_chunks", sum_squares_chunks, list_grid(chunks), dim3(kListThreads), 0, partials, entries,
               int64_t(list.size()), chunks);
    });
    launch("sum_squares_total", sum_squares_total, dim3(1), dim3(kRowBlockThreads), 0, static_cast<double*>(acc.data),
           static_cast<const double*>(partials), chunks);
    deallocate(partials, bytes);  // one stream: a later kernel that reuses it runs after these two
}

}  // namespace gg::cuda::GG_CUDA_BUILD

// shape_ops.cpp — joining and splitting tensors, repeating, triangular masks.
//
// split/chunk are narrow() views whose gradients meet in one tensor; repeat_interleave is
// unsqueeze → expand → reshape; tril/triu are where() with an index mask. Their gradients
// come from those pieces.
#include <memory>
#include <stdexcept>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tensor/views.h"

namespace gg {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
    if (tensors.empty()) throw std::invalid_argument("cat: no tensors given");
    const Tensor& first = tensors[0];
    check_defined(first, "cat");
    dim = wrap_dim(dim, first.dim(), "cat");
    Shape shape = first.shape();
    shape[dim] = 0;
    for (const Tensor& t : tensors) {
        check_defined(t, "cat");
        bool ok = t.dim() == first.dim() && t.dtype() == first.dtype() && t.device() == first.device();
        for (int64_t d = 0; ok && d < t.dim(); ++d) ok = d == dim || t.size(d) == first.size(d);
        if (!ok)
            throw std::invalid_argument("cat: cannot join " + shape_str(first.shape()) + " " +
                                        dtype_name(first.dtype()) + " and " + shape_str(t.shape()) + " " +
                                        dtype_name(t.dtype()) + " along dim " + std::to_string(dim));
        shape[dim] += t.size(dim);
    }
    Tensor out = Tensor::empty(shape, first.dtype(), first.device());
    std::vector<int64_t> starts;
    int64_t start = 0;
    {
        NoGradGuard no_grad;
        for (const Tensor& t : tensors) {
            backend(out.device()).copy(out.narrow(dim, start, t.size(dim)).view_desc(), t.view_desc());
            starts.push_back(start);
            start += t.size(dim);
        }
    }
    return record("cat", out, tensors, [=](const Tensor& g) {
        std::vector<Tensor> grads;
        for (size_t i = 0; i < tensors.size(); ++i) grads.push_back(g.narrow(dim, starts[i], tensors[i].size(dim)));
        return grads;
    });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
    if (tensors.empty()) throw std::invalid_argument("stack: no tensors given");
    std::vector<Tensor> expanded;
    for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(dim));
    return cat(expanded, dim);
}

namespace {
// What the pieces of one split share in backward: x's gradient, into which each piece writes
// its own, and which pieces have written.
struct SplitGradient {
    Tensor grad;  // x's shape; undefined until the first piece's gradient comes
    std::vector<bool> written;
};
}  // namespace

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
    check_defined(x, "split");
    dim = wrap_dim(dim, x.dim(), "split");
    int64_t total = 0;
    bool ok = true;
    for (int64_t size : sizes) ok = ok && size >= 0, total += size;
    if (!ok || total != x.size(dim))
        throw std::invalid_argument("split: sizes " + shape_str(sizes) + " do not add up to dim " +
                                    std::to_string(dim) + " of " + shape_str(x.shape()));
    // Each piece is a view. Its gradient, as narrow's, would be a zero tensor of x's shape with
    // the piece's slice written in, one per piece, then summed; here every piece writes its
    // slice into one gradient of x instead: one copy per piece, no zeros, no sums. The pieces
    // hang on `joint`, x seen through one more node: the engine runs it after every piece
    // (it comes before them all), so that when it hands the gradient on to x, every piece has
    // written, and it fills with zeros only the slices of pieces that received no gradient.
    const auto shared = std::make_shared<SplitGradient>(SplitGradient{Tensor(), std::vector<bool>(sizes.size())});
    std::vector<int64_t> starts;
    for (int64_t i = 0, start = 0; i < int64_t(sizes.size()); start += sizes[i++]) starts.push_back(start);
    const Tensor joint = record("split", x.alias(x.shape(), x.strides(), x.offset()), {x}, [=](const Tensor& g) {
        for (size_t i = 0; i < sizes.size(); ++i)
            if (!shared->written[i]) g.narrow(dim, starts[i], sizes[i]).fill_(0);
        *shared = {Tensor(), std::vector<bool>(sizes.size())};  // ready for the next backward (retain_graph)
        return std::vector<Tensor>{g};
    });
    std::vector<Tensor> pieces;
    for (size_t i = 0; i < sizes.size(); ++i) {
        const ViewGeometry view = narrow_geometry(joint, dim, starts[i], sizes[i]);
        pieces.push_back(record("split", joint.alias(view.shape, view.strides, view.offset), {joint},
                                [=](const Tensor& g) {
            // The first piece of a pass allocates x's gradient and hands it to `joint`; the
            // others only write into it. A piece that has already written starts a new pass.
            const bool first = !shared->grad.defined() || shared->written[i];
            if (first) *shared = {Tensor::empty(x.shape(), g.dtype(), g.device()), std::vector<bool>(sizes.size())};
            backend(g.device()).copy(shared->grad.narrow(dim, starts[i], sizes[i]).view_desc(), g.view_desc());
            shared->written[i] = true;
            return std::vector<Tensor>{first ? shared->grad : Tensor()};
        }));
    }
    return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
    check_defined(x, "split");
    dim = wrap_dim(dim, x.dim(), "split");
    if (split_size <= 0) throw std::invalid_argument("split: size " + std::to_string(split_size) + " must be positive");
    std::vector<int64_t> sizes;
    for (int64_t start = 0; start < x.size(dim); start += split_size)
        sizes.push_back(std::min(split_size, x.size(dim) - start));
    return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
    check_defined(x, "chunk");
    if (chunks <= 0) throw std::invalid_argument("chunk: " + std::to_string(chunks) + " chunks must be positive");
    const int64_t n = x.size(dim);
    return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim) {
    check_defined(x, "repeat_interleave");
    dim = wrap_dim(dim, x.dim(), "repeat_interleave");
    if (repeats < 1) throw std::invalid_argument("repeat_interleave: repeats " + std::to_string(repeats) + " < 1");
    // (.., n, ..) → (.., n, 1, ..) → (.., n, r, ..) → (.., n·r, ..): each slice r times in a row.
    Shape expanded = x.shape();
    expanded.insert(expanded.begin() + dim + 1, repeats);
    Shape merged = x.shape();
    if (__builtin_mul_overflow(merged[dim], repeats, &merged[dim]))
        throw std::length_error("repeat_interleave: " + std::to_string(repeats) + " repeats of shape " +
                                shape_str(x.shape()) + " overflow int64");
    return x.unsqueeze(dim + 1).expand(expanded).reshape(merged);
}

namespace {
// keep[i, j] over the last two dims: j − i ≤ k (lower) or j − i ≥ k (upper).
Tensor triangle(const Tensor& x, int64_t k, bool upper, const char* name) {
    check_defined(x, name);
    if (x.dim() < 2) throw std::invalid_argument(std::string(name) + ": needs ≥ 2 dims, got " + shape_str(x.shape()));
    const Tensor rows = arange(x.size(-2), DType::i64, x.device()).unsqueeze(1);
    const Tensor cols = arange(x.size(-1), DType::i64, x.device()).unsqueeze(0);
    const Tensor offset = cols - rows, diag = scalar(double(k), DType::i64, x.device());
    const Tensor keep = upper ? ge(offset, diag) : le(offset, diag);
    return where(keep, x, scalar(0, x.dtype(), x.device()));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return triangle(x, k, false, "tril"); }
Tensor triu(const Tensor& x, int64_t k) { return triangle(x, k, true, "triu"); }

}  // namespace gg

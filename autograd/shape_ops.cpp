// shape_ops.cpp — joining and splitting tensors, repeating, triangular masks.
//
// split/chunk are narrow() views; repeat_interleave is unsqueeze → expand → reshape;
// tril/triu are where() with an index mask. Their gradients come from those pieces.
#include <stdexcept>
#include <string>

#include "autograd/engine.h"
#include "autograd/ops.h"

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

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
    check_defined(x, "split");
    dim = wrap_dim(dim, x.dim(), "split");
    if (split_size <= 0) throw std::invalid_argument("split: size " + std::to_string(split_size) + " must be positive");
    std::vector<Tensor> parts;
    for (int64_t start = 0; start < x.size(dim); start += split_size)
        parts.push_back(x.narrow(dim, start, std::min(split_size, x.size(dim) - start)));
    return parts;
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

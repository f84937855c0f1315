// nn_ops.cpp — the fused ops neural networks lean on: softmax, log_softmax,
// cross_entropy, rms_norm, swiglu, rope, embedding, dropout, topk and gather.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/ops.h"

namespace gg {

namespace {

// Kernels work on rows of a contiguous (rows, C) matrix; these move `dim` to the end and
// back so that any dim can be the row.
Tensor to_rows(const Tensor& x, int64_t dim) { return x.detach().transpose(dim, -1).contiguous(); }
Tensor from_rows(const Tensor& rows, int64_t dim) { return rows.transpose(dim, -1); }

// t (..., C) as the (rows, C) matrix the gating kernels read (Backend::swiglu_forward): a
// view when its channels are contiguous and its rows one stride apart, as in a slice of a
// wider product, else a contiguous copy.
Tensor gated_rows(const Tensor& t) {
    const int64_t nd = t.dim(), C = nd ? t.size(-1) : 1;
    bool even_rows = nd > 0 && (C == 1 || t.strides()[nd - 1] == 1);
    for (int64_t d = 0; even_rows && d + 2 < nd; ++d)
        even_rows = t.size(d) == 1 || t.strides()[d] == t.strides()[d + 1] * t.size(d + 1);
    return (even_rows ? t : t.contiguous()).view({C ? t.numel() / C : 0, C});
}

// A contiguous tensor (..., C) as the backend's (rows, C) matrix.
View as_matrix(const Tensor& t) {
    const int64_t C = t.dim() ? t.size(-1) : 1;
    return matrix_view(t.view_desc(), C ? t.numel() / C : 0, C);
}

// Backward of reading x_rows[r, ids[r, j]]: each gradient goes back to the position it
// was read from (several reads of one position add up).
Tensor scatter_back(const Tensor& g, int64_t dim, const Tensor& ids_rows, const Shape& in_rows_shape) {
    Tensor dx = zeros(in_rows_shape, g.dtype(), g.device());
    backend(g.device()).scatter_add_last(as_matrix(dx), as_matrix(ids_rows), as_matrix(to_rows(g, dim)));
    return from_rows(dx, dim);
}

Tensor softmax_impl(const Tensor& x_in, int64_t dim, bool log) {
    const Tensor x = autocast_float32(x_in);
    const char* name = log ? "log_softmax" : "softmax";
    check_defined(x, name);
    if (!is_floating(x.dtype())) throw std::invalid_argument(std::string(name) + ": needs a floating tensor");
    if (x.dim() == 0) return log ? zeros_like(x) : ones_like(x);
    dim = wrap_dim(dim, x.dim(), name);
    const Tensor in = to_rows(x, dim);
    const int64_t cols = in.size(-1), rows = in.numel() / std::max<int64_t>(cols, 1);
    const Device dev = x.device();
    const Tensor y = Tensor::empty(in.shape(), x.dtype(), dev);
    backend(dev).softmax(y.view_desc(), in.view_desc(), rows, cols, log);
    return record(name, from_rows(y, dim), {x}, [=](const Tensor& g) {
        const Tensor g_rows = to_rows(g, dim);
        Tensor dx = Tensor::empty(y.shape(), y.dtype(), dev);
        backend(dev).softmax_backward(dx.view_desc(), y.view_desc(), g_rows.view_desc(), rows, cols, log);
        return std::vector<Tensor>{from_rows(dx, dim)};
    }, {y});
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true); }

Tensor logsumexp(const Tensor& x_in, int64_t dim, bool keepdim) {
    const Tensor x = autocast_float32(x_in);
    check_defined(x, "logsumexp");
    // m is a constant shift: d/dx of m + log Σ exp(x − m) is softmax(x) whatever m is.
    const Tensor m = amax(x.detach(), {dim}, true);
    const Tensor out = log(sum(exp(x - m), {dim}, true)) + m;
    return keepdim ? out : out.squeeze(dim);
}

Tensor z_loss(const Tensor& logits) {
    const Tensor log_z = logsumexp(logits, -1);
    return mean(log_z * log_z);
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, int64_t ignore_index) {
    const Tensor logits = autocast_float32(logits_in);
    check_defined(logits, "cross_entropy");
    check_defined(targets, "cross_entropy");
    const Shape expected(logits.shape().begin(), logits.shape().end() - (logits.dim() > 0 ? 1 : 0));
    if (logits.dim() < 1 || targets.shape() != expected || targets.dtype() != DType::i64 ||
        !is_floating(logits.dtype()) || logits.device() != targets.device())
        throw std::invalid_argument("cross_entropy: logits " + shape_str(logits.shape()) + " " +
                                    dtype_name(logits.dtype()) + " and targets " + shape_str(targets.shape()) + " " +
                                    dtype_name(targets.dtype()) + ": need floating logits (..., V) and int64 targets "
                                    "(...) on the same device");
    const int64_t V = logits.size(-1), N = targets.numel();
    const Tensor x = logits.detach().reshape({N, V}), t = targets.reshape({N});
    const Device dev = logits.device();
    // Mean over the rows that count, as torch's reduction='mean' with ignore_index.
    // The count stays a tensor on the device: no copy to the host on every call.
    const Tensor valid = ne(t, scalar(double(ignore_index), DType::i64, dev)).to(logits.dtype());
    const Tensor n_valid = sum(valid);
    // The loss is the logits' only consumer, so the gradient is computed here, in the pass
    // over the logits that finds the loss (llm.c's fused classifier): the kernel writes
    // dlogits = d(mean loss)/d(logits) as it goes, and backward only scales it by the upstream
    // gradient. It holds the memory backward would have allocated, from here instead.
    const bool with_gradient = grad_enabled() && logits.requires_grad();
    Tensor losses = Tensor::empty({N}, logits.dtype(), dev), dlogits, row_scale;
    if (with_gradient) {
        dlogits = Tensor::empty({N, V}, x.dtype(), dev);
        row_scale = (valid / n_valid).contiguous();  // d(mean loss)/d(loss_i)
    }
    const auto view_of = [](const Tensor& t) { return t.defined() ? t.view_desc() : View{}; };
    backend(dev).cross_entropy(losses.view_desc(), view_of(dlogits), x.view_desc(), t.view_desc(), view_of(row_scale),
                               ignore_index);
    const Tensor loss = sum(losses) / n_valid;
    if (!with_gradient) return loss;
    const Shape logits_shape = logits.shape();
    return record("cross_entropy", loss, {logits}, [=](const Tensor& g) {
        // g = dL/dloss, a scalar; most often exactly 1 (backward() from this loss, or from a
        // sum it is part of), and then dlogits is the gradient as it stands. Reading g waits
        // for the device, as the loss the training loop read before backward already did.
        // dlogits itself is never written, so a retained graph's second backward gets it again.
        const Tensor dx = g.item() == 1 ? dlogits : dlogits * g;
        return std::vector<Tensor>{dx.view(logits_shape)};
    }, {dlogits});
}

Tensor rms_norm(const Tensor& x_in, const Tensor& weight_in, double eps) {
    const Tensor x = autocast_float32(x_in), weight = autocast_float32(weight_in);
    check_defined(x, "rms_norm");
    check_defined(weight, "rms_norm");
    if (!is_floating(x.dtype()) || x.dim() == 0 || weight.dim() != 1 || weight.size(0) != x.size(-1) ||
        weight.dtype() != x.dtype() || weight.device() != x.device())
        throw std::invalid_argument("rms_norm: x " + describe(x) + " and weight " + describe(weight) +
                                    ": need floating x (..., C) and a weight (C) of its dtype and device");
    const int64_t C = x.size(-1), rows = x.numel() / std::max<int64_t>(C, 1);
    const Device dev = x.device();
    const Tensor xc = x.detach().contiguous(), w = weight.detach().contiguous();
    Tensor y = Tensor::empty(x.shape(), x.dtype(), dev);
    // 1/rms, which backward reads, stays float32 for bfloat16 x: a statistic, not an activation.
    Tensor rstd = Tensor::empty({rows}, x.dtype() == DType::bf16 ? DType::f32 : x.dtype(), dev);
    backend(dev).rms_norm_forward(y.view_desc(), rstd.view_desc(), xc.view_desc(), w.view_desc(), rows, C, eps);
    return record("rms_norm", y, {x, weight}, [=](const Tensor& g) {
        Tensor dx = Tensor::empty(xc.shape(), xc.dtype(), dev);
        Tensor dw = Tensor::empty({C}, xc.dtype(), dev);
        backend(dev).rms_norm_backward(dx.view_desc(), dw.view_desc(), g.contiguous().view_desc(), xc.view_desc(),
                                       w.view_desc(), rstd.view_desc(), rows, C);
        return std::vector<Tensor>{dx, dw};
    }, {xc, w});
}

Tensor swiglu(const Tensor& a, const Tensor& b) {
    if (autocast_mixes(a, b)) return swiglu(autocast_float32(a), autocast_float32(b));  // the promote rule
    check_defined(a, "swiglu");
    check_defined(b, "swiglu");
    if (!is_floating(a.dtype()) || a.shape() != b.shape() || a.dtype() != b.dtype() || a.device() != b.device())
        throw std::invalid_argument("swiglu: a " + describe(a) + " and b " + describe(b) +
                                    ": need floating a and b of one shape, dtype and device");
    const Device dev = a.device();
    const Tensor ac = gated_rows(a.detach()), bc = gated_rows(b.detach());  // (rows, C)
    Tensor y = Tensor::empty(a.shape(), a.dtype(), dev);
    backend(dev).swiglu_forward(as_matrix(y), ac.view_desc(), bc.view_desc());
    const Shape shape = a.shape();
    return record("swiglu", y, {a, b}, [=](const Tensor& g) {
        Tensor da = Tensor::empty(shape, ac.dtype(), dev), db = Tensor::empty(shape, ac.dtype(), dev);
        backend(dev).swiglu_backward(as_matrix(da), as_matrix(db), as_matrix(g.contiguous()), ac.view_desc(),
                                     bc.view_desc());
        return std::vector<Tensor>{da, db};
    }, {ac, bc});
}

Tensor swiglu(const Tensor& h) {
    check_defined(h, "swiglu");
    if (!is_floating(h.dtype()) || h.dim() == 0 || h.size(-1) % 2 != 0)
        throw std::invalid_argument("swiglu: h " + describe(h) + ": need floating h (..., 2n), a and b side by side");
    const Device dev = h.device();
    const int64_t n = h.size(-1) / 2;
    const Tensor hd = h.detach();
    const Tensor ac = gated_rows(hd.narrow(-1, 0, n)), bc = gated_rows(hd.narrow(-1, n, n));  // (rows, n)
    Shape shape = h.shape();
    shape.back() = n;
    Tensor y = Tensor::empty(shape, h.dtype(), dev);
    backend(dev).swiglu_forward(as_matrix(y), ac.view_desc(), bc.view_desc());
    const Shape h_shape = h.shape();
    // da and db are written where they lie in dh: nothing to join.
    return record("swiglu", y, {h}, [=](const Tensor& g) {
        const Tensor dh = Tensor::empty(h_shape, ac.dtype(), dev);
        backend(dev).swiglu_backward(gated_rows(dh.narrow(-1, 0, n)).view_desc(),
                                     gated_rows(dh.narrow(-1, n, n)).view_desc(), as_matrix(g.contiguous()),
                                     ac.view_desc(), bc.view_desc());
        return std::vector<Tensor>{dh};
    }, {ac, bc});
}

Tensor sigmoid_gate(const Tensor& s, const Tensor& a) {
    if (autocast_mixes(s, a)) return sigmoid_gate(autocast_float32(s), autocast_float32(a));  // the promote rule
    check_defined(s, "sigmoid_gate");
    check_defined(a, "sigmoid_gate");
    if (!is_floating(s.dtype()) || s.shape() != a.shape() || s.dtype() != a.dtype() || s.device() != a.device())
        throw std::invalid_argument("sigmoid_gate: s " + describe(s) + " and a " + describe(a) +
                                    ": need floating s and a of one shape, dtype and device");
    const Device dev = s.device();
    const Tensor sc = gated_rows(s.detach()), ac = gated_rows(a.detach());  // (rows, C)
    Tensor y = Tensor::empty(s.shape(), s.dtype(), dev);
    backend(dev).sigmoid_gate_forward(as_matrix(y), sc.view_desc(), ac.view_desc());
    const Shape shape = s.shape();
    return record("sigmoid_gate", y, {s, a}, [=](const Tensor& g) {
        Tensor ds = Tensor::empty(shape, sc.dtype(), dev), da = Tensor::empty(shape, sc.dtype(), dev);
        backend(dev).sigmoid_gate_backward(as_matrix(ds), as_matrix(da), as_matrix(g.contiguous()), sc.view_desc(),
                                           ac.view_desc());
        return std::vector<Tensor>{ds, da};
    }, {sc, ac});
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
    if (autocast_mixes(x, cos)) return rope(autocast_float32(x), cos, sin);  // the promote rule: the tables are float32
    check_defined(x, "rope");
    check_defined(cos, "rope");
    check_defined(sin, "rope");
    const bool ok = is_floating(x.dtype()) && x.dim() == 4 && x.size(3) % 2 == 0 &&
                    cos.shape() == Shape{x.size(2), x.size(3)} && sin.shape() == cos.shape() &&
                    cos.dtype() == x.dtype() && sin.dtype() == x.dtype() && cos.device() == x.device() &&
                    sin.device() == x.device() && !cos.requires_grad() && !sin.requires_grad();
    if (!ok)
        throw std::invalid_argument("rope: x " + describe(x) + ", cos " + describe(cos) + ", sin " + describe(sin) +
                                    ": need floating x (B, H, T, D) with D even and constant (T, D) tables of its "
                                    "dtype and device");
    const Device dev = x.device();
    const Tensor c = cos.detach().contiguous(), s = sin.detach().contiguous();
    // The heads of a (B, T, H·D) projection (x.view(B, T, H, D).transpose(1, 2)) lie token-major:
    // y and dx are laid out so too, and dx goes back to the projection as a view, not a copy.
    const bool token_major = x.strides()[1] < x.strides()[2];
    const Shape shape = x.shape();
    const auto empty_like_x = [=](DType dtype) {
        return token_major ? Tensor::empty({shape[0], shape[2], shape[1], shape[3]}, dtype, dev).transpose(1, 2)
                           : Tensor::empty(shape, dtype, dev);
    };
    Tensor y = empty_like_x(x.dtype());
    backend(dev).rope(y.view_desc(), x.detach().view_desc(), c.view_desc(), s.view_desc(), false);
    // The rotation is linear and orthogonal (up to YaRN's scale), so backward is its transpose.
    return record("rope", y, {x}, [=](const Tensor& g) {
        Tensor dx = empty_like_x(g.dtype());
        backend(dev).rope(dx.view_desc(), g.view_desc(), c.view_desc(), s.view_desc(), true);
        return std::vector<Tensor>{dx};
    }, {c, s});
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
    check_defined(weight, "embedding");
    check_defined(ids, "embedding");
    if (weight.dim() != 2 || ids.dtype() != DType::i64 || weight.device() != ids.device())
        throw std::invalid_argument("embedding: weight " + shape_str(weight.shape()) + " and ids " +
                                    shape_str(ids.shape()) + " " + dtype_name(ids.dtype()) +
                                    ": need a 2-d weight and int64 ids on the same device");
    const int64_t V = weight.size(0), D = weight.size(1), N = ids.numel();
    const Tensor table = weight.detach().contiguous(), flat_ids = ids.reshape({N}).contiguous();
    Shape out_shape = ids.shape();
    out_shape.push_back(D);
    Tensor out = Tensor::empty({N, D}, weight.dtype(), weight.device());
    backend(weight.device()).index_select_rows(out.view_desc(), table.view_desc(), flat_ids.view_desc());
    return record("embedding", out.view(out_shape), {weight, ids}, [=](const Tensor& g) {
        // Each looked-up row receives the gradient of every position that used it.
        Tensor dw = zeros({V, D}, g.dtype(), g.device());
        const Tensor g_rows = g.reshape({N, D}).contiguous();
        backend(g.device()).index_add_rows(dw.view_desc(), flat_ids.view_desc(), g_rows.view_desc());
        return std::vector<Tensor>{dw, Tensor()};
    }, {flat_ids});
}

Tensor index_select(const Tensor& x, const Tensor& ids) { return embedding(x, ids); }

Tensor index_add(const Tensor& x, const Tensor& ids, const Tensor& src) {
    check_defined(x, "index_add");
    check_defined(ids, "index_add");
    check_defined(src, "index_add");
    if (x.dim() != 2 || src.dim() != 2 || ids.dim() != 1 || ids.dtype() != DType::i64 || src.size(0) != ids.size(0) ||
        src.size(1) != x.size(1) || src.dtype() != x.dtype() || src.device() != x.device() || ids.device() != x.device())
        throw std::invalid_argument("index_add: x " + shape_str(x.shape()) + ", ids " + shape_str(ids.shape()) + " " +
                                    dtype_name(ids.dtype()) + ", src " + shape_str(src.shape()) +
                                    ": need x (N, D), int64 ids (M), src (M, D) of x's dtype");
    Tensor out = x.detach().clone();
    const Tensor flat_ids = ids.contiguous();
    backend(x.device()).index_add_rows(out.view_desc(), flat_ids.view_desc(), src.detach().contiguous().view_desc());
    // out = x + Σ rows of src: x's gradient passes unchanged, src's rows read theirs at ids.
    return record("index_add", out, {x, ids, src}, [flat_ids](const Tensor& g) {
        return std::vector<Tensor>{g, Tensor(), index_select(g, flat_ids)};
    }, {flat_ids});
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
    check_defined(x, "dropout");
    if (p < 0 || p > 1) throw std::invalid_argument("dropout: probability " + std::to_string(p) + " is not in [0, 1]");
    if (!training || p == 0) return x;
    if (p == 1) return x * 0.0;
    // Inverted dropout: scale at training time so evaluation needs no change.
    const Tensor r = rand(x.shape(), gen, x.dtype(), x.device());
    const Tensor keep = ge(r, scalar(p, x.dtype(), x.device())) / (1 - p);
    return x * keep;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim) {
    check_defined(x, "topk");
    dim = wrap_dim(dim, x.dim(), "topk");
    if (k < 0 || k > x.size(dim))
        throw std::invalid_argument("topk: k=" + std::to_string(k) + " but dim " + std::to_string(dim) +
                                    " of shape " + shape_str(x.shape()) + " has " + std::to_string(x.size(dim)));
    const Tensor in = to_rows(x, dim);
    Shape rows_shape = in.shape();
    rows_shape.back() = k;
    Tensor values = Tensor::empty(rows_shape, x.dtype(), x.device());
    Tensor indices = Tensor::empty(rows_shape, DType::i64, x.device());
    backend(x.device()).topk_last(as_matrix(values), as_matrix(indices), as_matrix(in), k);
    const Shape in_rows_shape = in.shape();
    Tensor out = record("topk", from_rows(values, dim), {x}, [=](const Tensor& g) {
        return std::vector<Tensor>{scatter_back(g, dim, indices, in_rows_shape)};
    }, {indices});
    return {out, from_rows(indices, dim)};
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
    check_defined(x, "gather");
    check_defined(idx, "gather");
    dim = wrap_dim(dim, x.dim(), "gather");
    bool ok = idx.dim() == x.dim() && idx.dtype() == DType::i64 && idx.device() == x.device();
    for (int64_t d = 0; ok && d < x.dim(); ++d) ok = d == dim || idx.size(d) == x.size(d);
    if (!ok)
        throw std::invalid_argument("gather: x " + shape_str(x.shape()) + " and index " + shape_str(idx.shape()) +
                                    " " + dtype_name(idx.dtype()) + ": the int64 index must match x except along dim " +
                                    std::to_string(dim));
    const Tensor in = to_rows(x, dim), ids = to_rows(idx, dim);
    Tensor out = Tensor::empty(ids.shape(), x.dtype(), x.device());
    backend(x.device()).gather_last(as_matrix(out), as_matrix(in), as_matrix(ids));
    const Shape in_rows_shape = in.shape();
    return record("gather", from_rows(out, dim), {x}, [=](const Tensor& g) {
        return std::vector<Tensor>{scatter_back(g, dim, ids, in_rows_shape)};
    }, {ids});
}

}  // namespace gg

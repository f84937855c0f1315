#include "distributed/gradient_buckets.h"

#include <chrono>
#include <stdexcept>

#include "autograd/engine.h"

namespace gg::dist {

GradientBuckets::GradientBuckets(std::vector<Tensor> params, std::shared_ptr<ProcessGroup> group,
                                 int64_t bucket_bytes)
    : params_(std::move(params)), group_(std::move(group)) {
    if (!group_) throw std::invalid_argument("GradientBuckets: no process group");
    if (bucket_bytes < 1) throw std::invalid_argument("GradientBuckets: bucket_bytes " + std::to_string(bucket_bytes) + " < 1");
    // Last parameter first; a new bucket when this one is full or the dtype or device changes.
    std::vector<size_t> current;
    int64_t bytes = 0;
    const auto close = [&] {
        if (current.empty()) return;
        const Tensor& first = params_[current.front()];
        int64_t numel = 0;
        for (size_t i : current) numel += params_[i].numel();
        buckets_.push_back({current, zeros({numel}, first.dtype(), first.device())});
        current.clear();
        bytes = 0;
    };
    for (size_t i = params_.size(); i-- > 0;) {
        const Tensor& p = params_[i];
        check_reducible(p, "GradientBuckets");
        if (!current.empty()) {
            const Tensor& last = params_[current.back()];
            if (p.dtype() != last.dtype() || p.device() != last.device() || bytes >= bucket_bytes) close();
        }
        current.push_back(i);
        bytes += p.numel() * int64_t(dtype_size(p.dtype()));
    }
    close();
}

void GradientBuckets::broadcast_parameters(int root) {
    NoGradGuard no_grad;
    for (const Tensor& p : params_) group_->broadcast(p.detach(), root);
}

void GradientBuckets::average() {
    NoGradGuard no_grad;
    const auto start = std::chrono::steady_clock::now();
    // Which parameters have a gradient on some rank (a token routed to no expert leaves none).
    std::vector<double> has(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) has[i] = params_[i].grad().defined();
    const Tensor present = from_vector(has, {int64_t(has.size())});
    group_->all_reduce(present, ReduceOp::sum);
    const double* anywhere = present.data<const double>();
    for (const Bucket& bucket : buckets_) {
        int64_t at = 0;
        for (size_t i : bucket.params) {  // (numel,) slices of the flat buffer, one per parameter
            const Tensor& p = params_[i];
            const Tensor slot = bucket.flat.narrow(0, at, p.numel());
            if (p.grad().defined()) slot.copy_(p.grad().reshape({-1}));
            else slot.fill_(0);
            at += p.numel();
        }
        group_->all_reduce(bucket.flat, ReduceOp::mean);
        at = 0;
        for (size_t i : bucket.params) {
            const Tensor& p = params_[i];
            if (anywhere[i] > 0) {
                if (!p.grad().defined()) p.set_grad(zeros_like(p.detach()));
                p.grad().copy_(bucket.flat.narrow(0, at, p.numel()).view(p.shape()));
            }
            at += p.numel();
        }
    }
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace gg::dist

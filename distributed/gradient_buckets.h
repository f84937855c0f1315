// gradient_buckets.h — averaging the gradients of every rank after backward.
//
// Data parallelism: each of N ranks computes the gradient of the mean loss over its own B
// sequences; the mean of those N gradients is the gradient of the mean loss over all N·B
// (every shard has the same size, so the mean of the means is the mean), which is what one
// process with batch N·B would compute. Averaging them is one all_reduce(mean).
//
// A model has dozens of parameter tensors; an all-reduce each would pay MPI's fixed cost
// (latency) dozens of times per step. So the gradients are copied into a few flat buffers,
// "buckets" of about bucket_bytes each, in reverse parameter order (the order backward
// finishes them, last layer first), and each bucket is reduced in one call. PyTorch's
// DistributedDataParallel does the same, and starts a bucket's all-reduce as soon as
// backward has filled it, so communication overlaps the rest of backward; here the buckets
// are reduced one after another once backward is done (seconds_averaging() says what
// that costs).
#pragma once
#include <memory>
#include <vector>

#include "distributed/process_group.h"

namespace gg::dist {

class GradientBuckets {
public:
    // params: the same list, in the same order, on every rank (an optimiser's params()).
    GradientBuckets(std::vector<Tensor> params, std::shared_ptr<ProcessGroup> group,
                    int64_t bucket_bytes = int64_t(4) << 20);
    // Every rank's parameters become rank `root`'s (before the first step).
    void broadcast_parameters(int root = 0);
    // After backward on every rank: each parameter's gradient becomes the mean over ranks.
    // A parameter no rank has a gradient for keeps none (as in one process: AdamW skips it);
    // one that only some ranks have counts as zero on the others.
    void average();
    int64_t buckets() const { return int64_t(buckets_.size()); }
    double seconds_averaging() const { return seconds_; }  // in average() (copies and all-reduces), summed

private:
    struct Bucket {
        std::vector<size_t> params;  // indices into params_
        Tensor flat;                 // (Σ numel,) of their dtype, on their device
    };
    std::vector<Tensor> params_;
    std::shared_ptr<ProcessGroup> group_;
    std::vector<Bucket> buckets_;
    double seconds_ = 0;
};

}  // namespace gg::dist

// engine.cpp — backward(): topological sort, then one reverse sweep accumulating gradients.
#include "autograd/engine.h"

#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autocast.h"
#include "autograd/ops.h"

namespace gg {

namespace {
thread_local bool grad_mode = true;
}

bool grad_enabled() { return grad_mode; }
NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward,
              const std::vector<Tensor>& saved) {
    if (!grad_mode) return out;
    bool any = false;
    for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
    if (!any) return out;
    std::vector<SavedVersion> versions;
    for (const Tensor& t : saved)
        if (t.defined()) versions.push_back({t.impl()->storage, t.version()});
    out.impl()->requires_grad = true;
    out.impl()->grad_fn = std::make_shared<Node>(name, std::move(inputs), std::move(backward), std::move(versions));
    return out;
}

// Left to the compiler, freeing a node frees its inputs, whose nodes free theirs, and so
// on: one nested call per node, which overflows the stack on a graph 100k ops deep. So
// the outermost ~Node keeps a queue: nested ones only hand their inputs to it, and it
// drops them one at a time.
Node::~Node() {
    thread_local std::vector<Tensor>* queue = nullptr;
    std::vector<Tensor> pending;
    const bool outermost = queue == nullptr;
    if (outermost) queue = &pending;
    for (Tensor& t : inputs) queue->push_back(std::move(t));
    backward = nullptr;  // the closure may hold graph tensors too; they land in the queue
    if (!outermost) return;
    while (!pending.empty()) {
        // Dropping the last reference to a tensor frees its node, whose inputs join `pending`.
        Tensor t = std::move(pending.back());
        pending.pop_back();
    }
    queue = nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const { run_backward(*this, gradient, retain_graph); }

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
    // Backward runs the dtypes forward chose, whatever scope it is called from: a gradient
    // has its tensor's dtype, and the casts' backwards take it across (autograd/autocast.h).
    const Autocast forward_dtypes(DType::f32);
    check_defined(root, "backward");
    if (!root.requires_grad())
        throw std::logic_error("backward: the tensor of shape " + shape_str(root.shape()) +
                               " does not require grad and has no grad_fn");
    Tensor seed = gradient;
    if (!seed.defined()) {
        if (root.numel() != 1)
            throw std::logic_error("backward: a gradient is needed for the non-scalar output of shape " +
                                   shape_str(root.shape()) + " (pass one of the same shape)");
        seed = ones_like(root);
    } else if (seed.shape() != root.shape() || seed.dtype() != root.dtype()) {
        throw std::invalid_argument("backward: gradient " + shape_str(seed.shape()) + " " + dtype_name(seed.dtype()) +
                                    " for an output " + shape_str(root.shape()) + " " + dtype_name(root.dtype()));
    }

    // 1. Order the graph so that every tensor comes after all tensors computed from it
    //    (post-order DFS from the root, reversed), iteratively to survive deep graphs.
    std::vector<Tensor> order;
    std::unordered_set<TensorImpl*> visited;
    std::vector<std::pair<Tensor, size_t>> stack{{root, 0}};
    visited.insert(root.impl());
    while (!stack.empty()) {
        auto& [t, next_input] = stack.back();
        const Node* node = t.grad_fn().get();
        if (node && next_input < node->inputs.size()) {
            const Tensor& parent = node->inputs[next_input++];
            if (parent.defined() && parent.requires_grad() && visited.insert(parent.impl()).second)
                stack.push_back({parent, 0});
        } else {
            order.push_back(t);
            stack.pop_back();
        }
    }

    // 2. Sweep from the root back to the leaves: each node turns its output's gradient into
    //    its inputs' gradients; several paths into one tensor add up (the chain rule's sum).
    NoGradGuard no_grad;
    std::unordered_map<TensorImpl*, Tensor> grads{{root.impl(), seed}};
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const Tensor& t = *it;
        auto found = grads.find(t.impl());
        if (found == grads.end()) continue;
        const Tensor g = found->second;
        grads.erase(found);
        Node* node = t.grad_fn().get();
        if (!node) {  // a leaf: accumulate into .grad across backward calls
            // clone: .grad must not alias a tensor the caller still holds (e.g. the seed)
            t.set_grad(t.grad().defined() ? add(t.grad(), g) : g.clone());
            continue;
        }
        if (!node->backward)
            throw std::logic_error("backward: trying to go through '" + node->name +
                                   "' a second time; its saved tensors were freed (use retain_graph)");
        for (const SavedVersion& s : node->saved)
            if (s.storage->version != s.version)
                throw std::logic_error("backward: a tensor saved by '" + node->name +
                                       "' was modified in place after it was saved (version " +
                                       std::to_string(s.storage->version) + ", expected " + std::to_string(s.version) +
                                       "); clone it before writing, or write before the op uses it");
        std::vector<Tensor> input_grads = node->backward(g);
        if (input_grads.size() != node->inputs.size())
            throw std::logic_error("backward: '" + node->name + "' returned " + std::to_string(input_grads.size()) +
                                   " gradients for " + std::to_string(node->inputs.size()) + " inputs");
        for (size_t i = 0; i < node->inputs.size(); ++i) {
            const Tensor& input = node->inputs[i];
            if (!input.defined() || !input.requires_grad() || !input_grads[i].defined()) continue;
            if (input_grads[i].shape() != input.shape())
                throw std::logic_error("backward: '" + node->name + "' returned a gradient of shape " +
                                       shape_str(input_grads[i].shape()) + " for an input of shape " +
                                       shape_str(input.shape()));
            Tensor& slot = grads[input.impl()];
            slot = slot.defined() ? add(slot, input_grads[i]) : input_grads[i];
        }
        if (!retain_graph) node->backward = nullptr, node->saved.clear();  // frees the tensors the closure saved
    }
}

}  // namespace gg

// engine.h — the define-by-run graph and reverse-mode backpropagation.
//
// Every differentiable op computes its output, then calls `record`, which (when grad
// mode is on and some input requires grad) hangs a Node on the output: the inputs plus
// a closure that maps the output's gradient to the inputs' gradients. backward() is a
// topological sort of those Nodes and one reverse loop over them (engine.cpp).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace gg {

// dL/d(inputs) from dL/d(output); an undefined Tensor where an input has no gradient.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

// The memory of a tensor that a backward closure reads, and its Storage::version when the
// op ran. An in-place write since then changes the version, and backward refuses to run.
struct SavedVersion {
    std::shared_ptr<Storage> storage;
    uint64_t version;
};

struct Node {
    Node(std::string name, std::vector<Tensor> inputs, BackwardFn backward, std::vector<SavedVersion> saved)
        : name(std::move(name)), inputs(std::move(inputs)), backward(std::move(backward)), saved(std::move(saved)) {}

    std::string name;            // the op, for error messages and graph dumps
    std::vector<Tensor> inputs;  // the parents in the graph
    BackwardFn backward;         // released after backward unless the graph is retained
    std::vector<SavedVersion> saved;  // what `backward` reads; released with it

    ~Node();  // frees a long chain of nodes in a loop, not by recursion (engine.cpp)
};

// Attaches `out` to the graph (see above) and returns it. `saved` lists every tensor whose
// values the closure reads (inputs, the output, or tensors made from them): as PyTorch,
// backward throws, naming the op, when one of them was written in place after this call.
Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward,
              const std::vector<Tensor>& saved = {});

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

// Grad mode: while a NoGradGuard lives, ops record nothing (evaluation, optimiser steps).
bool grad_enabled();
class NoGradGuard {
public:
    NoGradGuard();
    ~NoGradGuard();
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
    bool previous_;
};

}  // namespace gg

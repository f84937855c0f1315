"""PyTorch reference trajectories for the optimisers, checked by tests/test_optim.cpp.

Run from the repository root with Debian's Python, which has PyTorch:

    /usr/bin/python3 tests/reference/make_adamw_fixture.py

It writes tests/reference/optim.safetensors. For each case <case> (an optimiser on two
small parameters of one dtype) it stores the initial parameters <case>.param.<i>, the
fixed gradient fed at each step <case>.grad.<step>.<i>, and the parameters after each
step <case>.after.<step>.<i>, for steps 0..STEPS-1.
"""
import pathlib

import torch

from safetensors_by_hand import write_safetensors

OUT = pathlib.Path(__file__).with_name("optim.safetensors")
STEPS = 10
SHAPES = [(3, 4), (5,)]

torch.manual_seed(0)
tensors = {}


def add_case(case, make_optimizer, dtype):
    params = [torch.randn(shape, dtype=dtype, requires_grad=True) for shape in SHAPES]
    tensors.update({f"{case}.param.{i}": p.detach().clone() for i, p in enumerate(params)})
    opt = make_optimizer(params)
    for step in range(STEPS):
        for i, p in enumerate(params):
            p.grad = torch.randn(p.shape, dtype=dtype)
            tensors[f"{case}.grad.{step}.{i}"] = p.grad.clone()
        opt.step()
        tensors.update({f"{case}.after.{step}.{i}": p.detach().clone() for i, p in enumerate(params)})


add_case("adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), torch.float64)
add_case("adamw_f32", lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), torch.float32)
add_case("sgd", lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=0.1), torch.float64)

write_safetensors(OUT, tensors, {"torch": torch.__version__})
print(f"wrote {len(tensors)} tensors, {OUT.stat().st_size} bytes, to {OUT}")

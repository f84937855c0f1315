"""Checkpoint interoperability with PyTorch, both ways, on a Linear(4, 3) layer.

Run from the repository root with Debian's Python, which has PyTorch.

PyTorch -> gatedgrad (the fixture that tests/test_checkpoint.cpp loads):

    /usr/bin/python3 tests/reference/check_checkpoint.py make

writes tests/reference/torch_linear.safetensors: a float32 torch.nn.Linear(4, 3)'s
"weight" (3, 4) and "bias" (3), an "input" (2, 4) and torch's "output" (2, 3).

gatedgrad -> PyTorch (by hand; the C++ tests cannot call Python):

    GG_CHECKPOINT_FOR_TORCH=/tmp/gg_linear.safetensors \\
        ./build/tests/test_checkpoint --test-case='checkpoint: a file for PyTorch*'
    /usr/bin/python3 tests/reference/check_checkpoint.py check /tmp/gg_linear.safetensors

The test saves a gatedgrad nn::Linear(4, 3) with an "input" and gatedgrad's "output" as
extra tensors; `check` prints every tensor and the metadata, loads weight and bias into
a torch.nn.Linear with load_state_dict, and exits non-zero unless torch's output on the
input matches gatedgrad's.
"""
import pathlib
import sys

import torch

from safetensors_by_hand import read_safetensors, write_safetensors

FIXTURE = pathlib.Path(__file__).with_name("torch_linear.safetensors")
TOLERANCE = 1e-5  # float32, a dot product of 4 terms plus a bias


def make():
    torch.manual_seed(0)
    linear = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with torch.no_grad():
        y = linear(x)
    write_safetensors(FIXTURE, {**linear.state_dict(), "input": x, "output": y}, {"torch": torch.__version__})
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes)")


def check(path):
    tensors, metadata = read_safetensors(path)
    print(f"metadata: {metadata}")
    for name, t in tensors.items():
        print(f"{name}: {t.dtype} {tuple(t.shape)}\n{t}")
    out_features, in_features = tensors["weight"].shape
    linear = torch.nn.Linear(in_features, out_features, dtype=tensors["weight"].dtype)
    linear.load_state_dict({"weight": tensors["weight"], "bias": tensors["bias"]})
    with torch.no_grad():
        y = linear(tensors["input"])
    diff = (y - tensors["output"]).abs().max().item()
    print(f"max |torch - gatedgrad| on the output: {diff:.3g}")
    return 0 if diff <= TOLERANCE else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["make"]:
        make()
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    else:
        sys.exit(__doc__)

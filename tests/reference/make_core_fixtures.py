"""PyTorch reference values for the core ops, checked by tests/test_reference.cpp.

Run from the repository root with Debian's Python, which has PyTorch:

    /usr/bin/python3 tests/reference/make_core_fixtures.py

It writes tests/reference/core.safetensors. Each case <case> stores its inputs as
<case>.<input>, the output as <case>.out, the upstream gradient as <case>.grad_out
(absent when the output is a scalar: then backward() starts from 1) and the gradient
of every floating input as <case>.grad.<input>. The safetensors file is written by
hand (there is no safetensors package here): an 8-byte little-endian header length,
a JSON header padded with spaces to a multiple of 8, then the raw data.
"""
import json
import pathlib
import struct

import torch
import torch.nn.functional as F

OUT = pathlib.Path(__file__).with_name("core.safetensors")
# safetensors dtype and the little-endian numpy type of its bytes.
FORMATS = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"), torch.int64: ("I64", "<i8")}

torch.manual_seed(0)
tensors = {}


def add_case(case, fn, **inputs):
    """Runs fn on the inputs, in order, forwards and backwards and stores everything."""
    leaves = {k: v.clone().requires_grad_(v.is_floating_point()) for k, v in inputs.items()}
    out = fn(*leaves.values())
    tensors.update({f"{case}.{k}": v for k, v in inputs.items()})
    tensors[f"{case}.out"] = out.detach()
    if out.dim() == 0:
        out.backward()
    else:
        grad_out = torch.randn(out.shape, dtype=out.dtype)
        tensors[f"{case}.grad_out"] = grad_out
        out.backward(grad_out)
    tensors.update({f"{case}.grad.{k}": v.grad for k, v in leaves.items() if v.requires_grad})


def randn(*shape, dtype=torch.float64):
    return torch.randn(shape, dtype=dtype)


for dtype, tag in [(torch.float32, "f32"), (torch.float64, "f64")]:
    add_case(f"matmul_2d_{tag}", torch.matmul, a=randn(3, 4, dtype=dtype), b=randn(4, 5, dtype=dtype))
    # Batch dims (2, 1) and (3,) broadcast to (2, 3).
    add_case(f"matmul_batched_{tag}", torch.matmul, a=randn(2, 1, 3, 4, dtype=dtype), b=randn(3, 4, 5, dtype=dtype))
# A batch of matrices times one shared weight, as a linear layer does.
add_case("matmul_shared_weight_f64", torch.matmul, a=randn(2, 3, 4), b=randn(4, 5))

for dim in (-1, 0):
    add_case(f"softmax_dim{dim}", lambda x: torch.softmax(x, dim), x=randn(3, 5))
    add_case(f"log_softmax_dim{dim}", lambda x: torch.log_softmax(x, dim), x=randn(3, 5))

# Logits (2, 3, V=5) and targets (2, 3); torch wants the class dim second, so flatten.
targets = torch.randint(0, 5, (2, 3))
targets[0, 1] = targets[1, 2] = -100
add_case("cross_entropy", lambda logits, targets: F.cross_entropy(logits.reshape(-1, 5), targets.reshape(-1)),
         logits=randn(2, 3, 5), targets=targets)

add_case("broadcast_expression", lambda a, b, c: (a * b + c).sigmoid() / (1 + a.exp()),
         a=randn(4, 1, 3), b=randn(5, 1), c=randn(3))

add_case("gelu", F.gelu, x=randn(2, 5))
add_case("silu", F.silu, x=randn(2, 5))
add_case("rsqrt", torch.rsqrt, x=randn(2, 5).abs() + 0.1)


def write_safetensors(path, named):
    header, blobs, offset = {"__metadata__": {"torch": torch.__version__}}, [], 0
    for name, t in named.items():
        dtype, numpy_type = FORMATS[t.dtype]
        data = t.detach().numpy().astype(numpy_type).tobytes()  # row-major
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data then starts 8-byte aligned
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


write_safetensors(OUT, tensors)
print(f"wrote {len(tensors)} tensors, {OUT.stat().st_size} bytes, to {OUT}")

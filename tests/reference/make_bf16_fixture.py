"""bfloat16 safetensors interoperability with PyTorch, both ways.

Run from the repository root with Debian's Python, which has PyTorch (and no `safetensors`
package, so safetensors_by_hand.py writes the format).

PyTorch -> gatedgrad (the fixture tests/test_bf16.cpp loads):

    /usr/bin/python3 tests/reference/make_bf16_fixture.py make

writes tests/reference/torch_bf16.safetensors: "x", a (3, 4) torch.bfloat16 tensor that
PyTorch rounded from float32 (ties, a carry into the exponent, a tiny and a huge value,
signed zero and infinity among them), and "x_as_f32", the same values widened to float32.

gatedgrad -> PyTorch (meson's test `bf16_torch` runs this):

    /usr/bin/python3 tests/reference/make_bf16_fixture.py check build/tests/test_bf16

runs test_bf16's case "safetensors: a bfloat16 file for PyTorch" with GG_BF16_FOR_TORCH set
to a temporary path, loads the file it writes, and exits non-zero unless torch reads "y" as
torch.bfloat16 with the bits of torch's own rounding of "y_as_f32" to bfloat16.
"""
import os
import pathlib
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:  # meson reads 77 as "skipped": this Python has no PyTorch
    sys.exit(77)

from safetensors_by_hand import read_safetensors, write_safetensors

FIXTURE = pathlib.Path(__file__).with_name("torch_bf16.safetensors")
VALUES = [1.0, 1.00390625, 1.01171875, 1.9999999, -3.1415926, 0.1, 257.0, 259.0,
          1e-38, 3e38, -0.0, float("inf")]


def make():
    x32 = torch.tensor(VALUES, dtype=torch.float32).reshape(3, 4)
    x = x32.to(torch.bfloat16)
    write_safetensors(FIXTURE, {"x": x, "x_as_f32": x.to(torch.float32)}, {"torch": torch.__version__})
    print(f"wrote {FIXTURE}:\n{x}")


def check(test_binary):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gg_bf16.safetensors")
        subprocess.run([test_binary, "--test-case=safetensors: a bfloat16 file for PyTorch"],
                       env={**os.environ, "GG_BF16_FOR_TORCH": path}, check=True, stdout=subprocess.DEVNULL)
        tensors, metadata = read_safetensors(path)
    y, y32 = tensors["y"], tensors["y_as_f32"]
    print(f"y = {y}\nmetadata = {metadata}")
    if y.dtype != torch.bfloat16:
        sys.exit(f"y is {y.dtype}, not torch.bfloat16")
    expected = y32.to(torch.bfloat16)  # torch's own rounding of gatedgrad's float32 values
    same = torch.equal(y.view(torch.int16), expected.view(torch.int16))
    if not same:
        sys.exit(f"gatedgrad's bfloat16 bits differ from torch's rounding:\n{y}\nvs\n{expected}")
    print("gatedgrad's bfloat16 file opens in PyTorch with torch's rounding, bit for bit")


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "make":
        make()
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    else:
        sys.exit(__doc__)

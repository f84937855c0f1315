"""Reading and writing safetensors files with only NumPy and PyTorch.

Debian has no `safetensors` Python package, and the format is simple enough to do by
hand: an 8-byte little-endian header length N, N bytes of JSON
{name: {"dtype": "F64", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}
padded with spaces so the data starts 8-byte aligned, then the raw row-major data, with
offsets counted from the start of the data.
"""
import json
import pathlib
import struct

import numpy as np
import torch

# safetensors dtype and the little-endian NumPy type of its bytes. NumPy has no bfloat16:
# its 16 bits travel as an int16 and are viewed as torch.bfloat16 again.
FORMATS = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"), torch.int64: ("I64", "<i8"),
           torch.bfloat16: ("BF16", "<i2")}
NUMPY_TYPES = dict(FORMATS.values())


def write_safetensors(path, named, metadata=None):
    """Writes {name: torch.Tensor} (in dict order) and string metadata to `path`."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in named.items():
        dtype, numpy_type = FORMATS[t.dtype]
        t = t.detach().contiguous()
        data = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().astype(numpy_type).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    """Returns ({name: torch.Tensor}, metadata) from `path`."""
    raw = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=NUMPY_TYPES[info["dtype"]]).reshape(info["shape"])
        tensors[name] = torch.from_numpy(array.copy())
        if info["dtype"] == "BF16":
            tensors[name] = tensors[name].view(torch.bfloat16)
    return tensors, metadata

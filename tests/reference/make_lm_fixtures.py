"""PyTorch reference values for the whole language model, checked by tests/test_lm_reference.cpp.

Run from the repository root with Debian's Python, which has PyTorch:

    /usr/bin/python3 tests/reference/make_lm_fixtures.py

The model is gatedgrad's GatedTransformerLM written again, independently, in plain
PyTorch (torch_lm.py), here in float64.

It writes two fixtures, tests/reference/lm_g1.safetensors and lm_baseline.safetensors.
Each holds every parameter under gatedgrad's name ("layers.0.attn.w_q.weight"), the
batch as "ids" and "targets" (int64, (B, T)), the loss as "loss" (a scalar), the
gradient of the loss for each parameter as "grad.<name>", and in the metadata, under
"config", the model's configuration in the JSON that LMConfig::from_json reads.
"""
import json
import math
import pathlib

import torch

from safetensors_by_hand import write_safetensors
from torch_lm import LM

HERE = pathlib.Path(__file__).parent
torch.set_default_dtype(torch.float64)


def randomise(model):
    """Random values everywhere, so that no gradient is trivially zero or symmetric: norm
    weights near 1 (not exactly 1), gate weights N(0, 0.3²) (not gatedgrad's zero init)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape))
            elif name == "tok_emb.weight":
                p.copy_(torch.randn(p.shape))
            elif ".w_g." in name:
                p.copy_(0.3 * torch.randn(p.shape))
            else:
                fan_in = p.shape[1]
                p.copy_((2 * torch.rand(p.shape) - 1) / math.sqrt(fan_in))


def make_fixture(path, cfg, B=2, T=12):
    model = LM(cfg)
    randomise(model)
    ids = torch.randint(cfg["vocab_size"], (B, T))
    targets = torch.randint(cfg["vocab_size"], (B, T))
    loss = model(ids, targets)
    loss.backward()
    tensors = {name: p.detach() for name, p in model.named_parameters()}
    tensors.update(ids=ids, targets=targets, loss=loss.detach())
    tensors.update({f"grad.{name}": p.grad for name, p in model.named_parameters()})
    write_safetensors(path, tensors, {"config": json.dumps(cfg)})
    print(f"{path.name}: loss {loss.item():.17g}, {sum(p.numel() for p in model.parameters())} parameters, "
          f"{path.stat().st_size} bytes")


# The baseline, with every field LMConfig::to_json writes. This reference models only what
# LM checks for: RoPE, no window, SwiGLU (no MoE), an untied head, no gate or G1 sigmoid.
COMMON = dict(vocab_size=40, max_len=16, d_model=32, n_layers=2, n_heads=4, n_kv_heads=4, gate="baseline",
              gate_fn="sigmoid", gate_sharing="elementwise", gate_init="normal", gate_init_std=0.3, qk_norm=False,
              window=0, positions="rope", rope_base=10000.0, ffn=True, d_ff=88, n_experts=0, top_k=2,
              aux_loss_weight=0.01, tie_embeddings=False, norm_eps=1e-6)

torch.manual_seed(0)
make_fixture(HERE / "lm_g1.safetensors", dict(COMMON, n_kv_heads=2, gate="g1", qk_norm=True))
make_fixture(HERE / "lm_baseline.safetensors", COMMON)

"""A float64 reference for the Gated DeltaNet layer of Qwen3-Next and Qwen3.5 (Yang, Kautz and
Hatamizadeh 2024, arXiv 2412.06464), against which tests/test_gated_deltanet.cpp checks
nn/gated_deltanet.h. Written from the paper's recurrence and the public equations of transformers'
Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet, in their parameter names, independently of
gatedgrad: one token at a time, the state the paper's way round (dv, dk).

Run from the repository root with Debian's Python, which has PyTorch:

    /usr/bin/python3 tests/reference/gated_deltanet.py make    # writes gated_deltanet.safetensors
    /usr/bin/python3 tests/reference/gated_deltanet.py check   # meson's test deltanet_reference

`check` recomputes y and the state from the fixture's x and weights with the equations below and
exits non-zero unless they are the fixture's: an edit of this file that changes what it computes
fails `check` until the fixture is made again, and then fails the C++ test against the layer.

The layer, x (B, T, d), Hk key heads of dk, Hv value heads of dv, r = Hv / Hk:

    q, k, v = SiLU(conv1d(in_proj_qkv(x)))     depthwise, causal: kernel K, K − 1 zeros in front
    q = l2norm(q) / √dk, k = l2norm(k)         l2norm(x) = x / √(Σ x² + 1e-6), per key head
    key head i serves value heads i·r … i·r + r − 1
    β = σ(in_proj_b(x)),  g = −exp(A_log) · softplus(in_proj_a(x) + dt_bias)
    S_t = S_{t−1} e^{g_t} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,   S_0 = 0      (dv, dk) per value head
    o_t = S_t q_t
    y = out_proj(RMSNorm(o) · norm.weight · SiLU(in_proj_z(x)))             RMSNorm over dv, eps

Qwen3.5 stores the projections as above. Qwen3-Next joins them per key head: in_proj_qkvz has Hk
groups of rows [q_i | k_i | v of its r value heads | z of them], in_proj_ba Hk groups of
[b of its r value heads | a of them]. The fixture holds the same weights in both layouts (the
names differ, so one file holds both; conv1d, dt_bias, A_log, norm and out_proj are shared) and x
(B, T, d), all float32 values stored as float32 (the file is half the size; everything is computed
in float64), y (B, T, d) and state (B, Hv, dk, dv) (S after the last token, in transformers' (dk,
dv) orientation) in float64, and the sizes in the metadata under "config", with transformers'
config names.
"""
import json
import math
import pathlib
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # meson reads 77 as "skipped": this Python has no PyTorch
    sys.exit(77)

from safetensors_by_hand import read_safetensors, write_safetensors

FIXTURE = pathlib.Path(__file__).with_name("gated_deltanet.safetensors")
torch.set_default_dtype(torch.float64)

# Small enough for a fixture of a few KB, with Hv = 2 Hk (a key head serves two value heads),
# dk ≠ dv, and T = 11: two full chunks of 4 and a partial one in the C++ test.
CONFIG = dict(hidden_size=8, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=4,
              linear_value_head_dim=3, linear_conv_kernel_dim=3, rms_norm_eps=1e-6)
QWEN3_5 = ("in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight")
QWEN3_NEXT = ("in_proj_qkvz.weight", "in_proj_ba.weight")
SHARED = ("conv1d.weight", "dt_bias", "A_log", "norm.weight", "out_proj.weight")


def random_weights(c, gen):
    """Qwen3.5-layout weights with every value away from a special one."""
    d, Hk, Hv = c["hidden_size"], c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, K = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    channels = 2 * Hk * dk + Hv * dv

    def uniform(shape, bound):
        return (2 * torch.rand(shape, generator=gen) - 1) * bound

    return {
        "in_proj_qkv.weight": uniform((channels, d), 1 / math.sqrt(d)),
        "in_proj_z.weight": uniform((Hv * dv, d), 1 / math.sqrt(d)),
        "in_proj_b.weight": uniform((Hv, d), 1 / math.sqrt(d)),
        "in_proj_a.weight": uniform((Hv, d), 1 / math.sqrt(d)),
        "conv1d.weight": uniform((channels, 1, K), 1 / math.sqrt(K)),
        "dt_bias": uniform((Hv,), 1.0),
        "A_log": torch.log(0.1 + 2 * torch.rand((Hv,), generator=gen)),
        "norm.weight": 1 + 0.2 * torch.randn((dv,), generator=gen),
        "out_proj.weight": uniform((d, Hv * dv), 1 / math.sqrt(Hv * dv)),
    }


def qwen3_next_projections(w, c):
    """in_proj_qkvz and in_proj_ba: the Qwen3.5 projections of `w` joined per key head."""
    Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, r = c["linear_key_head_dim"], c["linear_value_head_dim"], Hv // Hk
    qkv = w["in_proj_qkv.weight"]
    q, k, v = qkv[:Hk * dk], qkv[Hk * dk:2 * Hk * dk], qkv[2 * Hk * dk:]
    z, b, a = w["in_proj_z.weight"], w["in_proj_b.weight"], w["in_proj_a.weight"]
    qkvz, ba = [], []
    for i in range(Hk):
        heads = slice(i * r * dv, (i + 1) * r * dv)
        qkvz += [q[i * dk:(i + 1) * dk], k[i * dk:(i + 1) * dk], v[heads], z[heads]]
        ba += [b[i * r:(i + 1) * r], a[i * r:(i + 1) * r]]
    return {"in_proj_qkvz.weight": torch.cat(qkvz), "in_proj_ba.weight": torch.cat(ba)}


def projections(w, layout, x, c):
    """q, k, v (B, T, H·dim), z (B, T, Hv, dv), b, a (B, T, Hv) from the layout's weights in w."""
    B, T, _ = x.shape
    Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, r = c["linear_key_head_dim"], c["linear_value_head_dim"], Hv // Hk
    if layout == "qwen3_5":
        q, k, v = torch.split(x @ w["in_proj_qkv.weight"].T, [Hk * dk, Hk * dk, Hv * dv], dim=-1)
        return q, k, v, (x @ w["in_proj_z.weight"].T).view(B, T, Hv, dv), x @ w["in_proj_b.weight"].T, \
            x @ w["in_proj_a.weight"].T
    groups = (x @ w["in_proj_qkvz.weight"].T).view(B, T, Hk, 2 * dk + 2 * r * dv)
    q, k, v, z = torch.split(groups, [dk, dk, r * dv, r * dv], dim=-1)
    b, a = torch.split((x @ w["in_proj_ba.weight"].T).view(B, T, Hk, 2 * r), [r, r], dim=-1)
    return (q.reshape(B, T, -1), k.reshape(B, T, -1), v.reshape(B, T, -1), z.reshape(B, T, Hv, dv),
            b.reshape(B, T, Hv), a.reshape(B, T, Hv))


def layer(w, layout, x, c):
    """y (B, T, d) and the final state (B, Hv, dk, dv) of the layer on x (B, T, d)."""
    B, T, _ = x.shape
    Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, K, r = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"], Hv // Hk
    q, k, v, z, b, a = projections(w, layout, x, c)
    qkv = torch.cat([q, k, v], dim=-1).transpose(1, 2)  # (B, channels, T)
    qkv = F.silu(F.conv1d(qkv, w["conv1d.weight"], padding=K - 1, groups=qkv.shape[1])[..., :T]).transpose(1, 2)
    q, k, v = torch.split(qkv, [Hk * dk, Hk * dk, Hv * dv], dim=-1)

    def l2norm(t):
        return t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)

    q = l2norm(q.reshape(B, T, Hk, dk)) / math.sqrt(dk)
    k = l2norm(k.reshape(B, T, Hk, dk))
    v = v.reshape(B, T, Hv, dv)
    beta = torch.sigmoid(b)
    g = -torch.exp(w["A_log"]) * F.softplus(a + w["dt_bias"])
    o = torch.zeros(B, T, Hv, dv)
    S = torch.zeros(B, Hv, dv, dk)
    eye = torch.eye(dk)
    for t in range(T):
        for h in range(Hv):
            kt, qt = k[:, t, h // r], q[:, t, h // r]  # (B, dk)
            decay, bt = torch.exp(g[:, t, h]), beta[:, t, h]
            forget = eye - bt[:, None, None] * kt[:, :, None] * kt[:, None, :]  # (B, dk, dk)
            S[:, h] = decay[:, None, None] * S[:, h] @ forget + bt[:, None, None] * v[:, t, h, :, None] * kt[:, None, :]
            o[:, t, h] = (S[:, h] @ qt[:, :, None])[..., 0]
    normed = o / torch.sqrt(o.pow(2).mean(-1, keepdim=True) + c["rms_norm_eps"]) * w["norm.weight"]
    y = (normed * F.silu(z)).reshape(B, T, Hv * dv) @ w["out_proj.weight"].T
    return y, S.transpose(-1, -2).contiguous()


def memory_form_agrees():
    """The recurrence of `layer` against the delta rule written as memory: read the value the
    decayed state holds for k, move it a fraction β towards v (the form transformers' code uses)."""
    gen = torch.Generator().manual_seed(1)
    dk, dv, T = 5, 3, 9
    k = F.normalize(torch.randn(T, dk, generator=gen), dim=-1)
    v, q = torch.randn(T, dv, generator=gen), torch.randn(T, dk, generator=gen)
    g, beta = -torch.rand(T, generator=gen), torch.rand(T, generator=gen)
    S_paper, S_memory = torch.zeros(dv, dk), torch.zeros(dk, dv)
    for t in range(T):
        S_paper = torch.exp(g[t]) * S_paper @ (torch.eye(dk) - beta[t] * torch.outer(k[t], k[t])) + \
            beta[t] * torch.outer(v[t], k[t])
        S_memory = S_memory * torch.exp(g[t])
        S_memory = S_memory + torch.outer(k[t], beta[t] * (v[t] - S_memory.T @ k[t]))
        if not torch.allclose(S_paper @ q[t], S_memory.T @ q[t], atol=1e-13):
            sys.exit(f"the paper's recurrence and the memory form differ at token {t}")


def make():
    memory_form_agrees()
    gen = torch.Generator().manual_seed(0)
    w = random_weights(CONFIG, gen)
    w.update(qwen3_next_projections(w, CONFIG))
    x = torch.randn((2, 11, CONFIG["hidden_size"]), generator=gen)
    inputs = {name: t.float() for name, t in {"x": x, **w}.items()}  # float32 values, read in float64
    x, w = inputs["x"].double(), {name: t.double() for name, t in inputs.items() if name != "x"}
    y, state = layer(w, "qwen3_5", x, CONFIG)
    y_next, state_next = layer(w, "qwen3_next", x, CONFIG)
    assert torch.equal(y, y_next) and torch.equal(state, state_next), "the two layouts disagree"
    write_safetensors(FIXTURE, {**inputs, "y": y, "state": state}, {"config": json.dumps(CONFIG)})
    print(f"{FIXTURE.name}: |y| max {y.abs().max().item():.3f}, {FIXTURE.stat().st_size} bytes")


def check():
    memory_form_agrees()
    tensors, metadata = read_safetensors(FIXTURE)
    tensors = {name: t.double() for name, t in tensors.items()}
    config = json.loads(metadata["config"])
    if config != CONFIG:
        sys.exit(f"the fixture's config {config} is not this file's {CONFIG}: make it again")
    for layout in ("qwen3_5", "qwen3_next"):
        y, state = layer(tensors, layout, tensors["x"], config)
        for name, ours in (("y", y), ("state", state)):
            diff = (ours - tensors[name]).abs().max().item()
            print(f"{layout}: {name} differs from the fixture's by {diff:.2e}")
            if not diff < 1e-13:
                sys.exit(f"{layout}: the equations here no longer give the fixture's {name}: make it again")
    print("the fixture is what these equations compute, in both layouts")


if __name__ == "__main__":
    commands = {"make": make, "check": check}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]]()

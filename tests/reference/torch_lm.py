"""gatedgrad's GatedTransformerLM (nn/transformer.h) written again, independently, in plain
PyTorch. Used by make_lm_fixtures.py (reference values, float64) and by
bench/train_step_torch.py (the speed peer, float32).

    x = tok_emb[ids]                                              (B, T, d)
    per layer:  h = x + Attn(RMSNorm1(x));  x = h + SwiGLU(RMSNorm2(h))
    logits = lm_head(RMSNorm_f(x));  loss = mean cross-entropy    (B, T, V)

    Attn(x):  q, k, v = x W_qᵀ, x W_kᵀ, x W_vᵀ split into heads     (B, H|Hkv, T, dk)
              q, k ← RMSNorm over dk (qk_norm), then RoPE
              head_h = softmax(q_h k_{h // (H/Hkv)}ᵀ / √dk + causal mask) v_{h // (H/Hkv)}
              G1: head_h ← head_h ⊙ σ(x W_gᵀ)_h                     (the gate reads Attn's input)
              y = Concat(heads) W_oᵀ
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """y = x / √(mean(x²) + ε) ⊙ w over the last dim."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, base):
    """Rotates channel pair (c, c + D/2) of each position m by m·θ_c, θ_c = base^(−2c/D).
    x (B, H, T, D) → (B, H, T, D)."""
    T, D = x.shape[-2], x.shape[-1]
    theta = base ** (-2 * torch.arange(D // 2, device=x.device) / D)  # (D/2,)
    angle = torch.arange(T, device=x.device)[:, None] * theta[None, :]  # (T, D/2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.H, self.Hkv = cfg["d_model"], cfg["n_heads"], cfg["n_kv_heads"]
        self.dk = d // self.H
        self.rope_base = cfg["rope_base"]
        self.gated = cfg["gate"] == "g1"
        self.w_q = nn.Linear(d, self.H * self.dk, bias=False)
        self.w_k = nn.Linear(d, self.Hkv * self.dk, bias=False)
        self.w_v = nn.Linear(d, self.Hkv * self.dk, bias=False)
        self.w_o = nn.Linear(self.H * self.dk, d, bias=False)
        self.q_norm = RMSNorm(self.dk, cfg["norm_eps"]) if cfg["qk_norm"] else None
        self.k_norm = RMSNorm(self.dk, cfg["norm_eps"]) if cfg["qk_norm"] else None
        self.w_g = nn.Linear(d, self.H * self.dk, bias=False) if self.gated else None

    def split_heads(self, x, heads):
        B, T, _ = x.shape
        return x.view(B, T, heads, self.dk).transpose(1, 2)          # (B, heads, T, dk)

    def forward(self, x):                                            # x (B, T, d)
        B, T, _ = x.shape
        q = self.split_heads(self.w_q(x), self.H)                    # (B, H, T, dk)
        k = self.split_heads(self.w_k(x), self.Hkv)                  # (B, Hkv, T, dk)
        v = self.split_heads(self.w_v(x), self.Hkv)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = rope(q, self.rope_base), rope(k, self.rope_base)
        # GQA: query head h reads kv head h // (H / Hkv).
        group = self.H // self.Hkv
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, T, dk)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)       # (B, H, T, T)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        heads = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v  # (B, H, T, dk)
        if self.gated:
            gate = torch.sigmoid(self.w_g(x)).view(B, T, self.H, self.dk).transpose(1, 2)
            heads = heads * gate                                     # G1, element-wise
        return self.w_o(heads.transpose(1, 2).reshape(B, T, self.H * self.dk))


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(d, hidden, bias=False)
        self.w3 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w3(F.silu(self.w1(x)) * self.w2(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1 = RMSNorm(cfg["d_model"], cfg["norm_eps"])
        self.attn = Attention(cfg)
        self.norm2 = RMSNorm(cfg["d_model"], cfg["norm_eps"])
        self.ffn = SwiGLU(cfg["d_model"], cfg["d_ff"])

    def forward(self, x):
        h = x + self.attn(self.norm1(x))
        return h + self.ffn(self.norm2(h))


class LM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg["positions"] == "rope" and cfg["window"] == 0 and cfg["ffn"] and cfg["n_experts"] == 0
        assert not cfg["tie_embeddings"] and cfg["gate"] in ("baseline", "g1") and cfg["gate_fn"] == "sigmoid"
        assert cfg["gate_sharing"] == "elementwise"
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layers"]))
        self.norm_f = RMSNorm(cfg["d_model"], cfg["norm_eps"])
        self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)

    def forward(self, ids, targets):                                 # ids, targets (B, T)
        x = self.tok_emb(ids)                                        # (B, T, d)
        for block in self.layers:
            x = block(x)
        logits = self.lm_head(self.norm_f(x))                        # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

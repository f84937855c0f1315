"""A float64 reference for Hugging Face Qwen3 checkpoints, with or without the attention-output
gate of Gated Attention (arXiv:2505.06708, the paper's G1; docs/paper.md), against which
gg::nn::hf::load_folder is checked. Written from the equations of transformers' Qwen3 decoder and of the
paper authors' gated version of it, independently of gatedgrad's model.

Run from the repository root with Debian's Python, which has PyTorch (and neither
`transformers` nor `safetensors`: safetensors_by_hand.py reads and writes the files):

    /usr/bin/python3 tests/reference/hf_qwen3.py make OUT_DIR [--gate none|headwise|elementwise]
        [--gate-layout grouped|interleaved] [--hidden 32] [--heads 4] [--kv-heads 2] [--head-dim 16]
        [--layers 2] [--ffn 48] [--vocab 300] [--tied] [--dtype f32|bf16] [--shards 1]
        [--rope-theta 1e6] [--eps 1e-6] [--seed 0] [--batch 2] [--seq 12] [--no-qk-norm] [--no-reference]
        [--context 4096] [--tokenizer MERGES]
    /usr/bin/python3 tests/reference/hf_qwen3.py forward DIR OUT.safetensors
        [--batch 2] [--seq 12] [--seed 0] [--ids IDS.safetensors]
    /usr/bin/python3 tests/reference/hf_qwen3.py selftest

`make` writes a random checkpoint in Hugging Face's layout into OUT_DIR (config.json, and
model.safetensors or, with --shards N > 1, model-0000i-of-0000N.safetensors and
model.safetensors.index.json; with --tokenizer, a Qwen3-shaped tokenizer.json whose ids stop short of
the model's rows), then reads it back and writes OUT_DIR/reference.safetensors as
`forward` does; --no-reference stops after the checkpoint (a real-size model's float64 forward
would not fit in memory: bench/hf_forward.sh writes Qwen3-1.7B's shape so). `forward` reads any
such DIR (one that gatedgrad or transformers wrote) and writes, computed in float64 from the
weights as stored (bfloat16 widened exactly):

    input_ids  I64 (B, T)           random tokens (--seed), or those of --ids
    logits     F64 (B, T, V)
    probs.L    F64 (B, H, T, T)     layer L's attention probabilities
    hidden.L   F64 (B, T, C)        the residual stream after block L
    gate.L     F64 (B, H, T, 1|D)   layer L's σ(gate), gated models only
    loss       F64 ()               mean cross-entropy of logits[:, :-1] against input_ids[:, 1:]

`selftest` checks this file against a second implementation of the same equations in float32
written another way (loops, index arithmetic, complex RoPE), and checks the gate's layouts.

The model, x (B, T, C), per layer:

    h = x + o_proj(Attn(input_layernorm(x)))
    x = h + down_proj(silu(gate_proj(n)) ⊙ up_proj(n)),   n = post_attention_layernorm(h)
    logits = lm_head(norm(x))        lm_head = embed_tokens when tie_word_embeddings
    RMSNorm(x) = w ⊙ x / √(mean(x², -1) + ε)

    Attn(a): q, k, v = q_proj(a), k_proj(a), v_proj(a) as heads     (B, H|Hkv, T, D)
             q, k ← q_norm(q), k_norm(k)   (RMSNorm over D, before RoPE; use_qk_norm)
             RoPE pairs channel c with c + D/2, angle t·θ^(−2c/D)
             head_h = softmax(q_h k_{h // G}ᵀ / √D + causal mask) v_{h // G},   G = H / Hkv
             G1: head_h ← head_h ⊙ σ(gate_h)   (gate_h: 1 value per head, or D)
             y = o_proj(Concat(heads))

The gate is folded into q_proj, which has H·(D + W) rows, W = 1 (headwise_attn_output_gate)
or D (elementwise_attn_output_gate). Two orders of those rows exist:
    grouped      (the paper authors' code) per KV group: its G heads' queries, then their G gates
    interleaved  (transformers' Qwen3-Next) per head: its query, then its gate
config.json says "gatedgrad_gate_layout": "interleaved" for the second; without it, grouped.
"""
import argparse
import collections
import dataclasses
import json
import math
import pathlib
import sys
import tempfile
import unicodedata

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:  # meson reads 77 as "skipped": this Python has no PyTorch or NumPy
    sys.exit(77)

from safetensors_by_hand import read_safetensors, write_safetensors

STORED = {"f32": (torch.float32, "float32"), "bf16": (torch.bfloat16, "bfloat16")}


class CheckpointError(Exception):
    """A DIR this reference cannot read, with the reason."""


@dataclasses.dataclass
class Config:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    ffn: int
    vocab: int
    eps: float
    rope_theta: float
    tied: bool
    qk_norm: bool
    gate: str          # none | headwise | elementwise
    gate_layout: str   # grouped | interleaved
    context: int = 4096  # max_position_embeddings

    @property
    def gate_width(self):
        """W: gate values per head."""
        return {"none": 0, "headwise": 1, "elementwise": self.head_dim}[self.gate]

    @property
    def group(self):
        """G: query heads per KV head."""
        return self.heads // self.kv_heads

    def validate(self):
        if min(self.hidden, self.heads, self.kv_heads, self.head_dim, self.layers, self.ffn, self.vocab) < 1:
            raise CheckpointError(f"every size must be positive: {self}")
        if self.heads % self.kv_heads:
            raise CheckpointError(f"{self.heads} heads do not split into groups of {self.kv_heads} KV heads")
        if self.head_dim % 2:
            raise CheckpointError(f"RoPE pairs channels: head_dim {self.head_dim} must be even")
        return self

    @staticmethod
    def from_hf(c):
        """The Config of a Hugging Face config.json (dict), with transformers' defaults."""
        if c.get("model_type") != "qwen3":
            raise CheckpointError(f"model_type is {c.get('model_type')!r}, not 'qwen3'")
        if c.get("hidden_act", "silu") != "silu":
            raise CheckpointError(f"hidden_act {c['hidden_act']!r}: only silu is written here")
        if c.get("attention_bias", False):
            raise CheckpointError("attention_bias is true: this reference has no biases")
        if c.get("use_sliding_window", False) or any(t != "full_attention" for t in c.get("layer_types") or []):
            raise CheckpointError("sliding-window layers are not written here")
        # transformers 4 keeps rope_theta at the top; 5 moves it into rope_parameters.
        rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise CheckpointError(f"RoPE scaling {rope} is not written here")
        headwise, elementwise = c.get("headwise_attn_output_gate", False), c.get("elementwise_attn_output_gate", False)
        if headwise and elementwise:
            raise CheckpointError("both headwise_attn_output_gate and elementwise_attn_output_gate are true")
        layout = c.get("gatedgrad_gate_layout", "grouped")
        if layout not in ("grouped", "interleaved"):
            raise CheckpointError(f"gatedgrad_gate_layout {layout!r}: grouped or interleaved")
        try:
            heads = c["num_attention_heads"]
            return Config(hidden=c["hidden_size"], heads=heads, kv_heads=c.get("num_key_value_heads") or heads,
                          head_dim=c.get("head_dim") or c["hidden_size"] // heads, layers=c["num_hidden_layers"],
                          ffn=c["intermediate_size"], vocab=c["vocab_size"], eps=c.get("rms_norm_eps", 1e-6),
                          rope_theta=c.get("rope_theta") or rope.get("rope_theta", 10000.0),
                          tied=c.get("tie_word_embeddings", False), qk_norm=c.get("use_qk_norm", True),
                          gate="headwise" if headwise else "elementwise" if elementwise else "none",
                          gate_layout=layout, context=c.get("max_position_embeddings", 4096)).validate()
        except KeyError as e:
            raise CheckpointError(f"config.json has no {e}") from None

    def to_hf(self, torch_dtype):
        """config.json as a Qwen3 checkpoint's, with the paper authors' gate flags when gated."""
        c = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": self.hidden,
             "intermediate_size": self.ffn, "num_hidden_layers": self.layers, "num_attention_heads": self.heads,
             "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim, "vocab_size": self.vocab,
             "rms_norm_eps": self.eps, "rope_theta": self.rope_theta, "rope_scaling": None,
             "max_position_embeddings": self.context, "tie_word_embeddings": self.tied, "torch_dtype": torch_dtype,
             "attention_bias": False, "attention_dropout": 0.0, "use_sliding_window": False,
             "sliding_window": None, "hidden_act": "silu", "initializer_range": 0.02, "use_cache": True}
        if self.gate != "none":
            c["headwise_attn_output_gate"] = self.gate == "headwise"
            c["elementwise_attn_output_gate"] = self.gate == "elementwise"
            if self.gate_layout == "interleaved":
                c["gatedgrad_gate_layout"] = "interleaved"
        if self.gate != "none" or not self.qk_norm:
            c["use_qk_norm"] = self.qk_norm
        return c


# ---- weights ------------------------------------------------------------------------------------

def weight_shapes(cfg):
    """{name: shape} of every tensor a checkpoint of `cfg` holds, in model order."""
    C, H, Hkv, D, W = cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.gate_width
    shapes = {"model.embed_tokens.weight": (cfg.vocab, C)}
    for l in range(cfg.layers):
        p = f"model.layers.{l}."
        shapes[p + "input_layernorm.weight"] = (C,)
        shapes[p + "self_attn.q_proj.weight"] = (H * (D + W), C)
        shapes[p + "self_attn.k_proj.weight"] = (Hkv * D, C)
        shapes[p + "self_attn.v_proj.weight"] = (Hkv * D, C)
        shapes[p + "self_attn.o_proj.weight"] = (C, H * D)
        if cfg.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = (D,)
            shapes[p + "self_attn.k_norm.weight"] = (D,)
        shapes[p + "post_attention_layernorm.weight"] = (C,)
        shapes[p + "mlp.gate_proj.weight"] = (cfg.ffn, C)
        shapes[p + "mlp.up_proj.weight"] = (cfg.ffn, C)
        shapes[p + "mlp.down_proj.weight"] = (C, cfg.ffn)
    shapes["model.norm.weight"] = (C,)
    if not cfg.tied:
        shapes["lm_head.weight"] = (cfg.vocab, C)
    return shapes


def random_weights(cfg, seed):
    """float32 weights at scales that make every part of the model matter: norm weights
    1 + N(0, 0.1²), not all 1, so that a norm read without its weight fails; q_proj and k_proj
    N(0, 0.3²), so that scores are O(1) and attention is far from uniform, and σ(gate) spreads
    over (0, 1); the other projections N(0, 1/fan_in), so that each block adds O(1) to the
    residual stream; embeddings N(0, 0.5²)."""
    g = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in weight_shapes(cfg).items():
        z = torch.randn(shape, generator=g)
        if name.endswith("norm.weight"):
            weights[name] = 1 + 0.1 * z
        elif name.endswith(("q_proj.weight", "k_proj.weight")):
            weights[name] = 0.3 * z
        elif name == "model.embed_tokens.weight":
            weights[name] = 0.5 * z
        else:
            weights[name] = z / math.sqrt(shape[1])
    return weights


def shard_names(count):
    return [f"model-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)]


def write_checkpoint(out, cfg, weights, dtype, shards):
    """config.json and the weights in `dtype` (torch rounds float32 to bfloat16 to nearest even),
    in one file or in `shards` with HF's index. Earlier weight files in `out` are removed, so that
    a loader cannot read a stale one."""
    torch_type, dtype_name = STORED[dtype]
    stored = {name: t.to(torch_type) for name, t in weights.items()}
    if not 1 <= shards <= len(stored):
        raise CheckpointError(f"--shards {shards}: between 1 and the {len(stored)} tensors")
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("model*.safetensors"), out / "model.safetensors.index.json"]:
        old.unlink(missing_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_hf(dtype_name), indent=2) + "\n")
    if shards == 1:
        write_safetensors(out / "model.safetensors", stored, {"format": "pt"})
        return
    weight_map = {}
    for file, names in zip(shard_names(shards), np.array_split(list(stored), shards)):
        names = [str(n) for n in names]
        write_safetensors(out / file, {n: stored[n] for n in names}, {"format": "pt"})
        weight_map.update((n, file) for n in names)
    total = sum(t.numel() * t.element_size() for t in stored.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def read_tensors(path):
    try:
        return read_safetensors(path)[0]
    except KeyError as e:  # safetensors_by_hand knows F32, F64, I64 and BF16
        raise CheckpointError(f"{path}: dtype {e} is not read here") from None
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None


def load_checkpoint(directory):
    """(Config, {name: float64 tensor}) from a Hugging Face checkpoint folder."""
    directory = pathlib.Path(directory)
    try:
        cfg = Config.from_hf(json.loads((directory / "config.json").read_text()))
    except FileNotFoundError:
        raise CheckpointError(f"{directory} has no config.json") from None
    index_path = directory / "model.safetensors.index.json"
    tensors = {}
    if index_path.exists():
        weight_map = json.loads(index_path.read_text())["weight_map"]
        for file in sorted(set(weight_map.values())):
            for name, t in read_tensors(directory / file).items():
                if weight_map.get(name) != file:
                    raise CheckpointError(f"{file} holds {name}, which the index puts in {weight_map.get(name)}")
                tensors[name] = t
    else:
        tensors = read_tensors(directory / "model.safetensors")

    expected = weight_shapes(cfg)
    if cfg.tied and "lm_head.weight" in tensors:  # some writers keep the tied copy
        if not torch.equal(tensors.pop("lm_head.weight"), tensors.get("model.embed_tokens.weight")):
            raise CheckpointError("tie_word_embeddings is true but lm_head.weight differs from the embedding")
    missing, unexpected = expected.keys() - tensors.keys(), tensors.keys() - expected.keys()
    if missing or unexpected:
        raise CheckpointError(f"{directory}: missing {sorted(missing)}, unexpected {sorted(unexpected)}")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise CheckpointError(f"{name} has shape {tuple(tensors[name].shape)}, the config says {shape}")
    return cfg, {name: tensors[name].to(torch.float64) for name in expected}


# ---- a tokenizer for the fixtures ----------------------------------------------------------------

# The text the fixtures' merges are learned from.
MERGE_TEXT = """The gate sits after attention. Each head computes its output, and the gate, a sigmoid of
the hidden state, scales it: a head that has nothing to add closes its gate instead of looking at
the first token. Without the gate the first token takes the attention that the others do not want,
and the model learns to keep it there: the attention sink. With the gate the sink goes away."""


def write_tokenizer(out, merge_count, rows):
    """out/tokenizer.json shaped as Qwen3's: NFC, Qwen2's Split regex then ByteLevel, the 256 byte
    tokens, `merge_count` merges learned from MERGE_TEXT (bpe_reference.py's learner), then
    <|endoftext|>, <|im_start|>, <|im_end|>; no BOS. Its ids stop short of the model's `rows`, as
    Qwen3's 151,669 ids do of its 151,936 embedding rows."""
    import bpe_reference as bpe  # needs Debian's python3-regex
    pieces = bpe.isolated(bpe.regex.compile(bpe.QWEN2_REGEX), unicodedata.normalize("NFC", MERGE_TEXT))
    words = collections.Counter(bpe.spell(p.encode()) for p in pieces)
    merges = bpe.learn_merges(dict(words), merge_count)
    vocab = {}
    for c in sorted(bpe.ALPHABET.values(), key=lambda c: (ord(c) >= 0x100, ord(c))):
        vocab[c] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = [{"id": len(vocab) + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(bpe.SPECIALS)]
    if len(vocab) + len(added) > rows:
        raise CheckpointError(f"the tokenizer's {len(vocab) + len(added)} ids do not fit the model's {rows} rows")
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                 "normalizer": {"type": "NFC"},
                 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                     {"type": "Split", "pattern": {"Regex": bpe.QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
                     byte_level]},
                 "post_processor": byte_level, "decoder": byte_level,
                 "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                           "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                           "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False, indent=1) + "\n")


# ---- the float64 forward ---------------------------------------------------------------------

def rms_norm(x, weight, eps):
    """(..., n) → (..., n)"""
    return weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rope(x, theta):
    """HF's rotate_half form: x cos + rotate_half(x) sin, rotate_half(x) = (−x₂, x₁), the angle
    of channels c and c + D/2 at position t being t·θ^(−2c/D).   x (B, H, T, D) → (B, H, T, D)"""
    T, D = x.shape[-2:]
    inv_freq = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)        # (D/2,)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq             # (T, D/2)
    angle = torch.cat([angle, angle], dim=-1)                                    # (T, D)
    rotated = torch.cat([-x[..., D // 2:], x[..., :D // 2]], dim=-1)
    return x * angle.cos() + rotated * angle.sin()


def split_query_gate(projected, cfg):
    """q_proj's output into queries (B, T, H, D) and gate logits (B, T, H, W), W = 0 ungated.
    projected (B, T, H·(D + W))"""
    B, T, _ = projected.shape
    H, Hkv, D, W, G = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.gate_width, cfg.group
    if cfg.gate_layout == "interleaved":
        q, gate = projected.view(B, T, H, D + W).split([D, W], dim=-1)
    else:
        q, gate = projected.view(B, T, Hkv, G * (D + W)).split([G * D, G * W], dim=-1)
    return q.reshape(B, T, H, D), gate.reshape(B, T, H, W)


def keep(name, layer, t):
    return t


def forward(cfg, w, ids, edit=keep):
    """Every reference tensor, float64, for weights `w` (float64) and ids (B, T). edit(name, layer, t)
    may replace layer's "gate" σ (B, H, T, W), "z" the heads before o_proj (B, T, H, D), or
    "hidden" the block's output (B, T, C) (ablate_reference.py's interventions)."""
    B, T = ids.shape
    H, Hkv, D = cfg.heads, cfg.kv_heads, cfg.head_dim
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    kv_of_head = torch.arange(H) // cfg.group
    out = {"input_ids": ids}
    x = w["model.embed_tokens.weight"][ids]                                      # (B, T, C)
    for l in range(cfg.layers):
        p = f"model.layers.{l}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], cfg.eps)
        q, gate = split_query_gate(a @ w[p + "self_attn.q_proj.weight"].T, cfg)  # (B, T, H, D), (B, T, H, W)
        k = (a @ w[p + "self_attn.k_proj.weight"].T).view(B, T, Hkv, D)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).view(B, T, Hkv, D)
        if cfg.qk_norm:
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], cfg.eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], cfg.eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)      # (B, H|Hkv, T, D)
        q, k = rope(q, cfg.rope_theta), rope(k, cfg.rope_theta)
        k, v = k[:, kv_of_head], v[:, kv_of_head]                                # (B, H, T, D)
        scores = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(future, -math.inf)
        probs = torch.softmax(scores, dim=-1)                                    # (B, H, T, T)
        heads = probs @ v                                                        # (B, H, T, D)
        if cfg.gate != "none":
            sigma = edit("gate", l, torch.sigmoid(gate).transpose(1, 2))         # (B, H, T, W)
            heads = heads * sigma
            out[f"gate.{l}"] = sigma
        z = edit("z", l, heads.transpose(1, 2))                                  # (B, T, H, D)
        h = x + z.reshape(B, T, H * D) @ w[p + "self_attn.o_proj.weight"].T
        n = rms_norm(h, w[p + "post_attention_layernorm.weight"], cfg.eps)
        mlp = F.silu(n @ w[p + "mlp.gate_proj.weight"].T) * (n @ w[p + "mlp.up_proj.weight"].T)
        x = edit("hidden", l, h + mlp @ w[p + "mlp.down_proj.weight"].T)         # (B, T, C)
        out[f"probs.{l}"], out[f"hidden.{l}"] = probs, x
    head = w["model.embed_tokens.weight" if cfg.tied else "lm_head.weight"]
    logits = rms_norm(x, w["model.norm.weight"], cfg.eps) @ head.T               # (B, T, V)
    out["logits"] = logits
    out["loss"] = F.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab), ids[:, 1:].reshape(-1))
    return out


def random_ids(vocab, batch, seq, seed):
    return torch.randint(vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def write_reference(path, cfg, weights, ids):
    B, T = ids.shape
    if T < 2:
        raise CheckpointError(f"the loss needs T ≥ 2 tokens; ids are {tuple(ids.shape)}")
    if ids.min() < 0 or ids.max() >= cfg.vocab:
        raise CheckpointError(f"ids must lie in [0, {cfg.vocab}); they span [{ids.min()}, {ids.max()}]")
    metadata = {"config": json.dumps(dataclasses.asdict(cfg)), "written_by": "tests/reference/hf_qwen3.py"}
    write_safetensors(path, forward(cfg, weights, ids), metadata)


# ---- selftest: the same model written another way, in float32 ---------------------------------

def query_and_gate_rows(cfg, h):
    """q_proj's rows of head h's query and of its gate, by index arithmetic (split_query_gate
    reads the same layouts with views)."""
    D, W, G = cfg.head_dim, cfg.gate_width, cfg.group
    if cfg.gate_layout == "interleaved":
        start = h * (D + W)
        return list(range(start, start + D)), list(range(start + D, start + D + W))
    group, j = divmod(h, G)
    base = group * G * (D + W)
    return list(range(base + j * D, base + (j + 1) * D)), list(range(base + G * D + j * W, base + G * D + (j + 1) * W))


def forward_by_loops(cfg, w, ids):
    """logits, probs.L and gate.L again: float32, one head and one query position at a time,
    GQA by repeat_interleave, RoPE as a complex rotation of (x_c + i·x_{c+D/2})."""
    B, T = ids.shape
    D = cfg.head_dim
    w = {name: t.to(torch.float32) for name, t in w.items()}
    norm = lambda x, weight: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.eps) * weight
    angle = torch.outer(torch.arange(T, dtype=torch.float32),
                        1.0 / cfg.rope_theta ** (torch.arange(D // 2, dtype=torch.float32) * 2 / D))
    turn = torch.polar(torch.ones_like(angle), angle)                            # (T, D/2)

    def rotate(x):                                                               # (..., T, D)
        z = torch.complex(x[..., :D // 2], x[..., D // 2:]) * turn
        return torch.cat([z.real, z.imag], dim=-1)

    out = {}
    x = F.embedding(ids, w["model.embed_tokens.weight"])
    for l in range(cfg.layers):
        p = f"model.layers.{l}.self_attn."
        a = norm(x, w[f"model.layers.{l}.input_layernorm.weight"])
        wq = w[p + "q_proj.weight"]
        k = F.linear(a, w[p + "k_proj.weight"]).view(B, T, cfg.kv_heads, D).permute(0, 2, 1, 3)
        v = F.linear(a, w[p + "v_proj.weight"]).view(B, T, cfg.kv_heads, D).permute(0, 2, 1, 3)
        if cfg.qk_norm:
            k = norm(k, w[p + "k_norm.weight"])
        k = rotate(k).repeat_interleave(cfg.group, dim=1)                        # (B, H, T, D)
        v = v.repeat_interleave(cfg.group, dim=1)
        probs = torch.zeros(B, cfg.heads, T, T)
        gates = torch.zeros(B, cfg.heads, T, cfg.gate_width)
        merged = torch.zeros(B, T, cfg.heads * D)
        for h in range(cfg.heads):
            q_rows, gate_rows = query_and_gate_rows(cfg, h)
            q = F.linear(a, wq[q_rows])                                          # (B, T, D)
            if cfg.qk_norm:
                q = norm(q, w[p + "q_norm.weight"])
            q = rotate(q)
            for t in range(T):
                row = torch.softmax(torch.einsum("bd,bsd->bs", q[:, t], k[:, h, :t + 1]) / math.sqrt(D), dim=-1)
                probs[:, h, t, :t + 1] = row
                merged[:, t, h * D:(h + 1) * D] = torch.einsum("bs,bsd->bd", row, v[:, h, :t + 1])
            if gate_rows:
                gates[:, h] = torch.sigmoid(F.linear(a, wq[gate_rows]))
                merged[:, :, h * D:(h + 1) * D] *= gates[:, h]
        x = x + F.linear(merged, w[p + "o_proj.weight"])
        m = f"model.layers.{l}.mlp."
        n = norm(x, w[f"model.layers.{l}.post_attention_layernorm.weight"])
        x = x + F.linear(F.silu(F.linear(n, w[m + "gate_proj.weight"])) * F.linear(n, w[m + "up_proj.weight"]),
                         w[m + "down_proj.weight"])
        out[f"probs.{l}"] = probs
        if cfg.gate != "none":
            out[f"gate.{l}"] = gates
    head = w["model.embed_tokens.weight" if cfg.tied else "lm_head.weight"]
    out["logits"] = F.linear(norm(x, w["model.norm.weight"]), head)
    log_z = torch.logsumexp(out["logits"][:, :-1], dim=-1)
    picked = out["logits"][:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    out["loss"] = (log_z - picked).mean()
    return out


def difference(a, b):
    """(max |a − b|, max |a − b| / max |b|)"""
    a, b = a.to(torch.float64), b.to(torch.float64)
    abs_diff = (a - b).abs().max().item()
    return abs_diff, abs_diff / max(b.abs().max().item(), 1e-300)


def selftest():
    results = []

    def check(name, ok, detail):
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")

    base = dict(hidden=32, heads=4, kv_heads=2, head_dim=16, layers=2, ffn=48, vocab=300, eps=1e-6,
                rope_theta=1e6, tied=False, qk_norm=True)
    ids = random_ids(300, 2, 12, 0)
    with tempfile.TemporaryDirectory() as tmp:
        # 1. Against the loops, in float32, for every gate and layout, through files on disk.
        for i, (gate, layout, extra) in enumerate([("none", "grouped", {}), ("headwise", "grouped", {}),
                                                   ("elementwise", "grouped", {}), ("headwise", "interleaved", {}),
                                                   ("elementwise", "interleaved", {"tied": True}),
                                                   ("elementwise", "grouped", {"qk_norm": False, "kv_heads": 1})]):
            cfg = Config(**{**base, **extra}, gate=gate, gate_layout=layout).validate()
            folder = pathlib.Path(tmp) / f"{i}-{gate}-{layout}"
            write_checkpoint(folder, cfg, random_weights(cfg, 1), "f32", 3)
            cfg, w = load_checkpoint(folder)
            ref, loops = forward(cfg, w, ids), forward_by_loops(cfg, w, ids)
            worst = max((difference(loops[n], ref[n]) for n in loops), key=lambda d: d[1])
            entropy = -(ref["probs.0"] * ref["probs.0"].clamp_min(1e-300).log()).sum(-1)
            check(f"float64 = float32 loops, {gate} {layout} {extra or ''}", worst[1] < 1e-5,
                  f"max abs {worst[0]:.2e}, rel {worst[1]:.2e}; loss {ref['loss'].item():.4f}; "
                  f"layer-0 entropy {entropy[:, :, -1].mean().item():.3f} of uniform {math.log(12):.3f}")

        # 2. σ(gate) = 1/2 everywhere and o_proj doubled is the ungated model: the gated q_proj's
        # query rows are read, and its gate rows skipped, exactly where the ungated one's are.
        for gate in ("headwise", "elementwise"):
            for layout in ("grouped", "interleaved"):
                gated = Config(**base, gate=gate, gate_layout=layout)
                plain = Config(**base, gate="none", gate_layout="grouped")
                w = {n: t.to(torch.float64) for n, t in random_weights(gated, 2).items()}
                w_plain = dict(w)
                for l in range(gated.layers):
                    q_name, o_name = f"model.layers.{l}.self_attn.q_proj.weight", f"model.layers.{l}.self_attn.o_proj.weight"
                    rows = [query_and_gate_rows(gated, h) for h in range(gated.heads)]
                    w_plain[q_name] = w[q_name][[r for q_rows, _ in rows for r in q_rows]]
                    w[q_name] = w[q_name].clone()
                    w[q_name][[r for _, gate_rows in rows for r in gate_rows]] = 0
                    w[o_name] = 2 * w[o_name]
                d = difference(forward(gated, w, ids)["logits"], forward(plain, w_plain, ids)["logits"])
                check(f"gate 1/2, o_proj x2 = ungated, {gate} {layout}", d[1] < 1e-13,
                      f"max abs {d[0]:.2e}, rel {d[1]:.2e}")

        # 3. The interleaved file is the grouped one with q_proj's rows permuted; reading one layout
        # as the other changes the logits.
        for gate in ("headwise", "elementwise"):
            grouped = Config(**base, gate=gate, gate_layout="grouped")
            interleaved = dataclasses.replace(grouped, gate_layout="interleaved")
            w = {n: t.to(torch.float64) for n, t in random_weights(grouped, 3).items()}
            w_inter = dict(w)
            for l in range(grouped.layers):
                name = f"model.layers.{l}.self_attn.q_proj.weight"
                order = [r for h in range(grouped.heads) for rows in query_and_gate_rows(grouped, h) for r in rows]
                w_inter[name] = w[name][order]
            same = difference(forward(interleaved, w_inter, ids)["logits"], forward(grouped, w, ids)["logits"])
            wrong = difference(forward(interleaved, w, ids)["logits"], forward(grouped, w, ids)["logits"])
            check(f"grouped = interleaved with q_proj permuted, {gate}", same[1] < 1e-13 and wrong[1] > 1e-2,
                  f"permuted: rel {same[1]:.2e}; misread: rel {wrong[1]:.2e}")

        # 4. bfloat16: ties round to even; the reference reads the stored values, not the float32 ones.
        ties = torch.tensor([1.00390625, 1.01171875], dtype=torch.float32).to(torch.bfloat16).view(torch.int16)
        cfg = Config(**base, gate="elementwise", gate_layout="grouped")
        folder = pathlib.Path(tmp) / "bf16"
        w32 = random_weights(cfg, 4)
        write_checkpoint(folder, cfg, w32, "bf16", 1)
        _, w16 = load_checkpoint(folder)
        exact = all(torch.equal(w16[n], w32[n].to(torch.bfloat16).to(torch.float64)) for n in w32)
        check("bf16 rounds ties to even and is read back exactly", ties.tolist() == [0x3F80, 0x3F82] and exact,
              f"ties → {[hex(b) for b in ties.tolist()]}")

        # 5. `forward` on the folder `make` wrote gives the same bytes as make's reference.
        folder = pathlib.Path(tmp) / "again"
        main(["make", str(folder), "--gate", "headwise", "--shards", "2"])
        main(["forward", str(folder), str(folder / "again.safetensors")])
        same = (folder / "reference.safetensors").read_bytes() == (folder / "again.safetensors").read_bytes()
        check("forward DIR reproduces make's reference.safetensors", same, "byte for byte" if same else "differs")
    print(f"{sum(results)} passed, {results.count(False)} failed")
    return 0 if all(results) else 1


# ---- command line ---------------------------------------------------------------------------------

def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="a random Qwen3 checkpoint and its reference.safetensors")
    make.add_argument("out_dir", type=pathlib.Path)
    make.add_argument("--gate", choices=["none", "headwise", "elementwise"], default="none")
    make.add_argument("--gate-layout", choices=["grouped", "interleaved"], default="grouped")
    for flag, default in [("hidden", 32), ("heads", 4), ("kv-heads", 2), ("head-dim", 16), ("layers", 2),
                          ("ffn", 48), ("vocab", 300), ("shards", 1)]:
        make.add_argument(f"--{flag}", type=int, default=default)
    make.add_argument("--tied", action="store_true")
    make.add_argument("--dtype", choices=list(STORED), default="f32")
    make.add_argument("--rope-theta", type=float, default=1e6)
    make.add_argument("--eps", type=float, default=1e-6)
    make.add_argument("--no-qk-norm", action="store_true")
    make.add_argument("--no-reference", action="store_true", help="write the checkpoint only")
    make.add_argument("--context", type=int, default=4096, help="max_position_embeddings")
    make.add_argument("--tokenizer", type=int, metavar="MERGES", default=0,
                      help="also write a tokenizer.json with this many merges (needs python3-regex)")
    fwd = commands.add_parser("forward", help="reference.safetensors content for any Qwen3 checkpoint DIR")
    fwd.add_argument("dir", type=pathlib.Path)
    fwd.add_argument("out", type=pathlib.Path)
    fwd.add_argument("--ids", type=pathlib.Path, help="a safetensors file whose input_ids (I64, (B, T)) to use")
    for sub in (make, fwd):
        sub.add_argument("--seed", type=int, default=0, help="the weights' (make) and the ids' seed")
        sub.add_argument("--batch", type=int, default=2)
        sub.add_argument("--seq", type=int, default=12)
    commands.add_parser("selftest", help="check this reference against a second float32 implementation")
    args = parser.parse_args(argv)

    torch.set_grad_enabled(False)
    if args.command == "selftest":
        return selftest()
    try:
        if args.command == "make":
            cfg = Config(hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads, head_dim=args.head_dim,
                         layers=args.layers, ffn=args.ffn, vocab=args.vocab, eps=args.eps,
                         rope_theta=args.rope_theta, tied=args.tied, qk_norm=not args.no_qk_norm,
                         gate=args.gate, gate_layout=args.gate_layout, context=args.context).validate()
            write_checkpoint(args.out_dir, cfg, random_weights(cfg, args.seed), args.dtype, args.shards)
            if args.tokenizer:
                write_tokenizer(args.out_dir, args.tokenizer, cfg.vocab)
            if args.no_reference:
                return 0
            folder, out = args.out_dir, args.out_dir / "reference.safetensors"
        else:
            folder, out = args.dir, args.out
        cfg, weights = load_checkpoint(folder)
        if getattr(args, "ids", None):
            ids = read_tensors(args.ids).get("input_ids")
            if ids is None:
                raise CheckpointError(f"{args.ids} holds no input_ids")
        else:
            ids = random_ids(cfg.vocab, args.batch, args.seq, args.seed)
        write_reference(out, cfg, weights, ids.to(torch.int64))
    except CheckpointError as e:
        print(f"hf_qwen3.py {args.command}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

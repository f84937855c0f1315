"""A float64 reference for Hugging Face checkpoints of the hybrid of Qwen3-Next and Qwen3.5 (dense
text models: Gated DeltaNet linear attention in three layers of four, gated full attention in the
fourth), against which gg::nn::hf::load_folder is checked. Written from the equations of
transformers' Qwen3NextModel / Qwen3_5TextModel, independently of gatedgrad's model; the linear
layer is gated_deltanet.py's, token by token (the recurrent form).

Run from the repository root with Debian's Python, which has PyTorch:

    /usr/bin/python3 tests/reference/hf_hybrid.py make     # writes tests/reference/hf/qwen3_5, qwen3_next
    /usr/bin/python3 tests/reference/hf_hybrid.py check    # meson's test hf_hybrid_reference
    /usr/bin/python3 tests/reference/hf_hybrid.py forward DIR OUT.safetensors   # any such folder
                                                           # in one model.safetensors (tools/hf-check)

`make` writes two random checkpoints, each with reference.safetensors (input_ids I64 (B, T), logits
F64 (B, T, V), hidden.L F64 (B, T, C) after block L, loss F64 (), the mean cross-entropy of
logits[:, :-1] against input_ids[:, 1:]):

    qwen3_5     Qwen3_5ForConditionalGeneration, the multimodal wrapper: config.json's text_config
                holds the model, rope_parameters (with mrope_section: text alone puts every token
                at the same position on its three axes, which is plain RoPE) and layer_types; the
                text weights are named model.language_model.*, beside a stand-in vision tower
                (model.visual.*) and multi-token-prediction head (mtp.*), which a text model does
                not read; in_proj_qkv / in_proj_z / in_proj_b / in_proj_a; a tokenizer.json
    qwen3_next  Qwen3NextForCausalLM with no expert (num_experts 0): model.*, full_attention_interval,
                partial_rotary_factor and rope_theta at the top, in_proj_qkvz / in_proj_ba

`check` recomputes each reference.safetensors from its folder and exits non-zero unless it is the
same: an edit of these equations fails here until the fixtures are made again.

The model, x (B, T, C); every RMSNorm here but the linear layer's output norm is zero-centred,
RMSNorm(x) = (1 + w) ⊙ x / √(mean(x², -1) + ε):

    h = x + Mixer(input_layernorm(x)),  Mixer = the linear layer or Attn, by layer_types[l]
    x = h + down_proj(silu(gate_proj(n)) ⊙ up_proj(n)),   n = post_attention_layernorm(h)
    logits = lm_head(norm(x))

    Attn(a): q_proj(a) (B, T, H, 2D) holds per head its query, then its gate: [q_h | g_h]
             q, k ← q_norm(q), k_norm(k); RoPE on the first R = partial_rotary_factor · D channels
             (pairs c, c + R/2), the others pass; head_h = softmax(q_h k_{h // G}ᵀ / √D + causal
             mask) v_{h // G};  y = o_proj(Concat(head_h ⊙ σ(g_h)))
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

import gated_deltanet
import hf_qwen3
from safetensors_by_hand import read_safetensors, write_safetensors

HERE = pathlib.Path(__file__).parent
torch.set_default_dtype(torch.float64)

# Tiny, with what the real models have: GQA with G = 2 (the gate's interleaved and grouped orders
# differ), a quarter of each head turned, Hv = 2 Hk with dk ≠ dv in the linear layers.
TEXT = dict(vocab_size=300, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=8, linear_value_head_dim=6, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
            max_position_embeddings=128, hidden_act="silu", attention_bias=False, tie_word_embeddings=False)
THETA, PARTIAL = 1e7, 0.25


def config_json(layout):
    if layout == "qwen3_5":
        text = dict(TEXT, model_type="qwen3_5_text", attn_output_gate=True,
                    layer_types=["linear_attention"] * 3 + ["full_attention"],
                    rope_parameters=dict(rope_type="default", rope_theta=THETA, partial_rotary_factor=PARTIAL,
                                         mrope_section=[1, 1, 0], mrope_interleaved=True))
        return dict(architectures=["Qwen3_5ForConditionalGeneration"], model_type="qwen3_5", text_config=text,
                    vision_config=dict(model_type="qwen3_5_vision", depth=1, hidden_size=4),
                    tie_word_embeddings=False, torch_dtype="float32")
    return dict(TEXT, architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", full_attention_interval=4,
                rope_theta=THETA, partial_rotary_factor=PARTIAL, num_experts=0, decoder_sparse_step=1,
                mlp_only_layers=[], torch_dtype="float32")


def text_config(cfg):
    """config.json → (the text model's fields, the prefix of its weights, the layer types)."""
    text = cfg.get("text_config", cfg)
    prefix = "model.language_model." if "text_config" in cfg else "model."
    types = text.get("layer_types") or [
        "full_attention" if (i + 1) % text.get("full_attention_interval", 4) == 0 else "linear_attention"
        for i in range(text["num_hidden_layers"])]
    rope = text.get("rope_parameters") or {}
    theta = rope.get("rope_theta", text.get("rope_theta", 10000.0))
    partial = rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25))
    return dict(text, rope_theta=theta, partial_rotary_factor=partial), prefix, types


def random_weights(layout, seed):
    """The text model's weights under HF's names (norms zero-centred: N(0, 0.1²)), and the
    tensors beside it a text model does not read."""
    c, prefix, types = text_config(config_json(layout))
    gen = torch.Generator().manual_seed(seed)
    d, H, Hkv, D, ff = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], \
        c["intermediate_size"]

    def uniform(*shape):
        return (2 * torch.rand(shape, generator=gen) - 1) / math.sqrt(shape[-1])

    def norm(n):
        return 0.1 * torch.randn(n, generator=gen)

    w = {prefix + "embed_tokens.weight": torch.randn(c["vocab_size"], d, generator=gen),
         prefix + "norm.weight": norm(d), "lm_head.weight": uniform(c["vocab_size"], d)}
    for l, kind in enumerate(types):
        p = f"{prefix}layers.{l}."
        w.update({p + "input_layernorm.weight": norm(d), p + "post_attention_layernorm.weight": norm(d),
                  p + "mlp.gate_proj.weight": uniform(ff, d), p + "mlp.up_proj.weight": uniform(ff, d),
                  p + "mlp.down_proj.weight": uniform(d, ff)})
        if kind == "linear_attention":
            linear = gated_deltanet.random_weights(c, gen)
            if layout == "qwen3_next":
                linear.update(gated_deltanet.qwen3_next_projections(linear, c))
                for name in gated_deltanet.QWEN3_5:
                    del linear[name]
            w.update({p + "linear_attn." + name: t for name, t in linear.items()})
        else:
            w.update({p + "self_attn.q_proj.weight": uniform(2 * H * D, d), p + "self_attn.k_proj.weight":
                      uniform(Hkv * D, d), p + "self_attn.v_proj.weight": uniform(Hkv * D, d),
                      p + "self_attn.o_proj.weight": uniform(d, H * D), p + "self_attn.q_norm.weight": norm(D),
                      p + "self_attn.k_norm.weight": norm(D)})
    unread = {"mtp.fc.weight": uniform(d, 2 * d)}
    if layout == "qwen3_5":
        unread["model.visual.patch_embed.proj.weight"] = uniform(4, 3)
    return {name: t.float() for name, t in w.items()}, {name: t.float() for name, t in unread.items()}


def rms_norm(x, w, eps):
    return hf_qwen3.rms_norm(x, 1 + w, eps)


def attention(c, w, p, a):
    """Qwen3-Next's gated attention on a (B, T, C) → (B, T, C)."""
    B, T, _ = a.shape
    H, Hkv, D, eps = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["rms_norm_eps"]
    R = int(D * c["partial_rotary_factor"])
    q, gate = (a @ w[p + "q_proj.weight"].T).view(B, T, H, 2 * D).split([D, D], dim=-1)  # [q_h | g_h]
    k = (a @ w[p + "k_proj.weight"].T).view(B, T, Hkv, D)
    v = (a @ w[p + "v_proj.weight"].T).view(B, T, Hkv, D)
    q, k = rms_norm(q, w[p + "q_norm.weight"], eps), rms_norm(k, w[p + "k_norm.weight"], eps)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)           # (B, H|Hkv, T, D)
    q, k = [torch.cat([hf_qwen3.rope(t[..., :R], c["rope_theta"]), t[..., R:]], dim=-1) for t in (q, k)]
    kv_of_head = torch.arange(H) // (H // Hkv)
    k, v = k[:, kv_of_head], v[:, kv_of_head]                                    # (B, H, T, D)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    scores = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(future, -math.inf)
    heads = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2)                  # (B, T, H, D)
    return (heads * torch.sigmoid(gate)).reshape(B, T, H * D) @ w[p + "o_proj.weight"].T


def forward(cfg, w, ids):
    """Every reference tensor, float64, for config.json `cfg`, weights `w` (float64) and ids (B, T)."""
    c, prefix, types = text_config(cfg)
    layout = "qwen3_next" if any(name.endswith("in_proj_qkvz.weight") for name in w) else "qwen3_5"
    eps = c["rms_norm_eps"]
    out = {"input_ids": ids}
    x = w[prefix + "embed_tokens.weight"][ids]                                   # (B, T, C)
    for l, kind in enumerate(types):
        p = f"{prefix}layers.{l}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        if kind == "linear_attention":
            linear = {name[len(p + "linear_attn."):]: t for name, t in w.items() if name.startswith(p + "linear_attn.")}
            h = x + gated_deltanet.layer(linear, layout, a, c)[0]
        else:
            h = x + attention(c, w, p + "self_attn.", a)
        n = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        x = h + (F.silu(n @ w[p + "mlp.gate_proj.weight"].T) * (n @ w[p + "mlp.up_proj.weight"].T)) \
            @ w[p + "mlp.down_proj.weight"].T
        out[f"hidden.{l}"] = x
    logits = rms_norm(x, w[prefix + "norm.weight"], eps) @ w["lm_head.weight"].T  # (B, T, V)
    out["logits"] = logits
    out["loss"] = F.cross_entropy(logits[:, :-1].reshape(-1, c["vocab_size"]), ids[:, 1:].reshape(-1))
    return out


def reference(folder, batch=2, seq=12, seed=0):
    """forward() on random ids of the folder's vocabulary, the weights widened to float64."""
    cfg = json.loads((folder / "config.json").read_text())
    w = {name: t.double() for name, t in read_safetensors(folder / "model.safetensors")[0].items()}
    ids = torch.randint(text_config(cfg)[0]["vocab_size"], (batch, seq), generator=torch.Generator().manual_seed(seed))
    return forward(cfg, w, ids)


def make():
    for seed, layout in enumerate(("qwen3_5", "qwen3_next")):
        folder = HERE / "hf" / layout
        folder.mkdir(parents=True, exist_ok=True)
        weights, unread = random_weights(layout, seed + 10)
        (folder / "config.json").write_text(json.dumps(config_json(layout), indent=2) + "\n")
        write_safetensors(folder / "model.safetensors", {**weights, **unread}, {"format": "pt"})
        if layout == "qwen3_5":
            hf_qwen3.write_tokenizer(folder, 20, TEXT["vocab_size"])
        write_safetensors(folder / "reference.safetensors", reference(folder),
                          {"written_by": "tests/reference/hf_hybrid.py"})
        print(f"{folder.name}: {sum(f.stat().st_size for f in folder.iterdir())} bytes")


def check():
    for layout in ("qwen3_5", "qwen3_next"):
        folder = HERE / "hf" / layout
        stored = read_safetensors(folder / "reference.safetensors")[0]
        for name, ours in reference(folder).items():
            diff = (ours.double() - stored[name].double()).abs().max().item()
            if not diff < 1e-12:
                sys.exit(f"{layout}: {name} differs from reference.safetensors by {diff:.2e}: make the fixtures again")
        print(f"{layout}: reference.safetensors is what these equations compute")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    if len(sys.argv) == 4 and sys.argv[1] == "forward":
        write_safetensors(pathlib.Path(sys.argv[3]), reference(pathlib.Path(sys.argv[2]), seq=16, seed=7),
                          {"written_by": "tests/reference/hf_hybrid.py"})
        sys.exit(0)
    commands = {"make": make, "check": check}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]]()

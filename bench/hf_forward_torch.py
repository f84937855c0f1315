"""The PyTorch peer of bench/hf_forward.cpp: the forward of a Hugging Face Qwen3 checkpoint,
written plainly in torch (Debian's 1.13 has no `transformers`), on the same ids, timed the same
way, with the process's peak RSS.

    /usr/bin/python3 bench/hf_forward_torch.py DIR THREADS [--mode analysis|inference]
        [--dtype bf16|f32] [--runs 3] [--batch 16] [--seq-len 256] [--seed 0]
    → one JSON line, with hf_forward's fields

The forward is transformers' Qwen3 decoder in eager mode, as a model loaded with
torch_dtype=bfloat16 runs it (--dtype bf16): the weights and activations bfloat16, RMSNorm's
statistics and the softmax in float32. --dtype f32 widens the weights as they are read and runs
everything in float32. analysis keeps what output_attentions and output_hidden_states would
return, the attention probabilities as float32 (what the analysis reads; transformers would
round them to bfloat16) and every layer's output; inference keeps nothing.

The weights are read by hand, each tensor straight from its file into its own memory, so that
loading takes no copy of a whole file (tests/reference/safetensors_by_hand.py reads whole files).
"""
import argparse
import ctypes
import json
import math
import os
import pathlib
import resource
import struct
import sys
import time

if __name__ == "__main__":
    # Debian's torch multiplies through OpenBLAS, whose pool torch.set_num_threads does not
    # size and which reads its size once, when it loads: so before torch is imported.
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[2] if len(sys.argv) > 2 else "1"
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

STORED = {"BF16": torch.bfloat16, "F32": torch.float32}
MASK64 = (1 << 64) - 1


def read_weights(directory, dtype):
    """{name: tensor in `dtype`} from DIR's model.safetensors, or the shards its index lists."""
    index = directory / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    weights = {}
    for file in files:
        with open(directory / file, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
            header.pop("__metadata__", None)
            for name, info in header.items():
                begin, end = info["data_offsets"]
                raw = torch.empty(end - begin, dtype=torch.uint8)
                f.seek(8 + n + begin)
                if f.readinto(raw.numpy()) != end - begin:
                    sys.exit(f"{file}: {name} is cut short")
                weights[name] = raw.view(STORED[info["dtype"]]).reshape(info["shape"]).to(dtype)
    return weights


def rms_norm(x, weight, eps):
    """transformers' Qwen3RMSNorm: statistics in float32, the weight applied in x's dtype.
    x (..., n) → (..., n)"""
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def forward(cfg, w, ids, keep, cache=None, last_only=False):
    """logits (B, T, V); with keep, also every layer's probabilities (B, H, T, T) in float32 and
    output (B, T, C). With cache (a list, empty before the first call), ids are the next T
    positions after what it holds: transformers' DynamicCache, each layer's keys (after RoPE)
    and values (B, Hkv, past, D) concatenated with the new ones. last_only: the logits of the last
    position alone (B, 1, V), as transformers' generate asks for them (logits_to_keep=1)."""
    B, T = ids.shape
    H, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, dtype = cfg["rms_norm_eps"], w["model.embed_tokens.weight"].dtype
    past = cache[0][0].shape[2] if cache else 0
    inv_freq = 1.0 / cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float32) / D)
    angle = torch.outer(torch.arange(past, past + T, dtype=torch.float32), inv_freq)
    angle = torch.cat([angle, angle], dim=-1)                                   # (T, D)
    cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
    mask = torch.full((T, past + T), -math.inf).triu(past + 1).to(dtype)        # causal, added to the scores
    probs_kept, hidden_kept = [], []
    x = F.embedding(ids, w["model.embed_tokens.weight"])                        # (B, T, C)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = rms_norm(F.linear(a, w[p + "self_attn.q_proj.weight"]).view(B, T, H, D), w[p + "self_attn.q_norm.weight"], eps)
        k = rms_norm(F.linear(a, w[p + "self_attn.k_proj.weight"]).view(B, T, Hkv, D), w[p + "self_attn.k_norm.weight"], eps)
        v = F.linear(a, w[p + "self_attn.v_proj.weight"]).view(B, T, Hkv, D).transpose(1, 2)
        q, k = q.transpose(1, 2), k.transpose(1, 2)                             # (B, H|Hkv, T, D)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if cache is not None:
            if l == len(cache):
                cache.append((k, v))
            else:
                cache[l] = (torch.cat([cache[l][0], k], dim=2), torch.cat([cache[l][1], v], dim=2))
            k, v = cache[l]                                                     # (B, Hkv, past + T, D)
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)  # (B, H, past + T, D)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D) + mask                  # (B, H, T, past + T)
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
        heads = probs.to(dtype) @ v                                             # (B, H, T, D)
        x = x + F.linear(heads.transpose(1, 2).reshape(B, T, H * D), w[p + "self_attn.o_proj.weight"])
        n = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + F.linear(F.silu(F.linear(n, w[p + "mlp.gate_proj.weight"])) * F.linear(n, w[p + "mlp.up_proj.weight"]),
                         w[p + "mlp.down_proj.weight"])
        if keep:
            probs_kept.append(probs)
            hidden_kept.append(x)
    head = w["model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"]
    x = x[:, -1:] if last_only else x
    return F.linear(rms_norm(x, w["model.norm.weight"], eps), head), probs_kept, hidden_kept


def random_ids(B, T, V, seed):
    """hf_forward.cpp's ids: token i, in row-major order, is splitmix64(seed·B·T + i) mod V."""
    def splitmix64(x):
        x = (x + 0x9E3779B97F4A7C15) & MASK64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
        return x ^ (x >> 31)
    return torch.tensor([splitmix64(seed * B * T + i) % V for i in range(B * T)], dtype=torch.int64).view(B, T)


def openblas_core():
    """The kernels of the OpenBLAS that torch multiplies float32 through (bfloat16 goes through
    oneDNN): a library is loaded once per process, so this handle is torch's."""
    try:
        library = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return "none"
    library.openblas_get_corename.restype = ctypes.c_char_p
    return library.openblas_get_corename().decode()


def gb(tensors):
    return sum(t.numel() * t.element_size() for t in tensors) / 1e9


def open_model(args):
    """The peers' start: args.threads threads, the folder's config and its weights in args.dtype
    (and the seconds the weights took to read); gated checkpoints are refused."""
    torch.set_num_threads(args.threads)
    cfg = json.loads((args.dir / "config.json").read_text())
    if cfg.get("model_type") != "qwen3" or cfg.get("headwise_attn_output_gate") or cfg.get("elementwise_attn_output_gate"):
        sys.exit(f"{args.dir}: this peer runs ungated Qwen3 checkpoints only")
    t0 = time.perf_counter()
    w = read_weights(args.dir, {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype])
    return cfg, w, time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=pathlib.Path)
    parser.add_argument("threads", type=int)
    parser.add_argument("--mode", choices=["analysis", "inference"], default="analysis")
    parser.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    for flag, default in [("runs", 3), ("batch", 16), ("seq-len", 256), ("seed", 0)]:
        parser.add_argument(f"--{flag}", type=int, default=default)
    args = parser.parse_args()
    cfg, w, load_s = open_model(args)
    ids = random_ids(args.batch, args.seq_len, cfg["vocab_size"], args.seed)
    times = []
    with torch.no_grad():
        for run in range(args.runs):
            t0 = time.perf_counter()
            logits, probs, hidden = forward(cfg, w, ids, keep=args.mode == "analysis")
            times.append(time.perf_counter() - t0)
            if run == 0:  # after the clock, on one sequence: whether this is hf_forward's model
                loss = F.cross_entropy(logits[0, :-1].float(), ids[0, 1:]).item()
            captured_probs, captured, logits_gb = gb(probs), gb(probs) + gb(hidden), gb([logits])
            del logits, probs, hidden
    L, H, B, T = cfg["num_hidden_layers"], cfg["num_attention_heads"], args.batch, args.seq_len
    print(json.dumps({"impl": f"pytorch-{torch.__version__}", "mode": args.mode, "weights": args.dtype,
                      "compute": args.dtype, "threads": torch.get_num_threads(), "openblas_core": openblas_core(),
                      "batch": B, "seq_len": T,
                      "runs": args.runs, "times_s": [round(t, 3) for t in times],
                      "median_s": round(sorted(times)[len(times) // 2], 3), "load_s": round(load_s, 2),
                      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9, 3),
                      "weights_gb": round(gb(w.values()), 3), "probs_f32_gb": round(4 * L * H * B * T * T / 1e9, 3),
                      "captured_probs_gb": round(captured_probs, 3), "captured_gb": round(captured, 3),
                      "logits_gb": round(logits_gb, 3), "loss": round(loss, 4)}))


if __name__ == "__main__":
    main()

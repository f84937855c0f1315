#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/hf_folder/: the Hugging Face folder fuzzer's seeds and one input per finding.

    python3 tests/fuzz/make_hf_corpus.py

Each file is one folder in the fuzzer's format (tests/fuzz/hf_folder.h): config.json, the
index, model.safetensors, model-1.safetensors, ... one after the other, cut at lines "====",
an empty part for a file that is not there. The seeds are tiny Qwen3 models (hidden size 8,
one or two layers) that load: no gate, head-wise and element-wise gates, both gate layouts,
bfloat16 and tied embeddings, YaRN, two shards with an index. Every other file is a seed with
one thing broken, named after the finding it reproduces (finding_...); each must load or end
in a clean one-line error (tests/fuzz/test_fuzz_corpus.cpp checks that in the default suite).
"""
import json
import os
import random
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus", "hf_folder")
BREAK = b"\n====\n"

SIZES = {"hidden_size": 8, "intermediate_size": 12, "num_attention_heads": 2, "num_key_value_heads": 1,
         "head_dim": 4, "vocab_size": 16}


def config(**fields):
    c = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": 1,
         "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False,
         "torch_dtype": "float32", "hidden_act": "silu", "use_qk_norm": True, **SIZES}
    c.update(fields)
    return c


def tensors(c):
    """Every tensor of a Qwen3 model of config c, as (name, shape), in HF's names."""
    d, ff, h, kv, dk, v = (c[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                          "num_key_value_heads", "head_dim", "vocab_size"))
    w = 1 if c.get("headwise_attn_output_gate") else dk if c.get("elementwise_attn_output_gate") else 0
    out = [("model.embed_tokens.weight", [v, d])]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", [d]), (p + "self_attn.q_proj.weight", [h * (dk + w), d]),
                (p + "self_attn.k_proj.weight", [kv * dk, d]), (p + "self_attn.v_proj.weight", [kv * dk, d]),
                (p + "self_attn.o_proj.weight", [d, h * dk]), (p + "self_attn.q_norm.weight", [dk]),
                (p + "self_attn.k_norm.weight", [dk]), (p + "post_attention_layernorm.weight", [d]),
                (p + "mlp.gate_proj.weight", [ff, d]), (p + "mlp.up_proj.weight", [ff, d]),
                (p + "mlp.down_proj.weight", [d, ff])]
    out.append(("model.norm.weight", [d]))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", [v, d]))
    return out


def values(name, shape, rng):
    n = 1
    for s in shape:
        n *= s
    if name.endswith("norm.weight"):
        return [1.0 + 0.1 * rng.uniform(-1, 1) for _ in range(n)]
    return [0.3 * rng.uniform(-1, 1) for _ in range(n)]


def encode(xs, dtype):
    raw = struct.pack(f"<{len(xs)}f", *xs)
    if dtype == "F32":
        return raw
    # BF16: the upper half of each float32 (truncated; any bf16 value will do for a seed)
    return b"".join(raw[i + 2 : i + 4] for i in range(0, len(raw), 4))


def safetensors(entries):
    """A safetensors file from [(name, dtype, shape, bytes)]."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def weights(c, seed=0):
    rng = random.Random(seed)
    dtype = "BF16" if c["torch_dtype"] == "bfloat16" else "F32"
    return [(name, dtype, shape, encode(values(name, shape, rng), dtype)) for name, shape in tensors(c)]


def folder(c, files, index=None):
    """The fuzzer's input: config.json, the index (or none), then the safetensors files."""
    parts = [json.dumps(c, indent=1).encode(), json.dumps(index).encode() if index else b""] + files
    return BREAK.join(parts)


def single(c, entries=None):
    return folder(c, [safetensors(entries if entries is not None else weights(c))])


def sharded(c, first, second, index_map=None):
    """Two shards (model-1, model-2) and an index placing each tensor where it is, or as given."""
    placed = {e[0]: "model-1.safetensors" for e in first}
    placed.update({e[0]: "model-2.safetensors" for e in second})
    index = {"metadata": {"total_size": sum(len(e[3]) for e in first + second)}, "weight_map": index_map or placed}
    return folder(c, [b"", safetensors(first), safetensors(second)], index)


def write(name, blob):
    with open(os.path.join(CORPUS, name), "wb") as f:
        f.write(blob)


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    os.makedirs(CORPUS)

    # --- the seeds: models that load ---
    plain = config()
    write("seed_plain", single(plain))
    write("seed_headwise", single(config(headwise_attn_output_gate=True, num_hidden_layers=2)))
    write("seed_elementwise_bf16_tied",
          single(config(elementwise_attn_output_gate=True, torch_dtype="bfloat16", tie_word_embeddings=True)))
    write("seed_interleaved", single(config(elementwise_attn_output_gate=True, gatedgrad_gate_layout="interleaved")))
    write("seed_yarn", single(config(rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                   "original_max_position_embeddings": 16})))
    w = weights(plain)
    write("seed_sharded", sharded(plain, w[:6], w[6:]))

    # --- one input per finding ---
    # a tensor in two shards, the second copy where the index does not place it
    write("finding_tensor_in_two_shards", sharded(plain, w[:6] + [w[-1]], w[6:]))
    # an index placing a tensor in a shard that does not hold it
    moved = {e[0]: "model-1.safetensors" for e in w}
    write("finding_index_places_missing_tensor", sharded(plain, w[:6], w[6:], moved))
    # an index naming files outside the folder, the folder itself, or nothing
    # found while fuzzing: a name with a newline reached the error message raw
    for label, name in [("parent", "../model-2.safetensors"), ("dotdot", ".."), ("absolute", "/dev/zero"),
                        ("empty", ""), ("newline", "model-2.safet\nsors")]:
        outside = {e[0]: "model-1.safetensors" for e in w[:6]}
        outside.update({e[0]: name for e in w[6:]})
        write(f"finding_index_names_{label}", sharded(plain, w[:6], w[6:], outside))
    # a config of Qwen3-0.6B's sizes over the seed's 2 KB of weights: refused before allocating
    big = config(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, vocab_size=151936)
    write("finding_config_larger_than_files", folder(big, [safetensors(w)]))
    # JSON of many sibling objects (quadratic with a per-value callback), in the config and a header
    wide = dict(plain, **{f"unused_{i}": {} for i in range(8000)})
    write("finding_config_of_many_objects", single(wide))
    extra = [(f"extra.{i}", "U8", [0], b"") for i in range(1500)]
    write("finding_header_of_many_tensors", single(plain, w + extra))
    # weights that are not what the config says
    write("finding_weight_f16", single(plain, [(n, "F16" if i == 2 else d, s, r[: len(r) // 2] if i == 2 else r)
                                               for i, (n, d, s, r) in enumerate(w)]))
    write("finding_mixed_dtypes", single(plain, w[:-1] + [(w[-1][0], "BF16", w[-1][2], w[-1][3][: len(w[-1][3]) // 2])]))
    nan = struct.pack("<f", float("nan"))
    write("finding_nan_weight", single(plain, [w[0][:3] + (nan + w[0][3][4:],)] + w[1:]))
    write("finding_missing_tensor", single(plain, w[:4] + w[5:]))
    write("finding_extra_tensor", single(plain, w + [("model.layers.7.mlp.up_proj.weight", "F32", [1], bytes(4))]))
    write("finding_max_len_one", single(config(max_position_embeddings=1)))

    total = sum(os.path.getsize(os.path.join(CORPUS, f)) for f in os.listdir(CORPUS))
    print(f"wrote {len(os.listdir(CORPUS))} files, {total} bytes, to {CORPUS}")


if __name__ == "__main__":
    main()

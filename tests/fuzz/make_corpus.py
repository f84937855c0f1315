#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/checkpoint/: the checkpoint fuzzer's seeds and one regression file per hostile input.

    python3 tests/fuzz/make_corpus.py build/apps/gatedgrad

The seeds are real: a tiny run trained with the app (model, AdamW state, trainer state and
both configs in the metadata), the same model alone, and a few plain safetensors files.
Every other file is one of those with one thing broken, named after the finding it
reproduces (issue<N>_...). Each must load or end in a clean one-line error
(tests/fuzz/test_fuzz_corpus.cpp checks that in the default suite). Keep the whole corpus
under 1 MB: nesting beyond 64 levels is refused, so only one file needs the 100k levels that
once overflowed the stack.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus", "checkpoint")


def pack(header_text, data=b""):
    """A safetensors file from the header's exact text and the data section."""
    raw = header_text.encode("utf-8", "surrogateescape") if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(raw)) + raw + data


def unpack(blob):
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8 : 8 + n]), blob[8 + n :]


def repack(header, data):
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    return pack(text, data)


def write(name, blob):
    with open(os.path.join(CORPUS, name), "wb") as f:
        f.write(blob)


def with_data(header, data, tensor, new_bytes):
    """data with `tensor`'s first bytes replaced."""
    begin = header[tensor]["data_offsets"][0]
    return data[:begin] + new_bytes + data[begin + len(new_bytes) :]


def with_config(header, tensor_data, key, **fields):
    """The file with fields of the JSON config stored under metadata `key` changed."""
    h = json.loads(json.dumps(header))
    config = json.loads(h["__metadata__"][key])
    config.update(fields)
    h["__metadata__"][key] = json.dumps(config)
    return repack(h, tensor_data)


def nested(depth):
    return "[" * depth + "]" * depth


def main():
    app = sys.argv[1] if len(sys.argv) > 1 else "build/apps/gatedgrad"
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    os.makedirs(CORPUS)

    # --- the seeds ---
    work = tempfile.mkdtemp()
    corpus_text = os.path.join(work, "corpus.txt")
    with open(corpus_text, "w") as f:
        for i in range(40):
            f.write(f"Fortune {i}: the quick brown fox jumps over the lazy dog.\n%\n")
    config = {"model": {"d_model": 4, "n_layers": 1, "n_heads": 2, "max_len": 8, "d_ff": 8, "tie_embeddings": True},
              "batch_size": 2, "seq_len": 8, "steps": 2, "warmup": 0, "eval_every": 2, "eval_batches": 1,
              "data": [corpus_text]}
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f)
    subprocess.run([app, "train", "--config", os.path.join(work, "config.json"), "--quiet", "--out",
                    os.path.join(work, "run")], check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    with open(os.path.join(work, "run", "model.safetensors"), "rb") as f:
        trained = f.read()
    shutil.rmtree(work)
    header, data = unpack(trained)
    # The run's temp folder in its train config would differ at every run of this script.
    trained = with_config(header, data, "train_config", data=["corpus.txt"], out_dir="run")
    header, data = unpack(trained)
    write("seed_trained.safetensors", trained)

    model = {k: v for k, v in header.items() if not k.startswith(("optim.", "trainer."))}
    model["__metadata__"] = {"config": header["__metadata__"]["config"]}
    write("seed_model_only.safetensors", repack(model, data))
    write("seed_empty.safetensors", pack("{}"))
    write("seed_metadata_only.safetensors", pack(json.dumps({"__metadata__": {"config": "{}", "note": "x"}})))
    dtypes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I8": 1, "U8": 1, "BOOL": 1}
    entries, offset = {}, 0
    for name, size in dtypes.items():
        entries[name.lower()] = {"dtype": name, "shape": [2], "data_offsets": [offset, offset + 2 * size]}
        offset += 2 * size
    write("seed_all_dtypes.safetensors", repack(entries, bytes(range(offset))))
    write("seed_train_config.json", header["__metadata__"]["train_config"].encode())
    write("seed_lm_config.json", header["__metadata__"]["config"].encode())

    # --- regressions, one finding each ---
    w = '{"w":{"dtype":%s,"shape":%s,"data_offsets":%s}}'
    # 1: sizes whose product overflows
    write("issue1_shape_overflow.safetensors", pack(w % ('"F32"', "[4611686018427387904,4]", "[0,0]")))
    write("issue1_config_d_model_2e62.safetensors", with_config(header, data, "config", d_model=4611686018427387904))
    write("issue1_train_d_model_2e62.json", json.dumps({"model": {"d_model": 4611686018427387904, "n_heads": 1}}).encode())
    # 2: nesting that overflowed the stack of a recursive printer (100k levels in one file)
    write("issue2_nested_shape.safetensors", pack(w % ('"F32"', nested(100000), "[0,0]")))
    write("issue2_nested_dtype.safetensors", pack(w % (nested(20000), "[2]", "[0,8]"), bytes(8)))
    write("issue2_nested_offsets.safetensors", pack(w % ('"F32"', "[2]", nested(20000)), bytes(8)))
    write("issue2_nested_metadata.safetensors", pack('{"__metadata__":{"config":%s}}' % nested(20000)))
    deep_config = json.loads(json.dumps(header))
    deep_config["__metadata__"]["config"] = '{"d_model":%s}' % nested(20000)
    write("issue2_nested_config.safetensors", repack(deep_config, data))
    write("issue2_nested_config.json", ('{"model":' * 5000 + "{}" + "}" * 5000).encode())
    # 3: configs that allocated gigabytes before anything was checked
    write("issue3_n_layers_1e6.safetensors", with_config(header, data, "config", n_layers=1000000))
    write("issue3_d_model_1e6.safetensors", with_config(header, data, "config", d_model=1000000))
    write("issue3_vocab_2e40.safetensors", with_config(header, data, "config", vocab_size=2**40))
    write("issue3_experts_1e9.safetensors", with_config(header, data, "config", n_experts=1000000000))
    write("issue3_memory_3TB.safetensors", with_config(header, data, "config", n_layers=1024, d_model=8192))
    write("issue3_train_batch.safetensors", with_config(header, data, "train_config", batch_size=65536, seq_len=1 << 20))
    write("issue3_n_layers_float.json", b'{"model": {"n_layers": 1e300}}')
    # 4: a number past double, and names given twice
    write("issue4_number_overflow.safetensors", pack(w % ('"F32"', "[1e3088]", "[0,8]"), bytes(8)))
    write("issue4_duplicate_tensor.safetensors",
          pack('{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
               bytes(2)))
    write("issue4_duplicate_config_key.safetensors",
          pack('{"__metadata__":{"config":"{\\"n_layers\\":1,\\"n_layers\\":2}"}}'))
    # 7: values a checkpoint could still get wrong
    nan, inf = struct.pack("<f", float("nan")), struct.pack("<f", float("inf"))
    write("issue7_nan_weight.safetensors", repack(header, with_data(header, data, "tok_emb.weight", nan)))
    write("issue7_inf_moment.safetensors", repack(header, with_data(header, data, "optim.exp_avg_sq.0", inf)))
    write("issue7_negative_step.safetensors", repack(header, with_data(header, data, "trainer.step", struct.pack("<q", -5))))
    write("issue7_huge_optim_step.safetensors",
          repack(header, with_data(header, data, "optim.step.0", struct.pack("<q", 2**62))))
    write("issue7_zero_sampler.safetensors", repack(header, with_data(header, data, "trainer.sampler", bytes(32))))
    # 8: accepted bad input, and bytes that reached error lines raw
    write("issue8_negative_log_every.safetensors", with_config(header, data, "train_config", log_every=-1, ckpt_every=-1))
    write("issue8_seed_negative.json", b'{"seed": -1}')
    write("issue8_non_utf8_name.safetensors", pack(b'{"w\xff\xfe":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}'))
    write("issue8_control_chars.safetensors", pack(w % ('"\\u001b[2J\\u0007"', "[2]", "[0,8]"), bytes(8)))
    write("issue8_long_name.safetensors", pack('{"%s":5}' % ("n" * 20000)))
    # found while fuzzing: a valid one-byte tensor of 10k dims put 20 KB into every message
    write("fuzz_many_dims.safetensors", pack(w % ('"U8"', "[" + ",".join(["1"] * 10000) + "]", "[0,1]"), bytes(1)))

    total = sum(os.path.getsize(os.path.join(CORPUS, f)) for f in os.listdir(CORPUS))
    print(f"wrote {len(os.listdir(CORPUS))} files, {total} bytes, to {CORPUS}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/tokenizer/: the seeds of fuzz_tokenizer and one file per hostile
tokenizer input found (load_tokenizer.h says what each file holds).

    python3 tests/fuzz/make_tokenizer_corpus.py

The seeds are small byte-level tokenizers in the layouts of Qwen2/3 (a Split regex, NFC),
GPT-2 (ByteLevel's own regex, add_prefix_space, merges as pairs) and DeepSeek-V3 (three
Split steps, normalized added tokens), each followed by two zero bytes and a text. The other
files are one of them with one thing broken, named after what they reproduce.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "tokenizer")
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
MERGES = [("h", "e"), ("t", "h"), ("th", "e"), (" ", "t"), (" t", "he"), ("i", "n"), ("in", "g"), ("a", "a"), ("aa", "aa")]


def alphabet():
    """GPT-2's byte alphabet: printable bytes as themselves, the others from U+0100."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(0x100 + extra)
            extra += 1
    return chars


def spell(text):
    a = alphabet()
    return "".join(a[b] for b in text.encode("utf-8"))


def tokenizer(splits=(QWEN2,), nfc=True, gpt2=False, added=None):
    vocab = {alphabet()[b]: b for b in range(256)}
    for i, (a, b) in enumerate(MERGES):
        vocab[spell(a + b)] = 256 + i
    byte_level = {"type": "ByteLevel", "add_prefix_space": gpt2, "trim_offsets": False, "use_regex": gpt2}
    steps = [{"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False} for r in splits]
    merges = [[spell(a), spell(b)] if gpt2 else f"{spell(a)} {spell(b)}" for a, b in MERGES]
    return {
        "version": "1.0",
        "added_tokens": added if added is not None else [
            {"id": 300, "content": "<|endoftext|>", "special": True, "normalized": False},
            {"id": 301, "content": "<think>", "special": False, "normalized": True}],
        "normalizer": {"type": "NFC"} if nfc else None,
        "pre_tokenizer": byte_level if gpt2 else {"type": "Sequence", "pretokenizers": steps + [byte_level]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "ignore_merges": gpt2, "vocab": vocab, "merges": merges},
    }


def write(name, file, text=None):
    data = (json.dumps(file, ensure_ascii=False) if isinstance(file, dict) else file).encode("utf-8")
    if text is not None:
        data += b"\0\0" + (text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    sample = "the thing<|endoftext|> I'll 12 caf\u0065\u0301 <think> aaaa\n\n  你好"
    write("seed_qwen2_nfc.json", tokenizer(), sample)
    write("seed_gpt2_prefix.json", tokenizer(nfc=False, gpt2=True), sample)
    deepseek = [r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", r"[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]
    write("seed_deepseek_splits.json", tokenizer(splits=deepseek, nfc=False), sample + " 12345 日本語")
    # One finding each (issue 41).
    write("issue41_splits_17.json", tokenizer(splits=[QWEN2] * 17), sample)
    write("issue41_regex_budget.json", tokenizer(splits=[r"\p{L}*\p{L}*!|x"]), ("a" * 200 + "x") * 100)
    write("issue41_word_past_64k.json", tokenizer(), "a" * 70000)
    overlap = [{"id": 300 + i, "content": c, "special": True} for i, c in enumerate(["ab", "bcd", "abc", "b", "<b>"])]
    overlap.append({"id": 310, "content": "a<b", "special": False, "normalized": True})
    write("issue41_added_overlap.json", tokenizer(added=overlap), "abcd xbcd a<b> a<b abab")
    write("issue41_added_twice.json", tokenizer(added=overlap + [{"id": 311, "content": "ab", "special": True}]), "ab")
    # The streamed tables' edges: a key the scan cannot see, tables of the wrong shape, a cut file.
    text = json.dumps(tokenizer(), ensure_ascii=False)
    write("vocab_key_escaped.json", text.replace('"vocab"', '"voc\\u0061b"', 1), sample)
    write("vocab_not_object.json", text.replace('"vocab": {', '"vocab": [{', 1).replace('}, "merges"', '}], "merges"', 1), sample)
    nested = tokenizer()
    nested["model"]["merges"].append([["h", "e"], "x"])
    write("merges_nested.json", nested, sample)
    write("truncated.json", text[: len(text) // 2])


if __name__ == "__main__":
    main()

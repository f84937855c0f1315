"""A byte-level BPE tokenizer written apart from gatedgrad's (nn/text/bpe.h), which must
give the same ids, id for id.

Run from the repository root with Debian's Python (meson's test `bpe_reference` does):

    /usr/bin/python3 tests/reference/bpe_reference.py build/tests/test_bpe

It learns merges from part of its corpus, writes three tokenizer.json files around them
(Qwen2's Split regex, ByteLevel and NFC; GPT-2's ByteLevel regex without a normalizer; GPT-2's
with add_prefix_space, ignore_merges and the [a, b] form of merges), and a corpus: text in
many scripts, emoji, whitespace runs, contractions, digits, random code points, bytes that
are not UTF-8, and up to 400 KB of fortunes where /usr/share/games/fortunes has them. The
strings are joined by <|endoftext|>, so that one run of test_bpe encodes them all and its ids
split back into one list per string. test_bpe's case "bpe: the ids of a file" encodes the
corpus with each file and decodes its ids; this script's own tokenizer encodes every string,
and any difference in the ids or the decoded bytes fails the test.

The tokenizer here follows the published definitions, not gatedgrad's code: GPT-2's
encoder.py (its byte alphabet, and BPE as "merge every occurrence of the best-ranked pair,
repeat"), Hugging Face's tokenizer.json fields, Python's own UTF-8 decoder for what is not
UTF-8, `unicodedata` for NFC and the `regex` module for \\p{L}. The one rule that is
gatedgrad's own is how bytes that are not UTF-8 are read (bpe.h): each is a token of its own
and ends the text around it. Here that is Python's "surrogateescape": each such byte decodes
to one lone surrogate U+DC80 + (byte - 0x80), which splits the text.

Exit status: 0 the same, 1 a difference, 77 (meson's "skipped") where `regex` is missing.
"""
import collections
import json
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import unicodedata

try:
    import regex
except ImportError:
    sys.exit(77)

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_alphabet():
    """GPT-2's bytes_to_unicode: printable bytes as themselves, the others from U+0100."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(0x100 + extra)
            extra += 1
    return chars


ALPHABET = byte_alphabet()
FROM_ALPHABET = {c: b for b, c in ALPHABET.items()}


def spell(data: bytes) -> str:
    return "".join(ALPHABET[b] for b in data)


def isolated(pattern, text):
    """Hugging Face's Split with behavior Isolated: the matches and the text between them."""
    pieces, last = [], 0
    for m in pattern.finditer(text):
        if m.end() == m.start():
            continue
        if m.start() > last:
            pieces.append(text[last:m.start()])
        pieces.append(m.group())
        last = m.end()
    if last < len(text):
        pieces.append(text[last:])
    return pieces


class Tokenizer:
    def __init__(self, config):
        model = config["model"]
        assert model["type"] == "BPE"
        self.vocab = model["vocab"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.ignore_merges = model.get("ignore_merges", False)
        self.added = {t["content"]: t["id"] for t in config.get("added_tokens") or []}
        longest_first = sorted(self.added, key=len, reverse=True)
        self.added_pattern = re.compile(b"|".join(re.escape(t.encode()) for t in longest_first))
        self.nfc = (config["normalizer"] or {}).get("type") == "NFC"
        pre = config["pre_tokenizer"]
        steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
        self.splits = [regex.compile(s["pattern"]["Regex"]) for s in steps if s["type"] == "Split"]
        byte_level = steps[-1]
        assert byte_level["type"] == "ByteLevel"
        self.add_prefix_space = byte_level["add_prefix_space"]
        self.byte_level_regex = regex.compile(GPT2_REGEX) if byte_level.get("use_regex", True) else None
        self.token_bytes = {i: bytes(FROM_ALPHABET[c] for c in t) for t, i in self.vocab.items()}
        self.token_bytes.update({i: t.encode() for t, i in self.added.items()})
        self.cache = {}

    def bpe(self, word):
        """GPT-2's encoder.py: merge every occurrence of the best-ranked pair, then look again."""
        if self.ignore_merges and word in self.vocab:
            return [word]
        if word in self.cache:
            return self.cache[word]
        symbols = list(word)
        while len(symbols) > 1:
            best = min(zip(symbols, symbols[1:]), key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        self.cache[word] = symbols
        return symbols

    def words(self, text):
        """The pre-tokens of valid text, in the byte alphabet."""
        if self.nfc:
            text = unicodedata.normalize("NFC", text)
        pieces = [text]
        for split in self.splits:
            pieces = [part for piece in pieces for part in isolated(split, piece)]
        if self.add_prefix_space:
            pieces = [p if p.startswith(" ") else " " + p for p in pieces]
        if self.byte_level_regex:
            pieces = [part for piece in pieces for part in isolated(self.byte_level_regex, piece)]
        return [spell(p.encode()) for p in pieces]

    def encode_ordinary(self, data: bytes):
        ids = []
        text = data.decode("utf-8", "surrogateescape")
        for run in re.findall("[\udc80-\udcff]|[^\udc80-\udcff]+", text):
            if "\udc80" <= run <= "\udcff":
                ids.append(self.vocab[ALPHABET[ord(run) - 0xDC00]])
                continue
            for word in self.words(run):
                ids.extend(self.vocab[token] for token in self.bpe(word))
        return ids

    def encode(self, data: bytes):
        ids, last = [], 0
        for m in self.added_pattern.finditer(data):
            ids += self.encode_ordinary(data[last:m.start()])
            ids.append(self.added[m.group().decode()])
            last = m.end()
        return ids + self.encode_ordinary(data[last:])

    def decode(self, ids):
        return b"".join(self.token_bytes[i] for i in ids)


# ---------------------------------------------------------------- the corpus

HANDWRITTEN = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "你好，世界。我们今天去公园吧！中文没有空格，所以一个词可以很长很长很长。",
    "مرحبا بالعالم، كيف حالك؟ هذا نص عربي.",
    "नमस्ते दुनिया, आप कैसे हैं? यह हिंदी पाठ है।",
    "Ça va très bien, merci. Grüße aus Köln. ñandú, Ångström, naïve café",
    "Ca\u0327 va tre\u0300s bien. Gru\u0308\u00dfe aus Ko\u0308ln. A\u030angstro\u0308m cafe\u0301",  # decomposed
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af",  # Hangul jamo, composed by NFC
    "Привет, мир! Ελληνικά κείμενα. 日本語のテキスト。한국어 텍스트. עברית ภาษาไทย",
    "👨‍👩‍👧‍👦 family, 👍🏽 thumbs, 🏳️‍🌈 flag, 🇯🇵🇫🇷 flags, 🧑🏿‍🚀 astronaut, ❤️‍🔥",
    "  \n\n\t  x \r\n\r\n  \t\t y   ",
    "\n", "\n\n\n\n", "   ", " ", "\t", "\r\n", " \n \n ", "a\n\n b", "x  ", "  x", "\u00a0\u3000 x",
    "I'll, you'd, we're, they've, I'm, DON'T, She'S, WE'RE, they'Ve, it's, 'tis",
    "0123456789 3.14159 1,000,000 ١٢٣ ٤٥٦ ⅻ ½ ²³ 𝟘𝟙",
    "nul\0byte", "tab\there", "<html><body class=\"x\">&amp;</body></html>",
    "def f(x):\n    return x ** 2  # square\n\n\nprint(f(3))\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "<|im_start|<|im_end|><|im_", "www.example.com/path?query=1&x=y#frag", "e-mail: someone@example.org",
    "ſ ﬁ ﬀ K Å", "\u0085next line\u2028line sep\u2029para\u200bzero width\u180emongolian",
]

INVALID = [b"\xff", b"\x80", b"a\x80b", b"\xc3", b"\xc3(", b"\xe4\xbd", b"\xe4\xbdx", b"\xc0\xaf",
           b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe\xff",
           "caf\u00e9".encode() + b"\xff the", b"  \xff  ", b"the\xe2\x82 end", "你".encode()[:2] + "好".encode(),
           b"\n\x80\n", b"'s\xffll", "e".encode() + b"\x80" + "\u0301".encode()]


def random_code_points(rng, n):
    """Strings of assigned code points (in this Python's Unicode), from ASCII to the astral planes."""
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F),
              (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2070, 0x2BFF), (0x3000, 0x30FF),
              (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF), (0x1D400, 0x1D7FF)]
    out = []
    while len(out) < n:
        chars = []
        for _ in range(rng.randint(1, 24)):
            lo, hi = rng.choice(ranges)
            c = chr(rng.randint(lo, hi))
            if unicodedata.category(c) not in ("Cn", "Cs", "Co"):
                chars.append(c)
        out.append("".join(chars))
    return out


def random_spacing(rng, n):
    """Strings that lean on the regexes' whitespace rules: runs, lookahead, newlines after symbols."""
    parts = [" ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u0085", "\u180e", "\u2028", "\u200b", "\x1c",
             "\x0b", "x", "é", "1", "'", "'s", "!", "—", "你"]
    return ["".join(rng.choice(parts) for _ in range(rng.randint(1, 16))) for _ in range(n)]


def random_bytes(rng, n):
    out = []
    for i in range(n):
        length = rng.randint(1, 64)
        if i % 2:
            out.append(bytes(rng.randrange(256) for _ in range(length)))
        else:  # mostly ASCII with stray high bytes, which sometimes make valid sequences
            out.append(bytes(rng.choice([rng.randrange(0x20, 0x7F), rng.randrange(0x80, 0x100)]) for _ in range(length)))
    return out


def fortunes(limit):
    folder = pathlib.Path("/usr/share/games/fortunes")
    texts, size = [], 0
    for path in sorted(folder.glob("*")) if folder.is_dir() else []:
        if path.suffix in (".dat", ".u8") or not path.is_file():
            continue
        for text in path.read_bytes().split(b"\n%\n"):
            if size >= limit:
                return texts
            texts.append(text)
            size += len(text)
    return texts


def corpus():
    rng = random.Random(1)
    strings = [s.encode() for s in HANDWRITTEN] + INVALID
    strings += [s.encode() for s in random_code_points(rng, 300) + random_spacing(rng, 300)]
    strings += random_bytes(rng, 300) + fortunes(400_000)
    separator = SPECIALS[0].encode()
    strings = [s for s in strings if separator not in s]
    return strings, separator.join(strings)


# ---------------------------------------------------------------- tokenizer.json files


def learn_merges(words, count):
    """Plain BPE training on word counts (Sennrich et al. 2016), in the byte alphabet."""
    symbols = {tuple(w): c for w, c in words.items()}
    merges = []
    for _ in range(count):
        pairs = collections.Counter()
        for word, c in symbols.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        joined = {}
        for word, c in symbols.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            joined[tuple(out)] = joined.get(tuple(out), 0) + c
        symbols = joined
    return merges


def tokenizer_files(strings):
    """Three tokenizer.json files that share a vocabulary learned from part of the corpus."""
    qwen_pre = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    counts = collections.Counter()
    splitter = regex.compile(QWEN2_REGEX)
    for s in strings[:3000]:
        for run in re.findall("[^\udc80-\udcff]+", s.decode("utf-8", "surrogateescape")):
            counts.update(spell(p.encode()) for p in isolated(splitter, unicodedata.normalize("NFC", run)))
    common = dict(counts.most_common(2500))
    merges = learn_merges(common, 700)

    # GPT-2's own order of the byte tokens (printable bytes first), not byte order.
    vocab = {}
    for c in sorted(ALPHABET.values(), key=lambda c: (ord(c) >= 0x100, ord(c))):
        vocab[c] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    # Whole words no merge makes: only ignore_merges reaches them.
    for word in list(common)[:100]:
        vocab.setdefault(word, len(vocab))
    added = [{"id": len(vocab) + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(SPECIALS)]

    def file(pre_tokenizer, normalizer, merge_form, ignore_merges):
        return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": None,
                "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
                "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                          "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                          "ignore_merges": ignore_merges, "vocab": vocab, "merges": [merge_form(m) for m in merges]}}

    gpt2_pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "qwen2": file(qwen_pre, {"type": "NFC"}, lambda m: f"{m[0]} {m[1]}", False),
        "gpt2": file(gpt2_pre, None, lambda m: f"{m[0]} {m[1]}", False),
        "gpt2_prefix_space": file({**gpt2_pre, "add_prefix_space": True}, None, list, True),
    }


def main(test_binary):
    strings, text = corpus()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        text_path = os.path.join(tmp, "corpus.txt")
        pathlib.Path(text_path).write_bytes(text)
        for name, config in tokenizer_files(strings).items():
            tokenizer_path = os.path.join(tmp, name + ".json")
            pathlib.Path(tokenizer_path).write_text(json.dumps(config, ensure_ascii=False))
            run = subprocess.run([test_binary, "--no-intro", "--test-case=bpe: the ids of a file*"],
                                 env={**os.environ, "GG_BPE_TOKENIZER": tokenizer_path, "GG_BPE_TEXT": text_path,
                                      "GG_BPE_OUT": tmp},
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(run.stdout, run.stderr)
                return 1
            speed = run.stdout.splitlines()[0]
            ids = [int(i) for i in pathlib.Path(tmp, "ids.txt").read_text().split()]
            decoded = pathlib.Path(tmp, "decoded.bin").read_bytes()

            reference = Tokenizer(config)
            separator = reference.added[SPECIALS[0]]
            theirs, current = [], []
            for i in ids:
                if i == separator:
                    theirs.append(current)
                    current = []
                else:
                    current.append(i)
            theirs.append(current)
            ours = [reference.encode(s) for s in strings]
            mine = [i for k, s in enumerate(ours) for i in ([separator] if k else []) + s]
            differ = [k for k in range(len(strings)) if k >= len(theirs) or theirs[k] != ours[k]]
            if len(theirs) != len(strings):
                print(f"{name}: test_bpe's ids split into {len(theirs)} texts, not {len(strings)}")
            for k in differ[:5]:
                print(f"{name}: string {k} {strings[k][:120]!r}\n  reference {ours[k][:40]}\n  gatedgrad "
                      f"{theirs[k][:40] if k < len(theirs) else None}")
            if reference.encode(text) != mine:
                print(f"{name}: the reference's ids for the joined corpus are not its ids for each string")
                differ.append(-1)
            if decoded != reference.decode(mine):
                print(f"{name}: test_bpe's decoded bytes differ from the reference's ({len(decoded)} and "
                      f"{len(reference.decode(mine))} bytes)")
                differ.append(-1)
            failures += len(differ)
            print(f"{name}: {len(strings) - len(differ)} of {len(strings)} strings ({len(text)} bytes, "
                  f"{len(ids)} ids) alike; test_bpe {speed}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""The whole-text loss of a Hugging Face Qwen3 folder as Hugging Face's perplexity guide computes
it ("Perplexity of fixed-length models", transformers' documentation), written apart from
gatedgrad, against which `gatedgrad eval --hf DIR --data FILE...` is checked (test_app_hf.cpp).

    /usr/bin/python3 tests/reference/hf_eval.py loss DIR FILE... [--window W] [--stride S]
    /usr/bin/python3 tests/reference/hf_eval.py make

The text is the files' bytes one after another, tokenized once by bpe_reference.py's tokenizer
from DIR/tokenizer.json (these folders' post-processor puts no BOS first). Windows of W tokens
(default: config.json's max_position_embeddings) start every S tokens (default W // 2); the
first window scores each of its tokens after the first, every later one only the tokens past the
previous window's end, the last window ending at the text's end. So each token but the first
is scored once, with at least W - S tokens of left context where the text has them. The loss is
the mean negative log-likelihood over the scored tokens, from hf_qwen3.py's float64 forward.
(The guide weights each window's mean by its count of labels less one, one fewer than a later
window scores; here every scored token counts once, the exact mean.)

`loss` prints {"tokens", "scored", "windows", "window", "stride", "loss"} as JSON. `make`
writes tests/reference/hf/eval_reference.json: for the baseline, headwise and elementwise
folders, each case eval's test runs (its files, eval's arguments) with those numbers
(make_hf_fixtures.sh runs it).
"""
import argparse
import json
import pathlib
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # meson reads 77 as "skipped"
    sys.exit(77)

import bpe_reference
import hf_qwen3

HERE = pathlib.Path(__file__).resolve().parent
TEXTS = ["tests/reference/text/eval_a.txt", "tests/reference/text/eval_b.txt"]
# (files, window, stride): the defaults on a text of several windows; two files; a window and
# stride of one's own (eval's --seq-len and --stride); a text shorter than one window.
CASES = [([TEXTS[0]], None, None), (TEXTS, None, None), ([TEXTS[0]], 48, 16), ([TEXTS[1]], None, None)]


def strided_loss(directory, paths, window=None, stride=None):
    directory = pathlib.Path(directory)
    tokenizer_json = json.loads((directory / "tokenizer.json").read_text())
    if (tokenizer_json.get("post_processor") or {}).get("type", "ByteLevel") != "ByteLevel":
        raise SystemExit(f"{directory}: a post-processor that puts a BOS first is not read here")
    cfg, weights = hf_qwen3.load_checkpoint(directory)
    text = b"".join(pathlib.Path(p).read_bytes() for p in paths)
    ids = torch.tensor(bpe_reference.Tokenizer(tokenizer_json).encode(text), dtype=torch.int64)
    W = window or json.loads((directory / "config.json").read_text())["max_position_embeddings"]
    S = stride or W // 2
    total, scored, windows, previous_end = 0.0, 0, 0, 0
    for begin in range(0, len(ids), S):
        end = min(begin + W, len(ids))
        window_ids = ids[begin:end]
        logits = hf_qwen3.forward(cfg, weights, window_ids[None])["logits"][0]      # (T, V)
        nll = F.cross_entropy(logits[:-1], window_ids[1:], reduction="none")        # (T - 1)
        new = end - max(previous_end, begin + 1)                                    # tokens first seen here
        total += nll[-new:].sum().item()
        scored += new
        windows += 1
        previous_end = end
        if end == len(ids):
            break
    return {"tokens": len(ids), "scored": scored, "windows": windows, "window": W, "stride": S, "loss": total / scored}


def make():
    out = {}
    for name in ["baseline", "headwise", "elementwise"]:
        out[name] = [{"files": files, "args": ["--seq-len", str(window), "--stride", str(stride)] if window else [],
                      "reference": strided_loss(f"tests/reference/hf/{name}", files, window, stride)}
                     for files, window, stride in CASES]
    (HERE / "hf" / "eval_reference.json").write_text(json.dumps(out, indent=1) + "\n")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    loss = commands.add_parser("loss", help="the strided loss of DIR on FILE...")
    loss.add_argument("dir")
    loss.add_argument("files", nargs="+")
    loss.add_argument("--window", type=int)
    loss.add_argument("--stride", type=int)
    commands.add_parser("make", help="write tests/reference/hf/eval_reference.json")
    args = parser.parse_args(argv)
    torch.set_grad_enabled(False)
    if args.command == "make":
        make()
    else:
        print(json.dumps(strided_loss(args.dir, args.files, args.window, args.stride)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

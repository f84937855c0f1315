"""The PyTorch peer of bench/decode.cpp: greedy decoding of a Hugging Face Qwen3 checkpoint with a
KV cache, written plainly in torch (Debian's 1.13 has no `transformers`), on the same prompt, with
decode's JSON fields.

    /usr/bin/python3 bench/decode_torch.py DIR THREADS [--dtype bf16|f32] [--runs 1]
        [--prompt 512] [--tokens 128] [--seed 0]
    → one JSON line, with decode's fields

The model is bench/hf_forward_torch.py's forward with its cache (transformers' DynamicCache: each
layer's keys and values concatenated with the new ones at every step), driven the way
transformers' greedy search drives it: the prompt in one pass, then each drawn token alone. The
time to the first token is the prompt's pass and its argmax; tokens/s counts the next --tokens
passes, timed as they go. Like decode (nn::generate) and transformers' generate, a pass computes
the logits of its last position only.
"""
import argparse
import json
import os
import pathlib
import resource
import sys
import time

if __name__ == "__main__":
    # as in hf_forward_torch.py: OpenBLAS reads its pool's size once, when torch loads it
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[2] if len(sys.argv) > 2 else "1"
import torch  # noqa: E402

from hf_forward_torch import forward, gb, open_model, openblas_core, random_ids  # noqa: E402


def decode(cfg, w, prompt, n):
    """Greedy: the time to the first token, the tokens/s of the next n, and all 1 + n ids."""
    cache = []
    t0 = time.perf_counter()
    logits = forward(cfg, w, prompt, keep=False, cache=cache, last_only=True)[0]  # (1, 1, V)
    tokens = [int(logits[0, -1].argmax())]
    ttft = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        logits = forward(cfg, w, torch.tensor([[tokens[-1]]]), keep=False, cache=cache, last_only=True)[0]  # (1, 1, V)
        tokens.append(int(logits[0, -1].argmax()))
    return ttft, n / (time.perf_counter() - t0), tokens, gb(t for kv in cache for t in kv)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=pathlib.Path)
    parser.add_argument("threads", type=int)
    parser.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    for flag, default in [("runs", 1), ("prompt", 512), ("tokens", 128), ("seed", 0)]:
        parser.add_argument(f"--{flag}", type=int, default=default)
    args = parser.parse_args()
    cfg, w, load_s = open_model(args)
    prompt = random_ids(1, args.prompt, cfg["vocab_size"], args.seed)
    ttfts, rates = [], []
    with torch.no_grad():
        for _ in range(args.runs):
            ttft, rate, tokens, cache_gb = decode(cfg, w, prompt, args.tokens)
            ttfts.append(round(ttft, 3))
            rates.append(round(rate, 3))
    median = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    print(json.dumps({"impl": f"pytorch-{torch.__version__}", "weights": args.dtype, "compute": args.dtype,
                      "threads": torch.get_num_threads(), "openblas_core": openblas_core(), "prompt": args.prompt,
                      "tokens": args.tokens, "runs": args.runs, "ttft_s": ttfts, "median_ttft_s": median(ttfts),
                      "tok_s": rates, "median_tok_s": median(rates), "load_s": round(load_s, 2),
                      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9, 3),
                      "weights_gb": round(gb(w.values()), 3), "cache_gb": round(cache_gb, 3),
                      "first_ids": tokens[:16]}))


if __name__ == "__main__":
    main()

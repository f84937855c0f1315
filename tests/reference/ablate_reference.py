"""The losses `gatedgrad ablate` prints, before and after each of its interventions, computed
apart from gatedgrad on a Hugging Face Qwen3 folder: bpe_reference.py's tokenizer, hf_qwen3.py's
float64 forward, and each intervention written here as an edit of that forward (test_app_hf.cpp
runs ablate on the same folders and text and compares).

    /usr/bin/python3 tests/reference/ablate_reference.py make

The text is cut into 4 sequences of 20 tokens side by side, as `ablate --seq-len 19 --batch 4`
reads it, no BOS (these folders' tokenizer puts none first), all four in one forward pass. Both
losses are the mean cross-entropy of each sequence's x_2 … x_19:
    before   the model on x_0 … x_{N−2}
    after    the model on the same ids, or x_1 … x_18 (--drop-first), or with x_0 replaced
             (--swap-first), under the edits:
    --force-gate V        every σ(gate) set to V
    --zero-heads L.H      head H's output before o_proj in layer L set to 0; with --mean-heads
                          to its mean over the batch and positions
    --clamp-massive M     in every layer's output, the values with |h| > max(min, ratio × median |h|)
                          (the median the upper middle value, |h| over the whole batch) set to 0
                          (zero) or to the batch's mean at their position and channel (mean)
`make` writes tests/reference/hf/ablate_reference.json: per case its folder, ablate's arguments
and the two losses.
"""
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
TEXT = "tests/reference/text/eval_b.txt"
WINDOWS = ["--seq-len", "19", "--batch", "4"]
MASSIVE = ["--massive-min", "0", "--massive-ratio", "4"]
# (folder, ablate's arguments past --hf, --data and WINDOWS)
CASES = [("headwise", ["--force-gate", "1"]),
         ("elementwise", ["--force-gate", "0.25"]),
         ("baseline", ["--drop-first"]),
         ("baseline", ["--swap-first", "the"]),
         ("elementwise", ["--zero-heads", "0.1,1.3"]),
         ("headwise", ["--zero-heads", "1.2", "--mean-heads"]),
         ("baseline", ["--clamp-massive", "zero"] + MASSIVE),
         ("elementwise", ["--clamp-massive", "mean"] + MASSIVE)]


def massive(h, least, ratio):
    size = h.abs()
    median = size.flatten().sort().values[size.numel() // 2]
    return size > max(least, ratio * median.item())


def edit_of(args):
    """The forward's edit for ablate's arguments."""
    def option(name, default=None):
        return args[args.index(name) + 1] if name in args else default

    def edit(name, layer, t):
        if name == "gate" and "--force-gate" in args:
            return torch.full_like(t, float(option("--force-gate")))
        if name == "z" and "--zero-heads" in args:
            for item in option("--zero-heads").split(","):
                l, h = map(int, item.split("."))
                if l == layer:
                    t = t.clone()
                    t[:, :, h] = t[:, :, h].mean(dim=(0, 1)) if "--mean-heads" in args else 0
        if name == "hidden" and "--clamp-massive" in args:
            mask = massive(t, float(option("--massive-min")), float(option("--massive-ratio")))
            value = torch.zeros_like(t) if option("--clamp-massive") == "zero" else t.mean(0, keepdim=True).expand_as(t)
            t = torch.where(mask, value, t)
        return t
    return edit


def losses(directory, args):
    directory = pathlib.Path(directory)
    cfg, weights = hf_qwen3.load_checkpoint(directory)
    tokenizer = bpe_reference.Tokenizer(json.loads((directory / "tokenizer.json").read_text()))
    text = torch.tensor(tokenizer.encode(pathlib.Path(TEXT).read_bytes()), dtype=torch.int64)
    ids = text[:80].view(4, 20)                                                      # (4, 20)
    targets = ids[:, 2:]

    def loss(inputs, edit=hf_qwen3.keep):
        logits = hf_qwen3.forward(cfg, weights, inputs, edit)["logits"][:, -targets.shape[1]:]
        return F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1)).item()

    if "--clamp-massive" in args:  # how many values count, and how near the threshold the nearest is
        hidden = hf_qwen3.forward(cfg, weights, ids[:, :-1])["hidden.0"]
        size, mask = hidden.abs(), massive(hidden, 0, 4)
        median = size.flatten().sort().values[size.numel() // 2]
        print(f"{directory.name}: {int(mask.sum())} massive of {mask.numel()} in layer 0, the nearest "
              f"{(size / (4 * median) - 1).abs().min().item():.2e} from the threshold", file=sys.stderr)

    changed = ids[:, :-1]
    if "--drop-first" in args:
        changed = ids[:, 1:-1]
    if "--swap-first" in args:
        token = tokenizer.encode(args[args.index("--swap-first") + 1].encode())
        assert len(token) == 1
        changed = changed.clone()
        changed[:, 0] = token[0]
    return {"tokens": len(text), "before": loss(ids[:, :-1]), "after": loss(changed, edit_of(args))}


def main():
    torch.set_grad_enabled(False)
    out = [{"folder": folder, "args": WINDOWS + args, "reference": losses(f"tests/reference/hf/{folder}", args)}
           for folder, args in CASES]
    (HERE / "hf" / "ablate_reference.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["make"]:
        sys.exit(__doc__)
    main()

"""The PyTorch peer of bench/train_step.cpp: the same model (tests/reference/torch_lm.py),
shapes, optimiser and clipping, timed the same way. f32 (the default) trains in float32;
bf16 runs the forward under torch.autocast(dtype=torch.bfloat16), as train_step's
--precision bf16 runs it under gg::Autocast: the parameters, their gradients and AdamW's
moments stay float32 in both.

    /usr/bin/python3 bench/train_step_torch.py CONFIG_JSON BATCH SEQ_LEN THREADS [STEPS] [cpu|cuda] [f32|bf16]
"""
import json
import os
import pathlib
import sys
import time

# Debian's torch multiplies through OpenBLAS, whose own thread pool torch.set_num_threads does
# not size: left alone it takes every core, and a "1-thread" step ran its GEMMs on 2. The pool
# reads its size once, when the library loads, so it is set before torch is imported.
os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[4]
import torch  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "reference"))
from torch_lm import LM  # noqa: E402

config, B, T, threads = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
steps = int(sys.argv[5]) if len(sys.argv) > 5 else 20
device = sys.argv[6] if len(sys.argv) > 6 else "cpu"
precision = sys.argv[7] if len(sys.argv) > 7 else "f32"
if precision not in ("f32", "bf16"):
    sys.exit(f"precision {precision!r}: f32 or bf16")
torch.set_num_threads(threads)
torch.manual_seed(0)
model = LM(config).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
ids = torch.randint(config["vocab_size"], (B, T), device=device)
targets = torch.randint(config["vocab_size"], (B, T), device=device)


def sync():
    if device == "cuda":
        torch.cuda.synchronize()  # a GPU step has ended when its kernels have


times = []
for step in range(steps + 3):  # the first 3 steps warm up
    sync()
    t0 = time.perf_counter()
    with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = model(ids, targets)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sync()
    if step >= 3:
        times.append((time.perf_counter() - t0) * 1000)
times.sort()
median = times[len(times) // 2]
print(json.dumps({"impl": f"pytorch-{torch.__version__}", "device": device, "threads": threads, "precision": precision, "median_ms": round(median, 2),
                  "tokens_per_s": round(B * T / median * 1000)}))

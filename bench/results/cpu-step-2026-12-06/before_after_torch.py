# before/after/torch, 1 thread, interleaved rounds; prints per-shape medians and ratio medians
import json, os, statistics, subprocess, sys
rounds, steps = int(sys.argv[1]), int(sys.argv[2])
before, after, src = sys.argv[3], sys.argv[4], sys.argv[5]
shapes = [("tiny", "tiny --batch 16"), ("small", "small --batch 16"),
          ("4x128 h4 T128 B32", "small --layers 4 --d-model 128 --heads 4 --seq-len 128 --batch 32"),
          ("1x128 h1 T64 B64", "small --layers 1 --d-model 128 --heads 1 --seq-len 64 --batch 64"),
          ("8x64 h4 T128 B32", "small --layers 8 --d-model 64 --heads 4 --seq-len 128 --batch 32"),
          ("6x256 h8 T256 B16", "small --layers 6 --d-model 256 --heads 8 --seq-len 256 --batch 16")]
env = dict(os.environ, OMP_NUM_THREADS="1")
def gg(binary, args):
    out = subprocess.run([binary] + args.split() + [str(steps)], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["median_ms"]
rows = []
for name, args in shapes:
    config = subprocess.run([after] + args.split() + ["--config"], capture_output=True, text=True, check=True).stdout.strip()
    B = args.split()[args.split().index("--batch") + 1]
    T = str(json.loads(config)["max_len"])
    b, a, t = [], [], []
    for r in range(rounds):
        b.append(gg(before, args)); a.append(gg(after, args))
        out = subprocess.run(["/usr/bin/python3", src + "/bench/train_step_torch.py", config, B, T, "1", str(steps)],
                             capture_output=True, text=True, check=True).stdout
        t.append(json.loads(out.strip().splitlines()[-1])["median_ms"])
    med = statistics.median
    row = (name, med(b), med(a), med(t), med(x / z for x, z in zip(b, t)), med(y / z for y, z in zip(a, t)),
           med(y / x for x, y in zip(b, a)), min(y / x for x, y in zip(b, a)), max(y / x for x, y in zip(b, a)))
    rows.append(row)
    print("| %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.3f (%.3f–%.3f) |" % row, flush=True)
import math
g = lambda i: math.exp(sum(math.log(r[i]) for r in rows) / len(rows))
print("| geometric mean | | | | %.2f | %.2f | %.3f |" % (g(4), g(5), g(6)))

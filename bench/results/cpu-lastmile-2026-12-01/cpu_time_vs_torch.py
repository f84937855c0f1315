"""CPU time per training step of gatedgrad and of PyTorch, 1 thread each, over the six shapes
of bench/compare_train_step.sh, alternated round by round.

    python3 bench/results/cpu-lastmile-2026-12-01/cpu_time_vs_torch.py TRAIN_STEP ROUNDS STEPS   (from the repository root)

A step's time is (task-clock of STEPS steps − task-clock of 1 step) / (STEPS − 1), as in
cpu_time_ab.py: the process's own CPU time, all its threads counted, which a loaded machine
inflates far less than wall time. bench/train_step_torch.py keeps OpenBLAS to its thread count.
"""
import json
import os
import statistics
import subprocess
import sys

train_step, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
shapes = [("tiny", "tiny --batch 16"), ("small", "small --batch 16"),
          ("4x128 h4 T128 B32", "small --layers 4 --d-model 128 --heads 4 --seq-len 128 --batch 32"),
          ("1x128 h1 T64 B64", "small --layers 1 --d-model 128 --heads 1 --seq-len 64 --batch 64"),
          ("8x64 h4 T128 B32", "small --layers 8 --d-model 64 --heads 4 --seq-len 128 --batch 32"),
          ("6x256 h8 T256 B16", "small --layers 6 --d-model 256 --heads 8 --seq-len 256 --batch 16")]
env = dict(os.environ, OMP_NUM_THREADS="1")


def task_clock_ms(command):
    run = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", *command], env=env, capture_output=True,
                         text=True, check=True)
    return float(next(l for l in run.stderr.splitlines() if "task-clock" in l).split(",")[0])


def per_step(command):
    return (task_clock_ms(command + [str(steps)]) - task_clock_ms(command + ["1"])) / (steps - 1)


ratios_of_shapes = []
for name, flags in shapes:
    args = flags.split()
    config = subprocess.run([train_step, *args, "--config"], capture_output=True, text=True, check=True).stdout.strip()
    batch, seq_len = args[args.index("--batch") + 1], str(json.loads(config)["max_len"])
    gg, torch = [], []
    for _ in range(rounds):
        gg.append(per_step([train_step, *args]))
        torch.append(per_step(["/usr/bin/python3", "bench/train_step_torch.py", config, batch, seq_len, "1"]))
    ratio = statistics.median(g / t for g, t in zip(gg, torch))
    ratios_of_shapes.append(ratio)
    print(f"| {name:18s} | {statistics.median(gg):8.1f} | {statistics.median(torch):8.1f} | {ratio:5.2f} |", flush=True)
print(f"geometric mean of the ratios: {statistics.geometric_mean(ratios_of_shapes):.2f}")

"""CPU time per training step of two train_step builds (base, then new), alternated round by round.

    python3 cpu_time_ab.py BEFORE AFTER ROUNDS STEPS ARGS...   (ARGS: train_step's preset and shape flags)

On a shared machine a step's wall time counts the time other processes held the core; the
process's task-clock (perf stat) counts only its own. The time of one step is
(task-clock of a run of STEPS steps − task-clock of a run of 1 step) / (STEPS − 1), which takes
the model's set-up and the warm-up steps out. THREADS sets OMP_NUM_THREADS (default 1).
"""
import json
import os
import statistics
import subprocess
import sys

before, after, rounds, steps, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("THREADS", "1"))


def task_clock_ms(binary, n):
    run = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", binary, *args, str(n)], env=env,
                         capture_output=True, text=True, check=True)
    line = next(l for l in run.stderr.splitlines() if "task-clock" in l)
    return float(line.split(",")[0]), json.loads(run.stdout)["median_ms"]


cpu = {before: [], after: []}
wall = {before: [], after: []}
for r in range(rounds):
    for binary in (before, after) if r % 2 == 0 else (after, before):
        one, _ = task_clock_ms(binary, 1)
        many, median = task_clock_ms(binary, steps)
        cpu[binary].append((many - one) / (steps - 1))
        wall[binary].append(median)
ratios = [a / b for a, b in zip(cpu[after], cpu[before])]
base, new = statistics.median(cpu[before]), statistics.median(cpu[after])
print(f"{' '.join(args)}: cpu ms/step base {base:.1f} new {new:.1f} new/base {new / base:.3f} "
      f"(median of per-round ratios {statistics.median(ratios):.3f}); "
      f"wall median base {statistics.median(wall[before]):.1f} new {statistics.median(wall[after]):.1f}")

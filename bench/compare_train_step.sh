#!/usr/bin/env bash
# One training step (forward + backward + clipping + AdamW) of the tiny and small presets:
# gatedgrad vs PyTorch (Debian's 1.13) on the same model and shapes, in one run. Both run
# at 1 thread and at N threads (on a loaded 2-core machine more threads can be far
# slower), and the ratio compares each one's best.
#   bench/compare_train_step.sh [N threads, default nproc] [steps]   (needs tools/setup --torch)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
steps=${2:-20}
tools/build
median() { sed 's/.*"median_ms": \([0-9.]*\).*/\1/'; }
printf '%-6s %10s %10s %10s %10s %16s\n' preset "gg 1t" "gg ${threads}t" "torch 1t" "torch ${threads}t" "gg/torch (best)"
for preset in tiny small; do
  config=$(build/bench/train_step "$preset" --config)
  T=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['max_len'])" "$config")
  B=16
  g1=$(OMP_NUM_THREADS=1 build/bench/train_step "$preset" "$steps" | median)
  t1=$(/usr/bin/python3 bench/train_step_torch.py "$config" "$B" "$T" 1 "$steps" | median)
  gn=$(OMP_NUM_THREADS=$threads build/bench/train_step "$preset" "$steps" | median)
  tn=$(/usr/bin/python3 bench/train_step_torch.py "$config" "$B" "$T" "$threads" "$steps" | median)
  ratio=$(python3 -c "print(f'{min($g1, $gn) / min($t1, $tn):.2f}')")
  printf '%-6s %10s %10s %10s %10s %16s\n' "$preset" "$g1" "$gn" "$t1" "$tn" "$ratio"
done

#!/usr/bin/env bash
# One training step of the tiny and small presets: gatedgrad vs PyTorch (Debian's 1.13) on
# the same model and shapes, in one run, alternating the two so that machine noise hits
# both. PyTorch runs at 1 thread and at our thread count; the ratio uses its best.
#   bench/compare_train_step.sh [threads] [steps]      (needs tools/setup --torch)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
steps=${2:-20}
tools/build
printf '%-6s %-8s %12s %14s %14s %14s\n' preset threads "gatedgrad ms" "torch ms (1t)" "torch ms (${threads}t)" "ours/torch-best"
for preset in tiny small; do
  config=$(build/bench/train_step "$preset" --config)
  B=$( [[ $preset == tiny ]] && echo 16 || echo 16 )
  T=$( [[ $preset == tiny ]] && echo 64 || echo 128 )
  ours=$(OMP_NUM_THREADS=$threads build/bench/train_step "$preset" "$steps" | sed 's/.*"median_ms": \([0-9.]*\).*/\1/')
  t1=$(/usr/bin/python3 bench/train_step_torch.py "$config" "$B" "$T" 1 "$steps" | sed 's/.*"median_ms": \([0-9.]*\).*/\1/')
  tn=$(/usr/bin/python3 bench/train_step_torch.py "$config" "$B" "$T" "$threads" "$steps" | sed 's/.*"median_ms": \([0-9.]*\).*/\1/')
  best=$(python3 -c "print(min($t1, $tn))")
  printf '%-6s %-8s %12s %14s %14s %14.2f\n' "$preset" "$threads" "$ours" "$t1" "$tn" "$(python3 -c "print($ours / $best)")"
done

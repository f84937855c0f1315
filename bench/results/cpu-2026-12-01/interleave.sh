#!/usr/bin/env bash
# Two builds of bench/train_step and PyTorch 1.13 in interleaved rounds (before, after,
# PyTorch, then again), one training step per shape as in bench/compare_train_step.sh, so
# that a shared machine's drift falls on all three alike. Each ratio is the median over
# rounds of that round's ratio, with its range over the rounds.
#   BEFORE=path/train_step AFTER=path/train_step interleave.sh [rounds] [steps] [threads]
set -uo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-3}; steps=${2:-3}; threads=${3:-1}
before=${BEFORE:?path to the earlier build\'s train_step}; after=${AFTER:?path to the later build\'s train_step}
shapes=(
  "tiny|tiny --batch 16"
  "small|small --batch 16"
  "4x128 h4 T128 B32|small --layers 4 --d-model 128 --heads 4 --seq-len 128 --batch 32"
  "1x128 h1 T64 B64|small --layers 1 --d-model 128 --heads 1 --seq-len 64 --batch 64"
  "8x64 h4 T128 B32|small --layers 8 --d-model 64 --heads 4 --seq-len 128 --batch 32"
  "6x256 h8 T256 B16|small --layers 6 --d-model 256 --heads 8 --seq-len 256 --batch 16"
)
med() { sed 's/.*"median_ms": \([0-9.]*\).*/\1/'; }
for entry in "${shapes[@]}"; do
  name=${entry%%|*}; read -r -a args <<<"${entry#*|}"
  config=$("$after" "${args[@]}" --config)
  B=$(python3 -c "import sys; a=sys.argv[1:]; print(a[a.index('--batch')+1])" "${args[@]}")
  T=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['max_len'])" "$config")
  b=() n=() t=()
  for ((r=0;r<rounds;r++)); do
    b+=("$(OMP_NUM_THREADS=$threads "$before" "${args[@]}" "$steps" | med)")
    n+=("$(OMP_NUM_THREADS=$threads "$after" "${args[@]}" "$steps" | med)")
    t+=("$(/usr/bin/python3 bench/train_step_torch.py "$config" "$B" "$T" "$threads" "$steps" | med)")
  done
  python3 - "$name" "${b[*]}" "${n[*]}" "${t[*]}" <<'PY'
import statistics as st, sys
name=sys.argv[1]; b,n,t=([float(x) for x in a.split()] for a in sys.argv[2:])
rb=[x/y for x,y in zip(b,t)]; rn=[x/y for x,y in zip(n,t)]; nb=[x/y for x,y in zip(n,b)]
print(f"| {name:18s} | before {st.median(b):7.1f} | after {st.median(n):7.1f} | torch {st.median(t):7.1f} | before/torch {st.median(rb):.2f} ({min(rb):.2f}-{max(rb):.2f}) | after/torch {st.median(rn):.2f} ({min(rn):.2f}-{max(rn):.2f}) | after/before {st.median(nb):.3f} ({min(nb):.3f}-{max(nb):.3f}) |", flush=True)
PY
done

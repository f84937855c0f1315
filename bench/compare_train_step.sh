#!/usr/bin/env bash
# One training step (forward + backward + clipping + AdamW) of the same model (the presets'
# G1-gated LM: RoPE, RMSNorm, SwiGLU) in gatedgrad and in PyTorch (Debian's 1.13), at 1 and
# 2 threads, over six shapes. A shared machine's speed drifts from minute to minute, so the
# two run in interleaved rounds (gatedgrad, then PyTorch, then again), and each cell is the
# median over rounds of that round's gatedgrad/PyTorch time ratio: below 1 is faster.
#   bench/compare_train_step.sh [rounds, default 3] [steps per run, default 5]   (needs tools/setup --torch)
# GG_BUILD=dir times an existing build there instead of building ./build.
set -euo pipefail
. "$(dirname "$0")/../tools/lib/arguments.sh"
(($# <= 2)) || refuse "takes at most rounds and steps"
for n in "$@"; do [[ $n =~ ^[1-9][0-9]*$ ]] || refuse "rounds and steps are counts, not $n"; done
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-5}
build=${GG_BUILD:-build}
[[ -n ${GG_BUILD:-} ]] || tools/build
median_ms() { sed 's/.*"median_ms": \([0-9.]*\).*/\1/'; }
flag_value() {  # flag_value --batch ARGS...: the word after --batch
  local want=$1; shift
  while (($#)); do [[ $1 == "$want" ]] && { echo "$2"; return; }; shift; done
}

# name | train_step arguments (a preset, then shape flags; --batch always, for the PyTorch side)
shapes=(
  "tiny|tiny --batch 16"
  "small|small --batch 16"
  "4x128 h4 T128 B32|small --layers 4 --d-model 128 --heads 4 --seq-len 128 --batch 32"
  "1x128 h1 T64 B64|small --layers 1 --d-model 128 --heads 1 --seq-len 64 --batch 64"
  "8x64 h4 T128 B32|small --layers 8 --d-model 64 --heads 4 --seq-len 128 --batch 32"
  "6x256 h8 T256 B16|small --layers 6 --d-model 256 --heads 8 --seq-len 256 --batch 16"
)

printf '| %-18s | %7s | %8s | %5s | %7s | %8s | %5s | %13s |\n' shape "gg 1t" "torch 1t" "ratio" "gg 2t" "torch 2t" \
  "ratio" "gg 1t/2t"
printf '|%s|\n' "--------------------|---------|----------|-------|---------|----------|-------|---------------"
for entry in "${shapes[@]}"; do
  name=${entry%%|*}
  read -r -a args <<<"${entry#*|}"
  config=$("$build/bench/train_step" "${args[@]}" --config)
  B=$(flag_value --batch "${args[@]}")
  T=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['max_len'])" "$config")
  row=()
  for threads in 1 2; do
    gg=() torch=()
    for ((r = 0; r < rounds; r++)); do
      gg+=("$(OMP_NUM_THREADS=$threads "$build/bench/train_step" "${args[@]}" "$steps" | median_ms)")
      torch+=("$(/usr/bin/python3 bench/train_step_torch.py "$config" "$B" "$T" "$threads" "$steps" | median_ms)")
    done
    row+=("$(python3 - "${gg[*]}" "${torch[*]}" <<'EOF'
import statistics, sys
gg, torch = ([float(x) for x in a.split()] for a in sys.argv[1:])
print(statistics.median(gg), statistics.median(torch), statistics.median(g / t for g, t in zip(gg, torch)))
EOF
)")
  done
  read -r g1 t1 r1 <<<"${row[0]}"
  read -r g2 t2 r2 <<<"${row[1]}"
  printf '| %-18s | %7.1f | %8.1f | %5.2f | %7.1f | %8.1f | %5.2f | %13.2f |\n' "$name" "$g1" "$t1" "$r1" "$g2" "$t2" \
    "$r2" "$(python3 -c "print($g1 / $g2)")"
done

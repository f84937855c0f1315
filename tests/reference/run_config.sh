#!/usr/bin/env bash
# Writes run_config.json, the config.json of a run whose every train option is away from its
# default, for test_config_fields.cpp: a config.json written before the settings had rows must
# load as it was and be written back byte for byte. Kept as the program wrote it then; rerun
# only to check what an older program writes: run_config.sh BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")"
app=$(realpath "${1:-../../build}")/apps/gatedgrad
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 40); do printf 'Fortune number %d: the quick brown fox jumps over the lazy dog.\n%%\n' "$i"; done >"$tmp/corpus.txt"
OMP_NUM_THREADS=1 "$app" train --quiet --out "$tmp/run" --data "$tmp/corpus.txt" \
  --attn scores-x --gate-fn tanh --gate-sharing headwise --gate-init normal --kv-heads 2 --qk-norm --window 8 \
  --positions learned --layers 1 --d-model 32 --heads 8 --no-ffn --experts 2 --top-k 1 \
  --steps 2 --batch 2 --seq-len 16 --lr 0.01 --warmup 1 --weight-decay 0.05 --independent-wd --z-loss 0.0001 \
  --precision bf16 --clip 0.5 --seed 7 --eval-every 1 --probe-every 1 --ckpt-every 1 --ckpt-minutes 1 \
  --val-fraction 0.2 --split bytes >/dev/null
cp "$tmp/run/config.json" run_config.json

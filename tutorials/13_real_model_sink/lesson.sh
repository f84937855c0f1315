#!/usr/bin/env bash
# lesson.sh — the steps of tutorial 13's lesson (README.md) with the app, one after another, each
# command printed before its output: the sink report of a baseline and of a gated model, the gate
# forced open, the first token removed, the logit lens, and the page of a prompt.
#
#   tutorials/13_real_model_sink/lesson.sh GATEDGRAD BASELINE GATED TEXT PAGES [SINK_OPTIONS...]
#
# BASELINE and GATED are model folders (the authors' 1B_baseline and 1B_gate_elementwise, or the
# tests' random ones), TEXT a text file, PAGES the folder the pages go to; SINK_OPTIONS are given
# to every command that reads TEXT (the tests' models read short windows: --seq-len 12).
# meson test runs it on the random models and compares its output with README.md.
set -euo pipefail
[[ $# -ge 5 ]] || { echo "usage: lesson.sh GATEDGRAD BASELINE GATED TEXT PAGES [SINK_OPTIONS...]" >&2; exit 2; }
app=$1 baseline=$2 gated=$3 text=$4 pages=$5
shift 5
mkdir -p "$pages"

# Prints the command as one would type it (a word with spaces in quotes), then runs it.
step() {
  local line="\$ gatedgrad" word
  for word in "$@"; do
    [[ $word == *" "* ]] && word="'$word'"
    line+=" $word"
  done
  printf '\n%s\n' "$line"
  "$app" "$@"
}

# 1. Where the attention goes, without and with the gate.
step sink --hf "$baseline" --data "$text" "$@"
step sink --hf "$gated" --data "$text" "$@"
# 2. The paper's ablation: every gate set to 1, the gated model read as if it had none.
step ablate --hf "$gated" --data "$text" --force-gate 1 "$@"
# 3. The baseline without its first token: does it need the sink it made there?
step ablate --hf "$baseline" --data "$text" --drop-first "$@"
# 4. What each layer would predict: the logit lens.
step lens --hf "$baseline" --prompt "The first token of a text" --top-k 3
# 5. The pictures: every layer's and head's attention over a prompt, the gate beside it.
step report --hf "$baseline" --prompt "The first token of a text" --out "$pages/baseline.html"
step report --hf "$gated" --prompt "The first token of a text" --out "$pages/gated.html"

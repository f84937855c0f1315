#!/usr/bin/env bash
# The 1-layer 1-head runs behind part (a2)'s choices (README.md, "How we got to (a2)"), with
# PyTorch's init and the 4-successor task of that time: each line trains a baseline/G1 pair
# of one variant. Output: a_variants.txt next to this script. About 10 minutes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../../.."
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
run() {
  echo "\$ tutorial_06_attention_sink --part a --a-models 1x1 $*"
  build/tutorials/tutorial_06_attention_sink --part a --a-models 1x1 --a-init torch --a-concentration 0 \
    --a-triggers 3 --a-ffn false --a-warmup 30 --a-seeds 1 "$@" | grep -v " step "
  echo
}
{
  run --a-setup a1 --a-seq-len 16 --a-batch 64 --a-steps 2000 --a-weight-decay 0  # (a2) but own key visible
  run --a-setup a2 --a-seq-len 32 --a-batch 32                                      # (a2) at length 32
  run --a-setup a2 --a-seq-len 64 --a-batch 16                                      # (a2) at length 64
  run --a-setup a2 --a-weight-decay 0.1                                             # (a2) with weight decay
} | tee "$here/a_variants.txt"

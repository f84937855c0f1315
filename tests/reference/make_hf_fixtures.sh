#!/usr/bin/env bash
# Writes the Hugging Face layout checkpoints test_hf.cpp loads, each with the float64
# reference.safetensors of hf_qwen3.py or, for the hybrids, hf_hybrid.py (Debian's python3-torch):
# tests/reference/hf/NAME.
# baseline, headwise and elementwise also get a tokenizer.json (python3-regex) whose 279 ids
# stop short of the model's 300 rows, as a real Qwen3's do, for the commands that read text, and
# a context of 128 positions, which eval's strided windows cross on a text of a few hundred tokens.
# Deterministic (fixed seeds); rerun after changing hf_qwen3.py and commit the result.
set -euo pipefail
cd "$(dirname "$0")"
out=hf
rm -rf "$out"
make() { /usr/bin/python3 hf_qwen3.py make "$out/$1" --vocab 96 "${@:2}" >/dev/null; }
make baseline      --gate none        --seed 1 --vocab 300 --tokenizer 20 --context 128
make headwise      --gate headwise    --seed 2 --vocab 300 --tokenizer 20 --context 128
make elementwise   --gate elementwise --seed 3 --vocab 300 --tokenizer 20 --context 128
make interleaved   --gate elementwise --gate-layout interleaved --seed 3
make tied_bf16     --gate elementwise --tied --dtype bf16 --seed 4
make sharded_mqa   --gate headwise    --kv-heads 1 --shards 3 --seed 5
make no_qk_norm    --gate none        --heads 4 --kv-heads 4 --head-dim 12 --no-qk-norm --layers 3 --seed 6
# The hybrids of Qwen3-Next and Qwen3.5: hf/qwen3_5 (with a tokenizer.json) and hf/qwen3_next.
/usr/bin/python3 hf_hybrid.py make >/dev/null
# eval's whole-text loss on tests/reference/text/, computed as Hugging Face's perplexity guide does.
(cd ../.. && /usr/bin/python3 tests/reference/hf_eval.py make)
# ablate's losses before and after each intervention, as edits of hf_qwen3.py's forward.
(cd ../.. && /usr/bin/python3 tests/reference/ablate_reference.py make)
du -sh "$out"

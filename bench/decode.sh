#!/usr/bin/env bash
# Decoding with a KV cache, gatedgrad against PyTorch (Debian's 1.13): a random-weights
# checkpoint of Qwen3-0.6B's exact shape (hidden 1024, FFN 3072, 28 layers, 16 query heads of
# 128, 8 KV heads, vocabulary 151936, tied embeddings, QK-norm, BF16 files, ~1.2 GB), run by
# bench/decode (nn::generate, as `gatedgrad sample --hf` runs it: bf16 weights, Autocast(bf16))
# and bench/decode_torch.py (f32, and bf16 as transformers runs it) on the same 512-token prompt:
# the time to the first token, then the tokens/s of 128 greedy tokens. Each program runs in a
# process of its own (peak RSS is a process's high-water mark); a shared machine's speed drifts,
# so within each round the programs alternate at each thread count, and a ratio is the median
# over rounds of that round's gatedgrad/PyTorch ratio.
#
#   bench/decode.sh [rounds, default 2] [thread counts, default 1 2]
#   → every program's JSON line (bench/results/decode-*.txt keeps them), then a table
#
# PEERS="f32 bf16" (the default) names the PyTorch dtypes to run: PyTorch 1.13's bfloat16
# matmul is slow on a CPU without AVX-512 (minutes for the prompt), so PEERS=f32 leaves it out.
# DECODE_ARGS="--prompt 32 --tokens 8" passes flags to both programs (a quick check);
# HF_DIR=dir times another checkpoint (made there when absent); GG_BUILD=dir an existing build.
# OPENBLAS_CORETYPE in the environment picks OpenBLAS's kernels for both programs.
set -euo pipefail
. "$(dirname "$0")/../tools/lib/arguments.sh"
for n in "$@"; do [[ $n =~ ^[1-9][0-9]*$ ]] || refuse "rounds and thread counts are counts, not $n"; done
cd "$(dirname "$0")/.."
rounds=${1:-2}
shift $(($# > 0 ? 1 : 0))
threads=("${@:-1}")
(($# > 0)) || threads=(1 2)
peers=${PEERS:-f32 bf16}
for peer in $peers; do [[ $peer == f32 || $peer == bf16 ]] || refuse "PEERS holds f32 and bf16, not $peer"; done
read -ra args <<<"${DECODE_ARGS:-}"
dir=${HF_DIR:-/tmp/qwen3-0.6b-shape}
build=${GG_BUILD:-build}
[[ -n ${GG_BUILD:-} ]] || flock /tmp/gg-build.lock ninja -C "$build" bench/decode >/dev/null
if [[ ! -f $dir/config.json ]]; then
  /usr/bin/python3 tests/reference/hf_qwen3.py make "$dir" --hidden 1024 --ffn 3072 --layers 28 --heads 16 \
    --kv-heads 8 --head-dim 128 --vocab 151936 --tied --dtype bf16 --no-reference
fi

lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
run() { "$@" | tee -a "$lines"; }
echo "# load before: $(uptime)"
for ((r = 0; r < rounds; r++)); do
  for t in "${threads[@]}"; do
    run env OMP_NUM_THREADS="$t" "$build/bench/decode" "$dir" "${args[@]}"
    for dtype in $peers; do
      run /usr/bin/python3 bench/decode_torch.py "$dir" "$t" --dtype "$dtype" "${args[@]}"
    done
  done
done
echo "# load after: $(uptime)"

python3 - "$lines" "$rounds" <<'EOF'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rounds = int(sys.argv[2])
def pick(threads, impl, weights):
    return [l for l in lines if l["threads"] == threads and l["impl"].startswith(impl) and l["weights"].startswith(weights)]
def agree(a, b):  # how many first generated ids are the same
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
peers = [w for w in ("f32", "bf16") if any(l["weights"] == w for l in lines)]
print("\nttft: time to the first token (s), lower is better; tok/s higher is better; a ratio is ours / PyTorch's")
print("| threads | ours ttft | ours tok/s | " + " | ".join(
    f"PyTorch {p} ttft | ttft ratio | PyTorch {p} tok/s | tok/s ratio | ids agree" for p in peers)
    + " | ours peak RSS (GB) | weights + cache + 10% (GB) |")
print("|---" * (5 + 5 * len(peers)) + "|")
for threads in sorted({l["threads"] for l in lines}):
    ours = pick(threads, "gatedgrad", "bfloat16")
    med = lambda rows, key: statistics.median(r[key] for r in rows)
    row = f"| {threads} | {med(ours, 'median_ttft_s'):.2f} | {med(ours, 'median_tok_s'):.2f} |"
    for p in peers:
        peer = pick(threads, "pytorch", p)
        ratio = lambda key: statistics.median(o[key] / q[key] for o, q in zip(ours, peer))
        row += (f" {med(peer, 'median_ttft_s'):.2f} | {ratio('median_ttft_s'):.2f} | {med(peer, 'median_tok_s'):.2f} "
                f"| {ratio('median_tok_s'):.2f} | {min(agree(o['first_ids'], q['first_ids']) for o, q in zip(ours, peer))}"
                f"/{len(ours[0]['first_ids'])} |")
    target = 1.1 * (ours[0]["weights_gb"] + ours[0]["cache_gb"])
    print(row + f" {max(r['peak_rss_gb'] for r in ours):.3f} | {target:.3f} |")
print(f"\n{rounds} rounds; prompt {lines[0]['prompt']} tokens, then {lines[0]['tokens']}; "
      f"OpenBLAS core {lines[0]['openblas_core']}")
EOF

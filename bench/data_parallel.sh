#!/usr/bin/env bash
# Global tokens/s of 1 and 2 ranks (one thread each) training a preset, alternating, a few
# rounds: bench/data_parallel.sh [preset] [rounds] [steps]. Each run prints one JSON line
# (bench/data_parallel.cpp); compare the medians. As root, Open MPI needs --allow-run-as-root.
set -euo pipefail
. "$(dirname "$0")/../tools/lib/arguments.sh"
(($# <= 3)) || refuse "takes at most a preset, rounds and steps"
[[ ${1:-small} =~ ^[a-z]+$ ]] || refuse "the first argument is a preset, not $1"
for n in "${@:2}"; do [[ $n =~ ^[1-9][0-9]*$ ]] || refuse "rounds and steps are counts, not $n"; done
cd "$(dirname "$0")/.."
preset=${1:-small} rounds=${2:-3} steps=${3:-20}
bench=build/bench/data_parallel
[[ -x $bench ]] || { echo "bench/data_parallel.sh: build it first: meson compile -C build bench/data_parallel" >&2; exit 1; }
root=()
[[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
for ((round = 1; round <= rounds; ++round)); do
  OMP_NUM_THREADS=1 "$bench" "$preset" "$steps"
  mpirun "${root[@]}" --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 "$bench" "$preset" "$steps"
done

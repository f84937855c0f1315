#!/usr/bin/env python3
"""gatedgrad under an address-space limit (`ulimit -v`) ends: it runs, or it exits with one line
that names the limit; it never hangs (cpu/blas_buffers.h, apps/openblas_threads.cpp).

    check_address_space.py GATEDGRAD SCRATCH

The limits are counted above what the dynamic loader alone maps for the program (found by
bisection with LD_TRACE_LOADED_OBJECTS=1, which maps every library and exits before main): about
60 MB for a CPU build, near 1 GB where the CUDA libraries are linked, which must not eat the
room the test means to give. Under each limit from that plus 940 MB down to that plus 100 MB
(1 GB to 160 MB for a CPU build), `gatedgrad --help` and a tiny training (2 steps of
the tiny preset, on 2 OpenMP threads) must end within 120 s (then SIGKILL: the trainer takes
SIGTERM as "save and stop", which a hung GEMM never reaches), and each must exit 0 or print one
line on standard error. --help must exit 0 under every limit, the training under 1 GB; under
the smallest limits, where OpenBLAS's buffer has no room, the training must refuse in a line
that says "ulimit -v". Prints one line per run; exits 1 on any problem.
"""
import os
import subprocess
import sys

EXTRA_KB = [940_000, 340_000, 190_000, 100_000]


def loader_kb(gatedgrad):
    """The smallest ulimit -v (to 1 MB) under which the loader maps the program and its libraries."""
    def loads(limit_kb):
        command = f'ulimit -v {limit_kb}; LD_TRACE_LOADED_OBJECTS=1 exec "$0"'
        return subprocess.run(["bash", "-c", command, gatedgrad], capture_output=True, timeout=60).returncode == 0
    low, high = 1_000, 16_000_000
    if not loads(high):
        sys.exit(f"check_address_space: {gatedgrad} does not load even under ulimit -v {high}")
    while high - low > 1_000:
        middle = (low + high) // 2
        low, high = (low, middle) if loads(middle) else (middle, high)
    return high


def run(gatedgrad, limit_kb, args):
    env = dict(os.environ, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="passive")
    command = f'ulimit -v {limit_kb}; exec "$0" "$@"'
    try:
        done = subprocess.run(["bash", "-c", command, gatedgrad, *args], env=env, capture_output=True, text=True,
                              errors="replace", timeout=120)
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, done.stderr.strip()


def main(gatedgrad, scratch):
    problems, refused = [], 0
    base = loader_kb(gatedgrad)
    print(f"the loader maps the program and its libraries in {base} KB")
    limits = [base + extra for extra in EXTRA_KB]
    for limit in limits:
        for name, args in (("--help", ["--help"]),
                           ("train", ["train", "--preset", "tiny", "--steps", "2", "--batch", "2", "--force",
                                      "--out", os.path.join(scratch, f"train-{limit}")])):
            code, stderr = run(gatedgrad, limit, args)
            lines = stderr.splitlines()
            print(f"ulimit -v {limit}: {name}: " + ("still running after 120 s" if code is None else
                                                     f"exit {code}" + (f": {lines[-1]}" if lines else "")))
            if code is None:
                problems.append(f"{name} under {limit} KB hangs")
            elif code != 0 and len(lines) != 1:
                problems.append(f"{name} under {limit} KB exits {code} with {len(lines)} lines on stderr, not one")
            elif name == "--help" and code != 0:
                problems.append(f"--help under {limit} KB exits {code}")
            elif name == "train" and limit == limits[0] and code != 0:
                problems.append(f"the tiny training fails under {limit} KB")
            refused += name == "train" and code != 0 and "ulimit -v" in stderr
    if refused == 0:
        problems.append(f"no limit down to {limits[-1]} KB made the training refuse, naming ulimit -v")
    for problem in problems:
        print("problem:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

#!/usr/bin/env python3
"""The test demo_output: the main demo run as a user runs it, its claims checked, its digits
compared with what the README quotes.

    check_demo.py BUILD RUNS

1. tools/demo --no-build --build BUILD --out RUNS, with the kernels this CPU picks (nothing
   pinned but what the environment pins, as for a user): the claims the README makes of its
   output must hold (tests/demo_claims.py).
2. Its digits: the README's excerpt and docs/demo_output.txt quote the demo as it runs with
   OpenBLAS's Haswell kernels and our AVX-512 vector path (PINNED). The last digits depend on
   the kernels (docs/kernel-spread.md), so the output of step 1 is compared with them
   (tools/check-readme-output) and, where it differs, the demo runs again with PINNED, on a CPU
   that runs them, and that output is compared. A CPU without AVX-512 cannot: there the
   comparison is skipped, with a line that says so.
With UPDATE_README_OUTPUT=1 (tools/update-readme-output) only the pinned demo runs, and the
quoted blocks are rewritten from it.
"""
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PINNED = {"OPENBLAS_CORETYPE": "Haswell", "GATEDGRAD_VECTOR_PATH": "avx512"}


def compare(runs, program, env, quiet=False):
    """tools/check-readme-output on what program prints: the README's excerpt and docs/demo_output.txt."""
    command = [ROOT / "tools" / "check-readme-output", "--also", ROOT / "docs" / "demo_output.txt",
               "--as", f"{runs}=runs/demo", "--any-order", r"^  (trained |\S.* seed [0-9]+: val loss)",
               ROOT / "README.md", "demo", *program]
    done = subprocess.run([str(c) for c in command], env=env, capture_output=quiet)
    if quiet and done.returncode != 0:
        diff_lines = len(done.stdout.splitlines())
        print(f"check_demo: this CPU's kernels print other digits than the quoted ones ({diff_lines} lines of diff)")
    return done.returncode


def main(build, runs):
    demo = [ROOT / "tools" / "demo", "--no-build", "--build", build, "--out", runs]
    pinned_env = dict(os.environ, **PINNED)
    if os.environ.get("UPDATE_README_OUTPUT") == "1":
        return compare(runs, demo, pinned_env)
    print("== the demo with " + ", ".join(f"{k}={os.environ.get(k, '(unset: this CPU picks)')}" for k in PINNED))
    done = subprocess.run([str(c) for c in demo], stdout=subprocess.PIPE)
    if done.returncode != 0:
        sys.stdout.buffer.write(done.stdout)
        print(f"check_demo: tools/demo exited with status {done.returncode}")
        return 1
    with tempfile.NamedTemporaryFile(suffix=".txt") as output:
        output.write(done.stdout)
        output.flush()
        print("== the claims, on this CPU's kernels")
        claims = subprocess.run([sys.executable, ROOT / "tests" / "demo_claims.py", "--blocks", "1,1,2", output.name]).returncode
        print("== the digits: this CPU's output against the quoted one")
        if compare(runs, ["cat", output.name], os.environ, quiet=True) == 0:
            return claims
    if "avx512f" not in pathlib.Path("/proc/cpuinfo").read_text():
        print("check_demo: the digit-for-digit comparison skipped: this CPU's kernels print other digits (above), "
              "and it has no AVX-512 to run the quoted ones")
        return claims
    print(f"== the digits: the demo again with the quoted kernels ({' '.join(f'{k}={v}' for k, v in PINNED.items())})")
    return compare(runs, demo, pinned_env) or claims


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))

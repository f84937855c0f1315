#!/usr/bin/env python3
"""The README's claims on every seed it quotes, with the kernels this CPU picks: tutorial 06's
strong sink (a3) on seeds 1-5, tutorial 07 --quick (lr 1e-01) on seeds 1 and 2, checked by
tests/demo_claims.py (the meson test demo_claims_seeds, suite slow).

    check_claims_over_seeds.py TUTORIAL_06 TUTORIAL_07 SCRATCH
"""
import pathlib
import subprocess
import sys

if len(sys.argv) != 4:
    sys.exit(__doc__)
tutorial_06, tutorial_07, scratch = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
scratch.mkdir(parents=True, exist_ok=True)
outputs = []
for name, command in (("a3.txt", [tutorial_06, "--part", "a", "--a-setup", "a3", "--a-seeds", "5", "--out", scratch / "06"]),
                      ("07.txt", [tutorial_07, "--quick", "--seeds", "2", "--out", scratch / "07"])):
    with open(scratch / name, "wb") as output:
        if subprocess.run([str(c) for c in command], stdout=output).returncode != 0:
            sys.exit(f"check_claims_over_seeds: {' '.join(map(str, command))} failed")
    outputs.append(str(scratch / name))
claims = pathlib.Path(__file__).resolve().parent / "demo_claims.py"
sys.exit(subprocess.run([sys.executable, str(claims), "--blocks", "5,2,0", *outputs]).returncode)

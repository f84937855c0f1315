#!/usr/bin/env python3
"""tests/demo_claims.py can fail: on docs/demo_output.txt it passes, and on each copy of it
with one claim broken by a planted number (or a part cut off) it fails, naming that claim.
Run from the repository root; prints one line per plant, exits 1 if a plant goes unseen.
"""
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path.cwd()
CLAIMS = ROOT / "tests" / "demo_claims.py"

# (what the plant breaks, the line it edits (a piece of it), a regex whose match past its first
# group is the number to replace, the new text, what the failure line must say). The regexes
# find a number by its place on the line, so a change that moves the demo's digits leaves the
# plants working.
PLANTS = [
    ("a weak baseline sink", "alpha (on BOS), non-trigger queries", r"(queries\s+)[0-9.]+", "0.317",
     "baseline alpha 0.317"),
    ("a G1 sink", "alpha (on BOS), non-trigger queries", r"(queries\s+[0-9.]+\s+)[0-9.]+", "0.167", "G1 alpha 0.167"),
    ("an open gate on idle queries", "G1 mean gate, non-trigger queries", r"(-\s+)[0-9.]+", "0.070", "G1 gate 0.07"),
    ("no value drain", "|v| at BOS", r"(BOS\s+)[0-9.]+", "0.208", "|v| at BOS 0.208"),
    ("the baseline not worst", "baseline         lr 1e-01 seed 1", r"(val loss )[0-9.]+", "2.5000",
     "final loss baseline 2.5"),
    ("QK-norm's logits grown", "QK-norm          lr 1e-01 seed 1", r"(attention logit\s+)[0-9.e+]+", "4.4e+03",
     "QK-norm's largest logit 4400"),
    ("no collapsed head", "G1               lr 1e-01 seed 1", r"(smallest entropy )[0-9.]+", "0.200",
     "G1's largest logit"),
    ("a sink in natural text", "mean first-token share", r"(share )[0-9.]+", "0.133", "first-token share 0.133"),
]


def plant(line, regex, new):
    """line with the number regex finds (its match past the first group) replaced by new."""
    planted, count = re.subn(regex, lambda m: m.group(1) + new, line, count=1)
    assert count == 1, f"no number for {regex!r} in {line!r}"
    return planted


def claims(text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(text)
        f.flush()
        done = subprocess.run([sys.executable, CLAIMS, "--blocks", "1,1,2", f.name], capture_output=True, text=True)
    return done.returncode, [line for line in done.stdout.splitlines() if line.startswith("FAILED")]


def main():
    output = (ROOT / "docs" / "demo_output.txt").read_text(encoding="utf-8")
    problems = []
    code, failed = claims(output)
    print(f"docs/demo_output.txt as it is: exit {code}, {len(failed)} claims failed")
    if code != 0:
        problems.append("the claims fail on docs/demo_output.txt itself")
    cases = [(what, output.replace(line, plant(line, regex, new), 1), said)
             for what, piece, regex, new, said in PLANTS
             for line in [next(line for line in output.splitlines() if piece in line)]]
    cases.append(("part 3 cut off", output.split("== 3. natural text")[0], "2 natural text block(s): 0"))
    for what, text, said in cases:
        code, failed = claims(text)
        seen = code == 1 and any(said in line for line in failed)
        print(f"{what}: exit {code}; " + ("; ".join(failed) if failed else "no claim failed"))
        if not seen:
            problems.append(f"{what}: no failed claim says '{said}'")
    for problem in problems:
        print("problem:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

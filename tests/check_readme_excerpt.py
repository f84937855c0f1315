"""tools/check-readme-output on a quoted excerpt (<!-- output: NAME excerpt -->), the way the
main README quotes the demo: pieces of the output that match pass; a changed digit, a piece out
of order, or lines that are not printed one after the other fail; --update rewrites a piece's
digits and refuses a piece no longer printed. The program here is python3 printing a fixed text.

    python3 tests/check_readme_excerpt.py
"""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "check-readme-output"

PRINTED = """== part 1
alpha 0.917 baseline
alpha 0.067 G1
gate 0.007
trained in 12 s
== part 2
growth 2.63e+05x
final 2.9182
"""


def readme(block):
    return "# A page\n\n<!-- output: demo excerpt -->\n```text\n" + block + "```\n\nAfter.\n"


def run(directory, block, printed=PRINTED, update=False):
    page = directory / "README.md"
    page.write_text(readme(block))
    program = [sys.executable, "-c", f"import sys; sys.stdout.write({printed!r})"]
    flags = ["--update"] if update else []
    done = subprocess.run([sys.executable, str(TOOL)] + flags + [str(page), "demo"] + program,
                          capture_output=True, text=True)
    return done.returncode, page.read_text(), done.stdout + done.stderr


def main():
    problems = []
    cases = [  # (what, block, expected exit status)
        ("two pieces in order", "== part 1\nalpha 0.917 baseline\n...\nfinal 2.9182\n", 0),
        ("a timing differs (masked)", "gate 0.007\ntrained in 40 s\n...\n", 0),
        ("a digit changed", "== part 1\nalpha 0.918 baseline\n...\nfinal 2.9182\n", 1),
        ("pieces out of order", "final 2.9182\n...\n== part 1\n", 1),
        ("lines not one after the other", "alpha 0.917 baseline\ngate 0.007\n", 1),
        ("a line never printed", "== part 1\n...\nbeta 1.0\n", 1),
    ]
    with tempfile.TemporaryDirectory() as scratch:
        directory = pathlib.Path(scratch)
        for what, block, wanted in cases:
            status, _, said = run(directory, block)
            if status != wanted:
                problems.append(f"{what}: exit {status}, wanted {wanted}\n{said}")

        changed = PRINTED.replace("0.917", "0.921").replace("2.9182", "2.9177")
        status, page, said = run(directory, "== part 1\nalpha 0.917 baseline\n...\nfinal 2.9182\n",
                                 printed=changed, update=True)
        if status != 0 or "alpha 0.921 baseline\n...\nfinal 2.9177\n```" not in page:
            problems.append(f"--update did not rewrite the digits (exit {status}):\n{page}{said}")
        status, page, said = run(directory, "== part 1\n...\nbeta 1.0\n", update=True)
        if status != 1 or "beta 1.0" not in page:
            problems.append(f"--update on a piece no longer printed: exit {status}, wanted 1, page kept:\n{page}")
    for p in problems:
        print("check_readme_excerpt: " + p)
    print(f"check_readme_excerpt: {len(cases) + 2} cases, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Every number an experiment README quotes as a result must be in that tutorial's results.

The experiment tutorials (06-09, 14 and 15) commit their results next to their text
(tutorials/NN_*/results/: CSV, JSON, the program's output as .txt). This check reads each
README.md of those tutorials and finds every decimal number (like 0.467 or +1.098; not
integers, not 3e-3) in its result sections, and looks for it in the results files:

  result sections  from a line starting "**The result" to the next "## " heading; every
                   section whose heading says "result", "output" or "compared with the
                   paper"; and all of a README inside results/ (it is all results)
  left out         fenced blocks of shell commands (```sh), `inline code`, link targets,
                   headings
  found            some number in a results file (*.txt, *.csv, *.json, *.md other than a
                   README), or in docs/paper.md (the paper's figures), rounds to it at the
                   number of decimals quoted; signs are ignored (a table's +0.447 may be a
                   difference the program printed as 0.447 in another column)

docs/results.md, the summary of all of them, is checked the same way, every line of it: a
section headed "## NN ..." against tutorial NN's results, the rest (the overview and the
main demo) against all the tutorials' results and the demo's output (docs/demo_output.txt).
The main README.md, which quotes the demo, is checked every line against the demo's output,
tutorial 06's and 07's results (the seeds it quotes) and the demo's outputs on other CPUs'
kernels (docs/kernel_spread/); docs/kernel-spread.md, which tabulates those, the same way.

Run from the repository root; prints each number it cannot find, with its file and line.
"""
import bisect
import pathlib
import re
import sys

NUMBER = re.compile(r"(?<![\w.])(\d+\.\d+)(?![\d.]|[eE][-+]?\d)")
SECTION_WORDS = ("result", "output", "compared with the paper")


def result_lines(readme: pathlib.Path):
    """(line number, text) of the README's result sections, code and links removed."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    whole_file = "results" in readme.parent.parts  # results/README.md, results/torch_init/README.md, ...
    in_result = whole_file
    heading_level = 0  # of the result section we are in, by heading; 0: none or "**The result"
    fence = None       # the info string of the fenced block we are in
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else (stripped[3:].strip() or "text")
            continue
        if fence is not None:
            if in_result and fence not in ("sh", "bash", "shell", "console"):
                yield number, line
            continue
        heading = re.match(r"^(#+)\s+(.*)", line)
        if heading and whole_file:
            continue  # a heading names a section (e.g. "Part 2.1"); it quotes no result
        if heading:
            level, title = len(heading.group(1)), heading.group(2).lower()
            if any(word in title for word in SECTION_WORDS):
                in_result, heading_level = True, level
            elif in_result and (heading_level == 0 or level <= heading_level):
                in_result, heading_level = False, 0
            continue
        if not whole_file and line.startswith("**The result"):
            in_result, heading_level = True, 0
        if in_result:
            line = re.sub(r"`[^`]*`", " ", line)            # inline code
            line = re.sub(r"\]\([^)]*\)", "] ", line)        # link and image targets
            yield number, line


def numbers_in(path: pathlib.Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    for m in re.finditer(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text):
        try:
            yield abs(float(m.group(0)))
        except ValueError:
            pass


def pool_of(files):
    return sorted({x for f in files if f.is_file() and f.suffix in (".txt", ".csv", ".json", ".md")
                   and f.name != "README.md" for x in numbers_in(f)})


def check(path, lines, pools, root, failures):
    """Looks up every decimal number of `lines` in the pools; returns how many it checked."""
    checked = 0
    for line_number, line in lines:
        for m in NUMBER.finditer(line):
            quoted = m.group(1)
            value, decimals = float(quoted), len(quoted.split(".")[1])
            tolerance = 0.5 * 10 ** -decimals + 1e-9
            checked += 1
            if not any(_near(pool, value, tolerance) for pool in pools):
                failures.append(f"{path.relative_to(root)}:{line_number}: {quoted} is in no results file")
    return checked


def summary_lines(path: pathlib.Path):
    """(line number, text, tutorial number or None) of docs/results.md, code and links removed."""
    section = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        heading = re.match(r"^##\s+(\d\d)\b", line)
        if line.startswith("## "):
            section = heading.group(1) if heading else None
            continue
        line = re.sub(r"`[^`]*`", " ", line)
        line = re.sub(r"\]\([^)]*\)", "] ", line)
        yield number, line, section


def main() -> int:
    root = pathlib.Path.cwd()
    paper = sorted(set(numbers_in(root / "docs" / "paper.md")))
    failures, checked, pools = [], 0, {}
    experiments = sorted(root.glob("tutorials/0[6-9]_*")) + sorted(root.glob("tutorials/1[45]_*"))
    for tutorial in experiments:
        results = tutorial / "results"
        pool = pool_of(results.rglob("*")) if results.is_dir() else []
        pools[tutorial.name[:2]] = pool
        for readme in sorted(tutorial.rglob("README.md")):
            checked += check(readme, result_lines(readme), (pool, paper), root, failures)
    summary = root / "docs" / "results.md"
    everything = sorted({x for pool in pools.values() for x in pool} |
                        set(pool_of([root / "docs" / "demo_output.txt"])))
    for number, line, section in summary_lines(summary):
        pool = pools.get(section, []) if section else everything
        checked += check(summary, [(number, line)], (pool, paper), root, failures)
    demo = pool_of([root / "docs" / "demo_output.txt"])
    spread = pool_of((root / "docs" / "kernel_spread").rglob("*"))
    quoted = (demo, pools.get("06", []), pools.get("07", []), spread)
    for page in (root / "README.md", root / "docs" / "kernel-spread.md"):
        checked += check(page, [(n, line) for n, line, _ in summary_lines(page)], quoted, root, failures)
    for f in failures:
        print(f)
    print(f"{checked} numbers checked, {len(failures)} not found")
    return 1 if failures else 0


def _near(sorted_values, value, tolerance):
    i = bisect.bisect_left(sorted_values, value - tolerance)
    return i < len(sorted_values) and sorted_values[i] <= value + tolerance


if __name__ == "__main__":
    sys.exit(main())

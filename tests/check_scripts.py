#!/usr/bin/env python3
"""Every script of tools/ and bench/ (each executable file there) answers --help and refuses an
unknown flag before it does anything (tools/lib/arguments.sh): `SCRIPT --help` exits 0 and
prints a text that names the script as it is called; `SCRIPT --no-such-flag` exits 2 with one
line on standard error. Neither may write a file.

The scripts run from a copy of tools/ and bench/ alone (they work from their own folder's
parent, so whatever one wrote would land in the copy), with the working folder, HOME and TMPDIR
empty folders of their own; after each run all three must still be empty and the copy as it was.
A script that has no such handling (a new one) takes the flag for work to do and fails here.

Run from the repository root; prints one line per script and problem, exits 1 on any problem.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

FOLDERS = ("tools", "bench")


def scripts(root):
    return sorted(path.relative_to(root) for folder in FOLDERS for path in (root / folder).iterdir()
                  if path.is_file() and os.access(path, os.X_OK))


def snapshot(folder):
    """Every path under folder, with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None
            for p in folder.rglob("*")}


def run(copy, script, flag, scratch):
    """Problems with `script flag`, run from the copy; an empty list when there are none."""
    for name in ("work", "home", "tmp"):
        (scratch / name).mkdir(exist_ok=True)
    before = snapshot(copy)
    env = dict(os.environ, HOME=str(scratch / "home"), TMPDIR=str(scratch / "tmp"))
    try:
        done = subprocess.run([str(copy / script), flag], cwd=scratch / "work", env=env, capture_output=True,
                              text=True, errors="replace", timeout=60)
    except subprocess.TimeoutExpired:
        return [f"{script} {flag}: still running after 60 s"]
    problems = []
    written = [f"{name}/{p.relative_to(scratch / name)}" for name in ("work", "home", "tmp")
               for p in (scratch / name).rglob("*")]
    after = snapshot(copy)
    written += [f"{path} (beside the script)" for path in sorted(after) if before.get(path, -1) != after[path]]
    if written:
        problems.append(f"{script} {flag}: wrote {', '.join(written[:5])}")
    if flag == "--help":
        if done.returncode != 0:
            problems.append(f"{script} --help: exit {done.returncode}, not 0")
        elif str(script) not in done.stdout:
            problems.append(f"{script} --help: the text on standard output does not name {script}")
    else:
        lines = done.stderr.strip().splitlines()
        if done.returncode != 2:
            problems.append(f"{script} {flag}: exit {done.returncode}, not 2")
        elif len(lines) != 1:
            problems.append(f"{script} {flag}: {len(lines)} lines on standard error, not one: {lines[:3]}")
    for name in ("work", "home", "tmp"):
        shutil.rmtree(scratch / name)
    return problems


def main():
    root = pathlib.Path.cwd()
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = pathlib.Path(scratch_dir)
        copy = scratch / "copy"
        for folder in FOLDERS:
            shutil.copytree(root / folder, copy / folder, symlinks=True)
        found = scripts(copy)
        problems = [p for script in found for flag in ("--help", "--no-such-flag")
                    for p in run(copy, script, flag, scratch)]
    for problem in problems:
        print(problem)
    print(f"{len(found)} scripts, each run with --help and --no-such-flag: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

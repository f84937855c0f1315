"""docs/library.md's map of the source against the tree: every folder of the repository (and
every folder inside nn/ and cuda/) has its row or is named in one, every script of tools/ is
named in the tools row, and nothing the map names is gone. A folder added without a line in the
map, or a line left for a folder that moved, fails here.

    python3 tests/check_library_map.py        (from the source root)
"""
import re
import subprocess
import sys
from pathlib import Path

MAP = Path("docs/library.md")


def tracked_files():
    """The repository's files: git's list in a clone, every file in a copy that is not one."""
    try:
        out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout
        return [Path(line) for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in Path(".").rglob("*") if p.is_file() and ".git" not in p.parts]


def folders_to_map(files):
    """Top-level folders (not hidden) and the folders one level inside nn/ and cuda/."""
    folders = set()
    for f in files:
        parts = f.parts
        if len(parts) < 2 or parts[0].startswith("."):
            continue
        folders.add(parts[0] + "/")
        if parts[0] in ("nn", "cuda") and len(parts) >= 3:
            folders.add(parts[0] + "/" + parts[1] + "/")
    return folders


def main():
    text = MAP.read_text(encoding="utf-8")
    layout = text[text.index("## Layout"):]
    rows = [line for line in layout.splitlines() if line.startswith("| `")]
    row_folders = {re.match(r"\| `([^`]+)`", row).group(1) for row in rows}
    named = set(re.findall(r"`([A-Za-z0-9_./-]+/)`", layout))  # every `folder/` the section names
    files = tracked_files()
    tree = folders_to_map(files)
    problems = []
    for folder in sorted(tree - row_folders - named):
        problems.append(f"{folder} has no line in {MAP}'s Layout")
    for folder in sorted(row_folders):
        if not Path(folder).is_dir():
            problems.append(f"{MAP} has a row for {folder}, which is not a folder of the tree")
    tools_row = next((row for row in rows if row.startswith("| `tools/`")), "")
    tools = sorted({f.parts[1] for f in files if len(f.parts) >= 2 and f.parts[0] == "tools"})
    for tool in tools:
        name = tool + "/" if (Path("tools") / tool).is_dir() else tool
        if f"`{name}`" not in tools_row:
            problems.append(f"tools/{name} is not named in {MAP}'s tools row")
    for problem in problems:
        print(problem)
    print(f"{len(tree)} folders and {len(tools)} tools against {MAP}: "
          f"{'every one mapped' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

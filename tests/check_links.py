"""Every relative link of the project's Markdown pages names a file that exists, and a link to a
heading of a page (page.md#heading) names a heading that page has, so that moving a text from
one page to another cannot leave a link pointing at nothing.

Pages: README.md and docs/*.md, and every README.md below tutorials/, cuda/ and examples/.
Links to other sites (http:, https:, mailto:) and text inside code (fenced blocks and `inline
code`) are left out. A heading's anchor is made as GitHub makes it: lower case, punctuation
other than - and _ removed, each space a -.

    python3 tests/check_links.py      (from the repository root)
"""
import pathlib
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def pages(root):
    found = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    for folder in ("tutorials", "cuda", "examples"):
        found += sorted((root / folder).rglob("README.md"))
    return [p for p in found if p.is_file()]


def prose_lines(path):
    """(line number, text) outside fenced blocks, inline code removed."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, re.sub(r"`[^`]*`", " ", line)


def anchors(path):
    """The anchors of a page's headings."""
    out = set()
    for _, line in prose_lines(path):
        heading = re.match(r"^#+\s+(.*?)\s*#*\s*$", line)
        if heading:
            title = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            out.add(title.replace(" ", "-"))
    return out


def main():
    root = pathlib.Path.cwd()
    problems, checked = [], 0
    for page in pages(root):
        for number, line in prose_lines(page):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                checked += 1
                where = f"{page.relative_to(root)}:{number}: {target}"
                path, _, anchor = target.partition("#")
                linked = (page.parent / path).resolve() if path else page
                if not linked.exists():
                    problems.append(f"{where}: no such file")
                elif anchor and linked.suffix == ".md" and anchor.lower() not in anchors(linked):
                    problems.append(f"{where}: {linked.relative_to(root)} has no heading '#{anchor}'")
    for p in problems:
        print(p)
    print(f"{checked} links checked, {len(problems)} broken")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

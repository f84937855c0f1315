"""Writes a C++ file that holds text files as strings, for the build (nn/meson.build): the
report page's style and script are kept as a real .css and .js (an editor and a linter read
them as such) and compiled into the library from there.

    python3 embed_text.py OUT.cpp HEADER NAME=FILE...

Each NAME becomes `const char* const NAME` in namespace gg::nn, declared in HEADER, holding
FILE's bytes as a raw string literal whose delimiter the text does not contain.
"""
import sys
from pathlib import Path


def raw_literal(text):
    delimiter = "txt"
    while ")" + delimiter + '"' in text:
        delimiter += "_"
    return f'R"{delimiter}({text}){delimiter}"'


def main(out, header, *pairs):
    lines = [f"// Written by nn/analysis/embed_text.py from {', '.join(p.split('=', 1)[1] for p in pairs)}: edit those.",
             f'#include "{header}"', "", "namespace gg::nn {", ""]
    for pair in pairs:
        name, path = pair.split("=", 1)
        lines.append(f"const char* const {name} = {raw_literal(Path(path).read_text(encoding='utf-8'))};")
        lines.append("")
    lines.append("}  // namespace gg::nn")
    Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit("usage: embed_text.py OUT.cpp HEADER NAME=FILE...")
    main(*sys.argv[1:])

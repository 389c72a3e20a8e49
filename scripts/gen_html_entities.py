#!/usr/bin/env python3
"""The tables of Python's `html.unescape` (the HTML5 named character references, with the
legacy names that need no `;`, and the numeric references it replaces or drops), written as
src/render/html_entities.rs for the `striptags` filter (src/render/html_unescape.rs).

Regenerate (from the repo root) with the Python 3.11 of the corpus goldens:

    /tmp/venv-corpus/bin/python scripts/gen_html_entities.py
"""

import html
import html.entities
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "render" / "html_entities.rs"
WIDTH = 99


def rust_str(text):
    out = []
    for c in text:
        if c == '"' or c == "\\":
            out.append("\\" + c)
        elif 0x20 <= ord(c) < 0x7F:
            out.append(c)
        else:
            out.append("\\u{%x}" % ord(c))
    return '"%s"' % "".join(out)


def char_lit(c):
    return "'%s'" % rust_str(c)[1:-1].replace("'", "\\'")


def packed(items, indent="    "):
    lines, line = [], indent
    for item in items:
        if len(line) + len(item) + 1 > WIDTH and line.strip():
            lines.append(line.rstrip())
            line = indent
        line += item + " "
    if line.strip():
        lines.append(line.rstrip())
    return "\n".join(lines)


def main():
    names = sorted(html.entities.html5.items(), key=lambda kv: kv[0].encode())
    charrefs = sorted(html._invalid_charrefs.items())
    codepoints = sorted(html._invalid_codepoints)
    named_rows = packed("(%s, %s)," % (rust_str(k), rust_str(v)) for k, v in names)
    replaced_rows = packed("(0x%x, %s)," % (k, char_lit(v)) for k, v in charrefs)
    dropped_rows = packed("0x%x," % c for c in codepoints)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    text = f"""//! Python {version}'s tables for `html.unescape`, written by `scripts/gen_html_entities.py`:
//! the HTML5 named character references (the names without `;` are the legacy
//! ones a reference may end without), sorted by name; the numeric references replaced by another
//! character; and the code points a numeric reference gives nothing for.

/// Each named reference (without its `&`) and its text, sorted by name.
#[rustfmt::skip]
pub static NAMED: [(&str, &str); {len(names)}] = [
{named_rows}
];

/// The numeric references that give another character than their code point.
#[rustfmt::skip]
pub static REPLACED: [(u32, char); {len(charrefs)}] = [
{replaced_rows}
];

/// The code points a numeric reference gives nothing for, sorted.
#[rustfmt::skip]
pub static DROPPED: [u32; {len(codepoints)}] = [
{dropped_rows}
];
"""
    OUT.write_text(text)
    print(f"{len(names)} names, {len(charrefs)} replaced, {len(codepoints)} dropped -> {OUT}")


if __name__ == "__main__":
    main()

"""Reflow prose broken mid-sentence in comments and docstrings, whole paragraphs at a time.

Usage: ``python tools/reflow.py [--check] FILE.py ...`` (``--check``: list the paragraphs it would reflow,
change nothing; exit 1 if there are any).

An earlier wrap pass split each over-long prose line in two at the line length, which left a short tail line
in the middle of a paragraph ("... whose tangent space T(K, Q) = {AQ^T + KB^T} contains W^mm (in particular
none\\nwith\\nrank K = ..."). This tool finds such paragraphs and re-fills each one as a
whole at the project's line length (110, ruff E501), keeping its indentation and first-line prefix.

A paragraph is a run of prose lines of one comment block or docstring at the same indentation. Lines that
carry structure end a paragraph and are never joined: blank lines, list items (``-``, ``*``, ``1.``), doctest
lines, table rows (``|``), fences, headings, lines indented deeper than the paragraph (code or continuation
blocks), and a line ending in ``::``. A paragraph is reflowed only when it is broken: a line of at least
``LONG`` characters followed, inside the same paragraph, by a line under half its length that is itself
followed by more of the paragraph. Hand-formatted paragraphs (short lines on purpose) are left alone.

Safety, checked on every file it writes: the file with all whitespace and ``#`` removed is unchanged (only
line breaks, indentation and comment markers moved), and the syntax tree is unchanged apart from the
whitespace inside docstrings.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import textwrap
import tokenize

MAX = 110
LONG = 90
_STRUCT = re.compile(r"(\s*)([-*+] |\d+[.)] |>>>|\.\.\. |\||```|=+$|-+$|~+$|:\w+:|\.\. )")


def _docstring_spans(src: str) -> list[tuple[int, int]]:
    """(first, last) 0-based line numbers of every docstring."""
    spans = []
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or not body:
            continue
        first = body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            spans.append((first.lineno - 1, (first.end_lineno or first.lineno) - 1))
    return spans


def _comment_lines(src: str) -> set[int]:
    """0-based numbers of the lines that hold only a comment."""
    out = set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT and not tok.line[: tok.start[1]].strip():
            out.add(tok.start[0] - 1)
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _broken(lines: list[str]) -> bool:
    for i in range(len(lines) - 2):
        a, b = len(lines[i].rstrip()), len(lines[i + 1].rstrip())
        if a >= LONG and b < a / 2:
            return True
    return False


def _fill(lines: list[str], head: str, rest: str, strip: int) -> list[str]:
    words = " ".join(line[strip:] if k else line[len(head):] for k, line in enumerate(lines)).split()
    return textwrap.wrap(
        " ".join(words), width=MAX, initial_indent=head, subsequent_indent=rest,
        break_long_words=False, break_on_hyphens=False,
    )


def _paragraphs(lines: list[str], first: int, last: int, comment: bool):
    """(start, end) ranges [start, end) of prose paragraphs in lines[first..last]."""
    i = first
    while i <= last:
        line = lines[i]
        body = line.lstrip()
        text = body[1:].lstrip() if comment else body
        if not text or _STRUCT.match(text) or text.rstrip().endswith("::"):
            i += 1
            continue
        ind, j = _indent(line), i + 1
        while j <= last:
            nxt = lines[j]
            nb = nxt.lstrip()
            nt = nb[1:].lstrip() if comment else nb
            if comment and (not nb.startswith("# ") or _indent(nxt) != ind):
                break
            if not comment and _indent(nxt) != ind:
                break
            if not nt or _STRUCT.match(nt) or nt.startswith('"""'):
                break
            j += 1
            if nt.rstrip().endswith("::"):
                break
        yield i, j
        i = j


def reflow_source(src: str) -> tuple[str, list[int]]:
    """The reflowed source and the 1-based first lines of the paragraphs reflowed."""
    lines = src.split("\n")
    edits: list[tuple[int, int, list[str]]] = []
    for first, last in _docstring_spans(src):
        for s, e in _paragraphs(lines, first, last, comment=False):
            block = lines[s:e]
            if len(block) < 3 or not _broken(block):
                continue
            ind = _indent(lines[s + 1])
            if s == first:  # the opening line: keep its quotes as the first-line prefix
                m = re.match(r'(\s*[rRbBuU]{0,2}(?:"""|\'\'\'))', block[0])
                head = m.group(1) if m else " " * _indent(block[0])
            else:
                head = " " * _indent(block[0])
            if any(_indent(x) != ind for x in block[1:]):
                continue
            edits.append((s, e, _fill(block, head, " " * ind, ind)))
    comments = _comment_lines(src)
    k = 0
    while k < len(lines):
        if k not in comments:
            k += 1
            continue
        end = k
        while end + 1 < len(lines) and end + 1 in comments and _indent(lines[end + 1]) == _indent(lines[k]):
            end += 1
        for s, e in _paragraphs(lines, k, end, comment=True):
            block = lines[s:e]
            if len(block) < 3 or not _broken(block) or not all(x.lstrip().startswith("# ") for x in block):
                continue
            pre = " " * _indent(block[0]) + "# "
            edits.append((s, e, _fill(block, pre, pre, len(pre))))
        k = end + 1
    for s, e, new in sorted(edits, reverse=True):
        lines[s:e] = new
    return "\n".join(lines), sorted(s + 1 for s, _, _ in edits)


def _same_program(a: str, b: str) -> bool:
    if re.sub(r"[\s#]", "", a) != re.sub(r"[\s#]", "", b):
        return False

    def norm(src: str) -> str:
        tree = ast.parse(src)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                node.value = " ".join(node.value.split())
        return ast.dump(tree)

    return norm(a) == norm(b)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    found = 0
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            src = f.read()
        new, where = reflow_source(src)
        if not where:
            continue
        found += len(where)
        if args.check:
            print(f"{path}: {len(where)} broken paragraph(s) at lines {where}")
            continue
        if not _same_program(src, new):
            print(f"{path}: reflow would change more than prose; left unchanged", file=sys.stderr)
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
        print(f"{path}: reflowed {len(where)} paragraph(s)")
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())

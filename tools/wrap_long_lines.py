"""Wrap lines over the project's line length (110, pyproject's ruff E501) without changing behaviour.

Usage: ``python tools/wrap_long_lines.py FILE.py ...`` (then review ``git diff`` and run ``ruff check``).
Prints the lines it could not wrap (left for a hand edit).

Written when E501 was first enforced (issue 13), for code written before that: comments are re-filled,
docstring lines are split at a space, code statements are re-formatted by ``ruff format --range`` (that
statement only), and a string literal that still crosses the limit is split into two adjacent literals at a
space outside any f-string field (implicit concatenation: the value is unchanged). A literal that is not
inside brackets is parenthesised when it is the whole right-hand side of an assignment, else left alone.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap

MAX = 110
RUFF = "ruff"


def long_lines(path: str) -> list[int]:
    with open(path) as f:
        return [i + 1 for i, line in enumerate(f.read().splitlines()) if len(line) > MAX]


def docstring_lines(src: str) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(ast.parse(src)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return out


def fill_comment(lines: list[str], i: int) -> bool:
    line = lines[i]
    ind = len(line) - len(line.lstrip())
    body = line.lstrip()
    prefix = "#: " if body.startswith("#: ") else "# "
    if not body.startswith(prefix):
        return False
    width = MAX - ind - len(prefix)
    lines[i : i + 1] = [
        " " * ind + prefix + t
        for t in textwrap.wrap(
            body[len(prefix) :], width=width, break_long_words=False, break_on_hyphens=False
        )
    ]
    return True


def split_doc_line(lines: list[str], i: int) -> bool:
    line = lines[i]
    ind = len(line) - len(line.lstrip())
    cut = line.rfind(" ", ind + 1, MAX + 1)
    if cut <= ind:
        return False
    lines[i:i + 1] = [line[:cut].rstrip(), " " * ind + line[cut + 1:]]
    return True


_LITERAL = re.compile(r"""(?P<p>[fFrR]{0,2})(?P<q>"|')(?P<body>(?:\\.|(?!(?P=q)).)*)(?P=q)""")


def split_literal(lines: list[str], i: int) -> bool:
    line = lines[i]
    hit = [m for m in _LITERAL.finditer(line) if m.start() < MAX < m.end()]
    if not hit:
        return False
    m = hit[-1]
    p, q, body, start = m.group("p"), m.group("q"), m.group("body"), m.start("body")
    depth, cut = 0, None
    for k, ch in enumerate(body):
        if "f" in p.lower():
            depth += (ch == "{") - (ch == "}")
        if ch == " " and depth == 0 and start + k < MAX - 2 and k > 10:
            cut = k
    if cut is None:
        return False

    def lit(s: str) -> str:
        return f"{p if ('{' in s or 'f' not in p.lower()) else p.replace('f', '').replace('F', '')}{q}{s}{q}"

    ind = len(line) - len(line.lstrip())
    head, tail = line[:m.start()], line[m.end():]
    if re.fullmatch(r"\s*[\w.]+(\s*:\s*[^=]+)?\s*=\s*", head) and not tail.strip():
        # `name = "literal"`: parenthesise, so the two halves concatenate
        lines[i:i + 1] = [head + "(" + lit(body[:cut + 1]), " " * (len(head) + 1) + lit(body[cut + 1:]) + ")"]
        return True
    cont = " " * m.start() if not head.strip() else " " * (ind + 4)
    lines[i:i + 1] = [head + lit(body[:cut + 1]), cont + lit(body[cut + 1:]) + tail]
    return True


def wrap(path: str) -> list[int]:
    for _ in range(6):
        todo = long_lines(path)
        if not todo:
            return []
        with open(path) as f:
            src = f.read()
        docs, lines, changed, code = docstring_lines(src), src.splitlines(), False, []
        for n in sorted(todo, reverse=True):
            if lines[n - 1].lstrip().startswith("#"):
                changed |= fill_comment(lines, n - 1)
            elif n in docs:
                changed |= split_doc_line(lines, n - 1)
            else:
                code.append(n)
        if changed:
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            continue
        for n in code:  # bottom-up, so earlier line numbers stay valid
            subprocess.run(
                [RUFF, "format", "-q", "--line-length", str(MAX), "--range", f"{n}:1-{n}:100000", path],
                check=False,
            )
        if long_lines(path) == todo:
            break
    with open(path) as f:
        lines = f.read().splitlines()
    before = list(lines)
    for n in sorted(long_lines(path), reverse=True):
        split_literal(lines, n - 1)
    if lines != before:
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        try:
            ast.parse("\n".join(lines))
        except SyntaxError:  # a literal outside brackets: undo
            with open(path, "w") as f:
                f.write("\n".join(before) + "\n")
    return long_lines(path)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        left = wrap(p)
        if left:
            print(f"{p}: lines still over {MAX}: {left}")

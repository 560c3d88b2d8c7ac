"""The section model of a theorem's report: what report.md and report.html say about one theorem, as a list
of blocks built once (:func:`theorem_blocks`) and rendered by each format (:func:`to_markdown`,
:func:`to_html`). A new line in the theorem sections is added here, once, and both files show it.

Blocks: :class:`Para` (a paragraph of inline runs), :class:`Math` (the statement), :class:`Table`,
:class:`Items` (a titled list), :class:`Figure`. Inline runs: plain ``str`` (escaped by the HTML renderer),
:class:`Code`, :class:`Bold`, :class:`Italic`, :class:`Link` (to an anchor in the same report), :class:`Badge`
(a status, coloured in HTML).
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

from ..harness import TheoremResult
from .model import (
    COUNT_KEYS,
    _finding_line,
    _metric_lines,
    criteria_rows,
    inconclusive_text,
    lost_power,
    reference_text,
    refuted_by_text,
    replay_lines,
    safe_name,
    sizes_text,
    status_of,
)


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Bold:
    text: str


@dataclass(frozen=True)
class Italic:
    text: str


@dataclass(frozen=True)
class Link:
    text: str
    anchor: str
    code: bool = False


@dataclass(frozen=True)
class Badge:
    status: str


Run = str | Code | Bold | Italic | Link | Badge


@dataclass(frozen=True)
class Para:
    runs: tuple[Run, ...]
    tone: str = ""  # "na" (muted) or "bad" (alarm) in HTML


@dataclass(frozen=True)
class Math:
    latex: str


@dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    cls: str = ""
    title: str = ""
    md_list: bool = False  # report.md: one "- cell cell cell" line per row instead of a table


@dataclass(frozen=True)
class Items:
    title: str
    items: tuple[tuple[Run, ...], ...]
    cls: str = ""
    fold_after: int | None = None  # report.html: items beyond this many in a collapsed <details>


@dataclass(frozen=True)
class Figure:
    path: Path
    alt: str


Block = Para | Math | Table | Items | Figure


def _refutation_blocks(t: TheoremResult) -> list[Block]:
    """Which predictions refuted the instances, and the alarm of a control refuted by integrity alone."""
    B: list[Block] = []
    rb = refuted_by_text(t)
    if rb:
        B.append(Para(("Refuted by: " + rb,)))
    if lost_power(t):
        B.append(Para((Bold("Control lost its power"), ": every refuted instance was refuted by integrity "
                       "predictions alone (the numerics broke on it), never by the control's false claim."),
                      tone="bad"))
    return B


def _undecidable_blocks(t: TheoremResult) -> list[Block]:
    """Theorem.undecidable, said above the verdict: why its INCONCLUSIVE is documented, not a budget."""
    if not t.undecidable:
        return []
    return [Para((Bold("Undecidable by the theorem's own algorithm (measured, documented)"),
                  ": " + t.undecidable), tone="na")]


def theorem_blocks(out: Path, t: TheoremResult) -> list[Block]:
    """Everything report.md and report.html say about theorem ``t`` below its heading, in order."""
    head: list[Run] = [Italic(reference_text(t))]
    if t.control_of:
        head += [" — negative control of ", Link(t.control_of, safe_name(t.control_of), code=True)]
    B: list[Block] = [Para(tuple(head))]
    if t.statement:
        B.append(Math(t.statement))
    if t.hypotheses_text:
        B.append(Para(("Hypotheses implemented: " + t.hypotheses_text,)))
    if t.source:
        path, _, name = t.source.rpartition("::")
        B.append(Para(("Mathematics: the docstring of ", Code(name), " in ", Code(path), " (a plugin).")))
    if t.finding:
        text = _finding_line(t, "\0")
        runs: tuple[Run, ...] = (Bold(text.split("\0")[1]), text.split("\0")[2]) if "\0" in text else (text,)
        B.append(Para(runs, tone="bad" if t.known_finding else "na"))
    if t.not_applicable:
        B.append(Para((Bold("Not applicable to the given data"), ": " + t.not_applicable), tone="na"))
        return B
    B.extend(_undecidable_blocks(t))
    B.append(Para(("Verdict ", Bold(t.verdict), f" (expected {t.expected}), status ", Badge(status_of(t)),
                   f"; {inconclusive_text(t)}.")))
    B.append(Table(COUNT_KEYS, (tuple(str(t.counts.get(k, 0)) for k in COUNT_KEYS),), cls="counts"))
    B.extend(_refutation_blocks(t))
    if status_of(t) == "hyp. unmet":
        B.append(Para((Bold("The given data do not meet this theorem's hypotheses"),
                       " (reasons below), so its claim says nothing about them."), tone="na"))
    crit = criteria_rows(t)
    if crit:
        B.append(Table(("quantity", "rule", "threshold"), tuple(crit), cls="crit", title="Decision criteria",
                       md_list=True))
    else:
        B.append(Para(("Decision criteria: criteria not declared.",), tone="na"))
    sz = sizes_text(t)
    if sz:
        B.append(Para((f"Instance sizes: {sz}",)))
    if t.hypotheses:
        B.append(Para(("Hypothesis rates: " + ", ".join(f"{n} {h['held']}/{h['tested']}"
                                                         for n, h in t.hypotheses.items()),)))
    ml = _metric_lines(t)
    if ml:
        B.append(Items("Metrics", tuple((m,) for m in ml)))
    if t.reasons:
        B.append(Items("Why instances were not confirmed (count)",
                       tuple((f"{k} ({v})",) for k, v in t.reasons.items()), cls="why"))
    rl = replay_lines(out, t)
    if rl:
        B.append(Items("Counterexamples (file: exact replay)", tuple((Code(p), ": ", Code(c)) for p, c in rl),
                       cls="why", fold_after=5))
    B.append(Para(("Replay the theorem: ", Code(t.reproduce))))
    fig = out / "figures" / f"{safe_name(t.id)}.png"
    if fig.exists():
        B.append(Figure(fig, t.id))
    return B


# -- report.md -------------------------------------------------------------------------------------------

def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _md_runs(runs: tuple[Run, ...]) -> str:
    out = []
    for r in runs:
        if isinstance(r, Code):
            out.append(f"`{r.text}`")
        elif isinstance(r, Bold):
            out.append(f"**{r.text}**")
        elif isinstance(r, Italic):
            out.append(f"*{r.text}*")
        elif isinstance(r, Link):
            out.append(f"[{f'`{r.text}`' if r.code else r.text}](#{r.anchor})")
        elif isinstance(r, Badge):
            out.append(r.status)
        else:
            out.append(r)
    return "".join(out)


def to_markdown(blocks: list[Block]) -> list[str]:
    """The blocks as report.md lines, one blank line between blocks."""
    L: list[str] = []
    for b in blocks:
        L.append("")
        if isinstance(b, Para):
            L.append(_md_runs(b.runs))
        elif isinstance(b, Math):
            L.append(f"Statement: ${b.latex}$")
        elif isinstance(b, Table) and b.md_list:
            L += [f"{b.title}:", ""]
            L += [("- " + " ".join(_md_cell(c) for c in row)).rstrip() for row in b.rows]
        elif isinstance(b, Table):
            L += [f"{b.title}:", ""] if b.title else []
            L += ["| " + " | ".join(b.head) + " |", "|" + "---|" * len(b.head)]
            L += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
        elif isinstance(b, Items):
            L += [f"{b.title}:", ""] + [f"- {_md_runs(item)}" for item in b.items]
        elif isinstance(b, Figure):
            L.append(f"![{b.alt}](figures/{b.path.name})")
    return L


# -- report.html -----------------------------------------------------------------------------------------

_STATUS_CLASS = {"ok": "ok", "n/a": "na", "hyp. unmet": "na", "undecided": "na", "KNOWN FINDING": "na",
                 "UNDECIDABLE": "na"}


def badge_html(status: str) -> str:
    return f"<span class='{_STATUS_CLASS.get(status, 'bad')}'>{html.escape(status)}</span>"


def _html_runs(runs: tuple[Run, ...]) -> str:
    out = []
    for r in runs:
        if isinstance(r, Code):
            out.append(f"<code>{html.escape(r.text)}</code>")
        elif isinstance(r, Bold):
            out.append(f"<b>{html.escape(r.text)}</b>")
        elif isinstance(r, Italic):
            out.append(f"<i>{html.escape(r.text)}</i>")
        elif isinstance(r, Link):
            text = f"<code>{html.escape(r.text)}</code>" if r.code else html.escape(r.text)
            out.append(f"<a href='#{r.anchor}'>{text}</a>")
        elif isinstance(r, Badge):
            out.append(badge_html(r.status))
        else:
            out.append(html.escape(r))
    return "".join(out)


def _html_items(items: tuple[tuple[Run, ...], ...], cls: str) -> str:
    c = f" class='{cls}'" if cls else ""
    return f"<ul{c}>" + "".join(f"<li>{_html_runs(i)}</li>" for i in items) + "</ul>"


def to_html(blocks: list[Block], math_html) -> list[str]:
    """The blocks as report.html fragments (``math_html`` renders a LaTeX statement)."""
    H: list[str] = []
    for b in blocks:
        if isinstance(b, Para):
            H.append(f"<p{f' class={chr(39)}{b.tone}{chr(39)}' if b.tone else ''}>{_html_runs(b.runs)}</p>")
        elif isinstance(b, Math):
            H.append(f"<div class='stmt'>{math_html(b.latex)}</div>")
        elif isinstance(b, Table):
            c = f" class='{b.cls}'" if b.cls else ""
            H.append((f"<p>{html.escape(b.title)}:</p>" if b.title else "") + f"<table{c}><tr>"
                     + "".join(f"<th>{html.escape(h)}</th>" for h in b.head) + "</tr>"
                     + "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in row) + "</tr>"
                               for row in b.rows) + "</table>")
        elif isinstance(b, Items):
            shown = b.items if b.fold_after is None else b.items[:b.fold_after]
            rest = () if b.fold_after is None else b.items[b.fold_after:]
            more = (f"<details><summary>{len(rest)} more</summary>{_html_items(rest, b.cls)}</details>"
                    if rest else "")
            H.append(f"<p>{html.escape(b.title)}:</p>{_html_items(shown, b.cls)}{more}")
        elif isinstance(b, Figure):
            b64 = base64.b64encode(b.path.read_bytes()).decode()
            H.append(f"<img alt='{html.escape(b.alt)} figure' src='data:image/png;base64,{b64}'/>")
    return H

"""report.html: self-contained (figures inlined, statements as MathML)."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from numerics.fileio import write_text

from ..harness import TheoremResult
from .model import (
    DOCS_LINE,
    HEAD,
    _settings,
    fails_run,
    run_summary,
    safe_name,
    status_of,
    summary_rows,
)
from .sections import badge_html, theorem_blocks, to_html


def math_html(latex: str) -> str:
    """LaTeX as MathML (rendered natively by browsers, offline); the escaped LaTeX in <code> when the
    conversion fails, so a statement never breaks the report."""
    try:
        from latex2mathml.converter import convert

        # latex2mathml knows \min but not \arg (it would print "\arg"): the same operator spelled out
        mathml = convert(re.sub(r"\\arg(?![A-Za-z])", r"\\operatorname{arg}", latex), display="block")
        if "<math" not in mathml:
            raise ValueError("no MathML produced")
        return mathml
    except Exception:  # noqa: BLE001 - any converter trouble: show the source instead
        return f"<code class='tex'>{html.escape(latex)}</code>"


def _badge(t: TheoremResult) -> str:
    return badge_html(status_of(t))


def _kv_table(d: dict[str, str]) -> str:
    return "<table>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                               for k, v in d.items()) + "</table>"


def _html_summary(S: dict[str, Any]) -> list[str]:
    H = ["<section id='summary'><h2>Summary</h2>",
         "<p>Verdicts: " + ", ".join(f"<b>{html.escape(v)}</b> {n}" for v, n in S["verdicts"].items())
         + "; statuses: " + ", ".join(f"{html.escape(s)} {n}" for s, n in S["statuses"].items()) + ". "
         + (f"<span class='bad'>{S['fails']} theorem(s) fail the run.</span>" if S["fails"]
            else "<span class='ok'>Nothing fails the run.</span>") + "</p>"]

    def items(rows, head):
        li = []
        for t, why in rows:
            sub = "".join(f"<li>{html.escape(r)}</li>" for r in why)
            li.append(f"<li><a href='#{safe_name(t.id)}'>{html.escape(t.id)}</a>: {_badge(t)}, {t.verdict} "
                      f"(expected {t.expected}){f'<ul>{sub}</ul>' if sub else ''}</li>")
        return [f"<h3>{head}</h3><ul class='why'>" + "".join(li) + "</ul>"]

    if S["failed"]:
        H += items(S["failed"], "Failed the run: why")
    if S["undecided"]:
        H += items(S["undecided"], "Not decided (INCONCLUSIVE / VACUOUS): why")
    if S["known"]:
        H.append("<p class='na'>Known findings reproduced: " + ", ".join(
            f"<a href='#{safe_name(t.id)}'>{html.escape(t.id)}</a>" for t in S["known"]) + "</p>")
    H.append("</section>")
    return H


def _html_theorem(out: Path, t: TheoremResult, settings_html: str) -> list[str]:
    """The report.html section of one theorem: a <details> (open when it fails the run) around the shared
    section model (sections.py), then the run settings."""
    H = [f"<details class='thm' id='{safe_name(t.id)}'{' open' if fails_run(t) else ''}>",
         f"<summary><b>{html.escape(t.id)}</b> — {html.escape(t.title)} — "
         f"{'n/a' if t.not_applicable else t.verdict} {_badge(t)}</summary>"]
    H += to_html(theorem_blocks(out, t), math_html)
    if t.not_applicable:
        return H + ["</details>"]
    H.append(
        f"<details class='settings'><summary>tolerances, package versions and solver settings of this run"
        f"</summary>{settings_html}</details></details>"
    )
    return H


def write_html(out: Path, rep: dict[str, Any], theorems: Sequence[TheoremResult]) -> None:
    run = rep["run"]
    css = (
        "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em;line-height:1.35}"
        "table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ccc;padding:2px "
        "6px;font-size:13px;"
        "text-align:left}th{background:#f3f3f3}"
        ".ok{color:#070}.bad{color:#b00;font-weight:bold}.na{color:#666}"
        "code{background:#f6f6f6;overflow-wrap:anywhere}li{overflow-wrap:anywhere;margin:2px 0}"
        "details.thm{border:1px solid #ddd;border-radius:4px;padding:2px 10px;margin:6px 0}"
        "details.thm>summary{cursor:pointer;padding:4px 0;font-size:15px}"
        "details.settings>summary{cursor:pointer;color:#555;font-size:13px}"
        ".stmt{overflow-x:auto;overflow-y:hidden;font-size:115%;padding:4px 0}img{max-width:100%}"
    )
    H = [
        "<!doctype html><html><head><meta charset='utf-8'><title>attnsvm report "
        f"{html.escape(run['id'])}</title>",
        f"<style>{css}</style></head><body>",
        f"<h1>attnsvm report</h1><p>run {html.escape(run['id'])}; profile <b>{run['profile']}</b>, seed "
        f"<b>{run['seed']}</b>, device {html.escape(str(run['device']))}, started {run['started']}, "
        f"git {html.escape(str(run.get('git')))}"
        + (f"; data <code>{html.escape(str(run['data']))}</code>" if run.get("data") else "")
        + "</p>",
    ]
    H.append(f"<p>{html.escape(DOCS_LINE)}</p>")
    if run.get("interrupted"):
        H.append("<p class='bad'>INTERRUPTED — partial report; `attnsvm check --resume` finishes it.</p>")
    H += _html_summary(run_summary(theorems))
    H.append("<nav id='toc'><h2>Contents</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in HEAD) + "</tr>")
    for t, row in zip(theorems, summary_rows(theorems), strict=True):
        cells = [f"<a href='#{safe_name(t.id)}'>{html.escape(row[0])}</a>"] + [
            html.escape(c) for c in row[1:]
        ]
        cells[3] = _badge(t)
        H.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    H.append("</table><p><a href='#run-settings'>Run settings</a> (tolerances, package versions, solver "
             "settings)</p></nav><h2>Theorems</h2>")
    settings_html = _kv_table(_settings(run))
    for t in theorems:
        H += _html_theorem(out, t, settings_html)
    H.append(f"<h2 id='run-settings'>Run settings</h2>{settings_html}")
    H.append("</body></html>")
    write_text(out / "report.html", "\n".join(H) + "\n")

"""report.html: self-contained (figures inlined, statements as MathML)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from numerics.fileio import write_text

from ..harness import TheoremResult
from .model import (
    COUNT_KEYS,
    DOCS_LINE,
    HEAD,
    _finding_line,
    _metric_lines,
    _settings,
    criteria_rows,
    fails_run,
    inconclusive_text,
    reference_text,
    replay_lines,
    run_summary,
    safe_name,
    sizes_text,
    status_of,
    summary_rows,
)


def math_html(latex: str) -> str:
    """LaTeX as MathML (rendered natively by browsers, offline); the escaped LaTeX in <code> when the
    conversion fails, so a statement never breaks the report."""
    try:
        from latex2mathml.converter import convert

        mathml = convert(latex, display="block")
        if "<math" not in mathml:
            raise ValueError("no MathML produced")
        return mathml
    except Exception:  # noqa: BLE001 - any converter trouble: show the source instead
        return f"<code class='tex'>{html.escape(latex)}</code>"


_STATUS_CLASS = {"ok": "ok", "n/a": "na", "hyp. unmet": "na", "undecided": "na", "KNOWN FINDING": "na"}


def _badge(t: TheoremResult) -> str:
    st = status_of(t)
    return f"<span class='{_STATUS_CLASS.get(st, 'bad')}'>{html.escape(st)}</span>"


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
    H = [f"<details class='thm' id='{safe_name(t.id)}'{' open' if fails_run(t) else ''}>",
         f"<summary><b>{html.escape(t.id)}</b> — {html.escape(t.title)} — "
         f"{'n/a' if t.not_applicable else t.verdict} {_badge(t)}</summary>",
         f"<p><i>{html.escape(reference_text(t))}</i>"
         + (f" — negative control of <a href='#{safe_name(t.control_of)}'><code>{html.escape(t.control_of)}"
            f"</code></a>" if t.control_of else "") + "</p>"]
    if t.statement:
        H.append(f"<div class='stmt'>{math_html(t.statement)}</div>")
    if t.hypotheses_text:
        H.append(f"<p>Hypotheses implemented: {html.escape(t.hypotheses_text)}</p>")
    if t.finding:
        H.append(f"<p class='{'bad' if t.known_finding else 'na'}'>{html.escape(_finding_line(t))}</p>")
    if t.not_applicable:
        H.append(
            f"<p class='na'>Not applicable to the given data: {html.escape(t.not_applicable)}</p></details>"
        )
        return H
    H.append(f"<p>Verdict <b>{t.verdict}</b> (expected {t.expected}), status {_badge(t)}; "
             f"{html.escape(inconclusive_text(t))}.</p>")
    H.append("<table class='counts'><tr>" + "".join(f"<th>{k}</th>" for k in COUNT_KEYS) + "</tr><tr>"
             + "".join(f"<td>{t.counts.get(k, 0)}</td>" for k in COUNT_KEYS) + "</tr></table>")
    if status_of(t) == "hyp. unmet":
        H.append("<p class='na'>The given data do not meet this theorem's hypotheses (reasons below), so its "
                 "claim says nothing about them.</p>")
    crit = criteria_rows(t)
    if crit:
        H.append(
            "<p>Decision criteria:</p><table "
            "class='crit'><tr><th>quantity</th><th>rule</th><th>threshold</th>"
            "</tr>"
            + "".join(
                f"<tr><td>{html.escape(n)}</td><td>{html.escape(r)}</td><td>{html.escape(v)}</td></tr>"
                for n, r, v in crit
            )
            + "</table>"
        )
    else:
        H.append("<p class='na'>Decision criteria: criteria not declared.</p>")
    sz = sizes_text(t)
    if sz:
        H.append(f"<p>Instance sizes: {html.escape(sz)}</p>")
    if t.hypotheses:
        H.append("<p>Hypothesis rates: " + ", ".join(
            f"{html.escape(n)} {h['held']}/{h['tested']}" for n, h in t.hypotheses.items()) + "</p>")
    ml = _metric_lines(t)
    if ml:
        H.append("<p>Metrics:</p><ul>" + "".join(f"<li>{html.escape(m)}</li>" for m in ml) + "</ul>")
    if t.reasons:
        H.append("<p>Why instances were not confirmed (count):</p><ul class='why'>" + "".join(
            f"<li>{html.escape(k)} ({v})</li>" for k, v in t.reasons.items()) + "</ul>")
    rl = replay_lines(out, t)
    if rl:
        li = [f"<li><code>{html.escape(p)}</code>: <code>{html.escape(c)}</code></li>" for p, c in rl]
        more = (
            f"<details><summary>{len(li) - 5} more counterexamples</summary><ul class='why'>{''.join(li[5:])}"
            f"</ul></details>"
            if len(li) > 5
            else ""
        )
        H.append(f"<p>Counterexamples (file: exact replay):</p><ul class='why'>{''.join(li[:5])}</ul>{more}")
    H.append(f"<p>Replay the theorem: <code>{html.escape(t.reproduce)}</code></p>")
    fig = out / "figures" / f"{safe_name(t.id)}.png"
    if fig.exists():
        b64 = base64.b64encode(fig.read_bytes()).decode()
        H.append(f"<img alt='{html.escape(t.id)} figure' src='data:image/png;base64,{b64}'/>")
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

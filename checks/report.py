"""Rendering a run: report.json (schema 1), report.md, a self-contained report.html, junit.xml,
figures/*.png and counterexamples/*.npz. Reports are rendered only from result dataclasses."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_escape

import numpy as np

from numerics.data import AttentionData
from numerics.fileio import write_bytes, write_text

from .harness import InstanceResult, TheoremResult

SCHEMA = 1


def safe_name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


#: Statuses that do not fail the run: as expected, not applicable to the given data, (on given data) vacuous
#: because the data do not meet the theorem's hypotheses — a statement about the data, named in the reasons —
#: or a FAIL on exactly the documented counterexamples of a known finding (same profile, seed and instances).
#: Every other status fails the run (exit 1): UNEXPECTED, CONTROL NOT REFUTED, ERROR.
QUIET = ("ok", "n/a", "hyp. unmet", "KNOWN FINDING")


def status_of(t: TheoremResult) -> str:
    """'ok' when the verdict is what the catalogue expects; otherwise a short flag for humans.

    A control is refuted only by FAIL: a control that comes out PASS, VACUOUS or INCONCLUSIVE has lost
    the power to refute its false claim (CONTROL NOT REFUTED), and an ERROR is an ERROR either way.
    """
    if t.not_applicable:
        return "n/a"
    if t.verdict == t.expected:
        return "ok"
    if t.given_data and t.verdict == "VACUOUS":
        return "hyp. unmet"
    if t.known_finding:
        return "KNOWN FINDING"
    if t.verdict == "ERROR":
        return "ERROR"
    if t.control_of:
        return "CONTROL NOT REFUTED"
    return "UNEXPECTED"


def _finding_line(t: TheoremResult, bold: str = "") -> str:
    """The known finding, said as what this run shows: reproduced here, or only seen elsewhere."""
    where = "; ".join(f"{k}, instance{'s' if len(v) > 1 else ''} {', '.join(map(str, v))}"
                      for k, v in t.finding_seen.items())
    if t.known_finding:
        return f"{bold}Known finding, reproduced in this run{bold} (seen on {where}): {t.finding}"
    return f"Known finding, not drawn in this run (seen on {where}): {t.finding}"


def fails_run(t: TheoremResult) -> bool:
    """Whether this theorem's result makes `attnsvm check` exit 1 (and junit count a failure/error)."""
    return status_of(t) not in QUIET


def report_dict(run: dict[str, Any], theorems: Sequence[TheoremResult]) -> dict[str, Any]:
    out = {"schema": SCHEMA, "run": run, "theorems": []}
    for t in theorems:
        d = t.to_json()
        d["status"] = status_of(t)
        out["theorems"].append(d)
    return out


def write_json(out: Path, run: dict[str, Any], theorems: Sequence[TheoremResult]) -> dict[str, Any]:
    rep = report_dict(run, theorems)
    write_text(out / "report.json", json.dumps(rep, indent=1, sort_keys=False) + "\n")
    return rep


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def _metric_lines(t: TheoremResult, limit: int = 12) -> list[str]:
    lines = []
    for name, s in list(t.metrics.items())[:limit]:
        lines.append(f"{name}: mean {_fmt(s['mean'])}, min {_fmt(s['min'])}, max {_fmt(s['max'])} (n={s['n']})")
    return lines


def summary_rows(theorems: Sequence[TheoremResult]) -> list[list[str]]:
    rows = []
    for t in theorems:
        c = t.counts
        rows.append([t.id, t.expected, "n/a" if t.not_applicable else t.verdict, status_of(t), str(c["instances"]), str(c["confirmed"]),
                     str(c["refuted"]), str(c["vacuous"]), str(c["inconclusive"]), str(c["error"])])
    return rows


HEAD = ["theorem", "expected", "verdict", "status", "inst", "conf", "refut", "vac", "inconcl", "err"]


def text_table(theorems: Sequence[TheoremResult]) -> str:
    rows = [HEAD] + summary_rows(theorems)
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_markdown(out: Path, rep: dict[str, Any], theorems: Sequence[TheoremResult]) -> None:
    run = rep["run"]
    L = [f"# attnsvm report — run {run['id']}", ""]
    L.append(f"profile **{run['profile']}**, seed **{run['seed']}**, device {run['device']}, "
             f"started {run['started']}, git {run.get('git')}"
             + (" — **INTERRUPTED (partial report)**" if run.get("interrupted") else ""))
    if run.get("data"):
        L.append(f"\ndata: `{run['data']}`")
    L += ["", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    L += ["| " + " | ".join(r) + " |" for r in summary_rows(theorems)]
    flagged = [t for t in theorems if status_of(t) not in ("ok", "n/a", "hyp. unmet")]
    if flagged:
        L += ["", "## Findings (verdict differs from expectation)", ""]
        for t in flagged:
            L.append(f"- **{t.id}**: expected {t.expected}, got {t.verdict} ({status_of(t)}). Replay: `{t.reproduce}`"
                     + (f"\n  Known finding: {t.finding}" if t.finding else ""))
    for t in theorems:
        L += ["", f"## {t.id} — {t.title}", "", f"*{t.reference}*"
              + (f" — negative control of `{t.control_of}`" if t.control_of else ""), ""]
        L.append(f"Statement: ${t.statement}$" if t.statement else "")
        if t.hypotheses_text:
            L.append(f"\nHypotheses implemented: {t.hypotheses_text}")
        if t.finding:
            L.append(f"\n{_finding_line(t, '**')}")
        if t.not_applicable:
            L.append(f"\n**Not applicable to the given data**: {t.not_applicable}")
            continue
        L.append(f"\nVerdict **{t.verdict}** (expected {t.expected}); "
                 f"{t.counts['confirmed']}/{t.counts['instances']} confirmed, PASS needs {t.min_confirmed} "
                 f"and at most {t.max_inconclusive:.0%} of the non-vacuous instances inconclusive.")
        if status_of(t) == "hyp. unmet":
            L.append("\n**The given data do not meet this theorem's hypotheses** (reasons below), so its claim says "
                     "nothing about them.")
        if t.hypotheses:
            L.append("\nHypothesis rates: " + ", ".join(
                f"{n} {h['held']}/{h['tested']}" for n, h in t.hypotheses.items()))
        ml = _metric_lines(t)
        if ml:
            L += ["", "Metrics:", ""] + [f"- {m}" for m in ml]
        if t.reasons:
            L += ["", "Why instances were not confirmed (count):", ""] + [f"- {k} ({v})" for k, v in t.reasons.items()]
        if t.counterexamples:
            L += ["", "Counterexamples: " + ", ".join(f"`{c}`" for c in t.counterexamples[:5])]
        L.append(f"\nReplay: `{t.reproduce}`")
        fig = out / "figures" / f"{safe_name(t.id)}.png"
        if fig.exists():
            L.append(f"\n![{t.id}](figures/{fig.name})")
    write_text(out / "report.md", "\n".join(L) + "\n")


def write_junit(out: Path, theorems: Sequence[TheoremResult]) -> None:
    """One testcase per theorem, consistent with the exit code: a failure or error exactly where
    :func:`fails_run`; skipped (with the reason) for n/a, hypotheses unmet on given data and known findings."""
    errors = sum(1 for t in theorems if fails_run(t) and t.verdict == "ERROR")
    fails = sum(1 for t in theorems if fails_run(t)) - errors
    skipped = sum(1 for t in theorems if not fails_run(t) and status_of(t) != "ok")
    total_time = sum(t.seconds for t in theorems)
    L = ['<?xml version="1.0" encoding="UTF-8"?>',
         f'<testsuite name="attnsvm" tests="{len(theorems)}" failures="{fails}" errors="{errors}" '
         f'skipped="{skipped}" time="{total_time:.3f}">']
    q = {'"': "&quot;"}
    for t in theorems:
        L.append(f'  <testcase classname="attnsvm.{xml_escape(t.control_of or t.id)}" '
                 f'name="{xml_escape(t.id)}" time="{t.seconds:.3f}">')
        st = status_of(t)
        msg = xml_escape(f"{st}: expected {t.expected}, got {t.verdict}; counts {t.counts}; replay: {t.reproduce}", q)
        if fails_run(t):
            L.append(f'    <{"error" if t.verdict == "ERROR" else "failure"} message="{msg}"/>')
        elif t.not_applicable:
            L.append(f'    <skipped message="{xml_escape("not applicable: " + t.not_applicable, q)}"/>')
        elif st == "KNOWN FINDING":
            L.append(f'    <skipped message="{xml_escape("known finding: " + (t.finding or ""), q)}"/>')
        elif st != "ok":
            L.append(f'    <skipped message="{msg}"/>')
        L.append("  </testcase>")
    L.append("</testsuite>")
    write_text(out / "junit.xml", "\n".join(L) + "\n")


COLORS = {"confirmed": "tab:green", "refuted": "tab:red", "vacuous": "tab:gray", "inconclusive": "tab:orange",
          "error": "black"}


def plot_theorem(out: Path, cls: Any, t: TheoremResult, results: Sequence[InstanceResult]) -> Path | None:
    """One figure per theorem: its plot metric per instance coloured by outcome, plus a series panel
    when instances recorded one (metric names ending in ``_curve``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not results:
        return None
    metric = getattr(cls, "plot_metric", None)
    if metric is None:
        for r in results:
            for k, v in r.metrics.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    metric = k
                    break
            if metric:
                break
    curves = [k for r in results for k, v in r.metrics.items() if k.endswith("_curve") and isinstance(v, list)]
    curve = curves[0] if curves else None
    ncol = 2 if (metric and curve) else 1
    fig, axes = plt.subplots(1, ncol + 1, figsize=(4.2 * (ncol + 1), 3.4), squeeze=False)
    axes = axes[0]
    # panel 1: outcome counts
    names = list(COLORS)
    axes[0].bar(names, [t.counts[n] for n in names], color=[COLORS[n] for n in names])
    axes[0].set_title(f"{t.id}: {t.verdict} (expected {t.expected})", fontsize=9)
    axes[0].set_ylabel("instances")
    axes[0].tick_params(axis="x", labelrotation=30, labelsize=8)
    col = 1
    if metric:
        ax = axes[col]
        col += 1
        for outcome, c in COLORS.items():
            pts = [(r.instance, r.metrics[metric]) for r in results
                   if r.outcome == outcome and isinstance(r.metrics.get(metric), (int, float))]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.scatter(xs, ys, s=14, color=c, label=outcome)
        ax.set_xlabel("instance")
        ax.set_ylabel(metric)
        ys_all = [r.metrics[metric] for r in results if isinstance(r.metrics.get(metric), (int, float))]
        if ys_all and min(ys_all) > 0 and max(ys_all) / max(min(ys_all), 1e-300) > 1e3:
            ax.set_yscale("log")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        ax.set_title(metric, fontsize=9)
    if curve:
        ax = axes[col]
        for r in results:
            ys = r.metrics.get(curve)
            if isinstance(ys, list) and ys:
                ys = [float(y) if isinstance(y, (int, float)) else np.nan for y in ys]
                ax.plot(range(len(ys)), ys, color=COLORS.get(r.outcome, "k"), alpha=0.5, lw=1)
        ax.set_xlabel("record index")
        ax.set_ylabel(curve)
        ax.set_title(curve, fontsize=9)
        vals = [y for r in results for y in (r.metrics.get(curve) or []) if isinstance(y, (int, float))]
        if vals and min(vals) > 0 and max(vals) / min(vals) > 1e3:
            ax.set_yscale("log")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    path = out / "figures" / f"{safe_name(t.id)}.png"
    write_bytes(path, buf.getvalue())
    return path


def write_html(out: Path, rep: dict[str, Any], theorems: Sequence[TheoremResult]) -> None:
    run = rep["run"]
    css = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
           "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}"
           ".ok{color:#070}.bad{color:#b00;font-weight:bold}.na{color:#777}"
           "pre{background:#f6f6f6;padding:4px}")
    H = [f"<!doctype html><html><head><meta charset='utf-8'><title>attnsvm report {html.escape(run['id'])}</title>",
         f"<style>{css}</style></head><body>",
         f"<h1>attnsvm report</h1><p>run {html.escape(run['id'])}; profile <b>{run['profile']}</b>, seed "
         f"<b>{run['seed']}</b>, device {html.escape(str(run['device']))}, started {run['started']}, "
         f"git {html.escape(str(run.get('git')))}</p>"]
    if run.get("interrupted"):
        H.append("<p class='bad'>INTERRUPTED — partial report; `attnsvm check --resume` finishes it.</p>")
    H.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in HEAD) + "</tr>")
    for t, row in zip(theorems, summary_rows(theorems), strict=True):
        st = status_of(t)
        cls_ = "ok" if st == "ok" else ("na" if st in ("n/a", "hyp. unmet") else "bad")
        cells = [f"<a href='#{safe_name(t.id)}'>{html.escape(row[0])}</a>"] + [html.escape(c) for c in row[1:]]
        cells[3] = f"<span class='{cls_}'>{cells[3]}</span>"
        H.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    H.append("</table>")
    for t in theorems:
        H.append(f"<h2 id='{safe_name(t.id)}'>{html.escape(t.id)} — {html.escape(t.title)}</h2>")
        H.append(f"<p><i>{html.escape(t.reference)}</i>"
                 + (f" — negative control of <code>{html.escape(t.control_of)}</code>" if t.control_of else "") + "</p>")
        if t.statement:
            H.append(f"<p>Statement (LaTeX): <code>{html.escape(t.statement)}</code></p>")  # no network: no MathJax
        if t.hypotheses_text:
            H.append(f"<p>Hypotheses implemented: {html.escape(t.hypotheses_text)}</p>")
        if t.finding:
            H.append(f"<p class='{'bad' if t.known_finding else 'na'}'>{html.escape(_finding_line(t))}</p>")
        if t.not_applicable:
            H.append(f"<p class='na'>Not applicable to the given data: {html.escape(t.not_applicable)}</p>")
            continue
        H.append(f"<p>Verdict <b>{t.verdict}</b> (expected {t.expected}): {t.counts['confirmed']}/"
                 f"{t.counts['instances']} confirmed; PASS needs {t.min_confirmed} and at most "
                 f"{t.max_inconclusive:.0%} of the non-vacuous instances inconclusive. Counts: "
                 f"{html.escape(json.dumps(t.counts))}</p>")
        if status_of(t) == "hyp. unmet":
            H.append("<p class='na'>The given data do not meet this theorem's hypotheses (reasons below), so its "
                     "claim says nothing about them.</p>")
        if t.hypotheses:
            H.append("<p>Hypothesis rates: " + ", ".join(
                f"{html.escape(n)} {h['held']}/{h['tested']}" for n, h in t.hypotheses.items()) + "</p>")
        ml = _metric_lines(t)
        if ml:
            H.append("<ul>" + "".join(f"<li>{html.escape(m)}</li>" for m in ml) + "</ul>")
        if t.reasons:
            H.append("<p>Why instances were not confirmed:</p><ul>" + "".join(
                f"<li>{html.escape(k)} ({v})</li>" for k, v in t.reasons.items()) + "</ul>")
        if t.counterexamples:
            H.append("<p>Counterexamples: " + ", ".join(f"<code>{html.escape(c)}</code>"
                                                        for c in t.counterexamples[:5]) + "</p>")
        H.append(f"<p>Replay: <code>{html.escape(t.reproduce)}</code></p>")
        fig = out / "figures" / f"{safe_name(t.id)}.png"
        if fig.exists():
            b64 = base64.b64encode(fig.read_bytes()).decode()
            H.append(f"<img alt='{html.escape(t.id)}' src='data:image/png;base64,{b64}'/>")
    H.append("</body></html>")
    write_text(out / "report.html", "\n".join(H) + "\n")


def save_counterexample(out: Path, theorem_id: str, k: int, inst: Any, replay: str) -> str | None:
    """Write the refuted instance's data as .npz (plus a .replay.txt); returns the relative path."""
    data = inst if isinstance(inst, AttentionData) else getattr(inst, "data", None)
    if isinstance(inst, (tuple, list)):
        data = next((x for x in inst if isinstance(x, AttentionData)), None)
    rel = f"counterexamples/{safe_name(theorem_id)}-{k}.npz"
    if isinstance(data, AttentionData):
        write_bytes(out / rel, data.to_npz_bytes())
    else:
        arrays = {}
        src = inst if isinstance(inst, dict) else getattr(inst, "__dict__", {})
        for key, val in src.items():
            if isinstance(val, (np.ndarray, int, float)) and np.asarray(val).dtype.kind in "fiub":
                arrays[str(key)] = np.asarray(val)
        if not arrays:
            return None
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        write_bytes(out / rel, buf.getvalue())
    write_text(out / (rel[:-4] + ".replay.txt"), replay + "\n")
    return rel

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

from ..harness import SIZE_KEYS, InstanceResult, TheoremResult

SCHEMA = 1
#: Where a reader finds the mathematics and the contracts (in the repository, beside the README).
DOCS_LINE = ("The mathematics, every statement with the exact hypotheses implemented, and the decision rules: "
             "docs/theory.md; report fields, verdicts and exit codes: docs/architecture.md.")


def safe_name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


#: Statuses that do not fail the run: as expected, not applicable to the given data, (on given data) vacuous
#: because the data do not meet the theorem's hypotheses — a statement about the data, named in the reasons —
#: or a FAIL on exactly the documented counterexamples of a known finding (same profile, seed and instances).
#: Every other status fails the run (exit 1): UNEXPECTED, CONTROL NOT REFUTED, ERROR. ``undecided`` is a
#: theorem left INCONCLUSIVE by *given* data (``--data``): the budget did not decide the user's instances, which
#: says nothing about the suite's power (on its own random family INCONCLUSIVE is UNEXPECTED and fails the run).
QUIET = ("ok", "n/a", "hyp. unmet", "undecided", "KNOWN FINDING")


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
    if t.given_data and t.verdict == "INCONCLUSIVE" and not t.control_of:
        return "undecided"
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


VERDICT_ORDER = ("PASS", "FAIL", "INCONCLUSIVE", "VACUOUS", "ERROR")
COUNT_KEYS = ("instances", "confirmed", "refuted", "vacuous", "inconclusive", "error")


def _metric_lines(t: TheoremResult, limit: int = 12) -> list[str]:
    lines = []
    shown = [(k, s) for k, s in t.metrics.items() if k not in SIZE_KEYS]
    for name, s in shown[:limit]:
        lines.append(f"{name}: mean {_fmt(s['mean'])}, min {_fmt(s['min'])}, max {_fmt(s['max'])} (n={s['n']})")
    return lines


def sizes_text(t: TheoremResult) -> str:
    """The instances' sizes as ranges, e.g. ``n 4–8, T 5, d 6``; '' when no instance recorded them."""
    parts = []
    for k in SIZE_KEYS:
        s = t.metrics.get(k)
        if s:
            lo, hi = int(round(s["min"])), int(round(s["max"]))
            parts.append(f"{k} {lo}" if lo == hi else f"{k} {lo}–{hi}")
    return ", ".join(parts)


def criteria_rows(t: TheoremResult) -> list[tuple[str, str, str]]:
    """(quantity, rule, threshold) per declared criterion."""
    return [(str(c.get("name", "")), str(c.get("rule", "")).strip(),
             "" if c.get("value") is None else _fmt(c["value"])) for c in t.criteria]


def inconclusive_text(t: TheoremResult) -> str:
    c = t.counts
    eligible = c["instances"] - c["vacuous"]
    need = f"PASS needs at most {t.max_inconclusive:.0%} inconclusive and at least {t.min_confirmed} confirmed"
    if not eligible:
        return f"no instance met the hypotheses, so none was decided; {need}"
    return (f"inconclusive share {c['inconclusive'] / eligible:.0%} ({c['inconclusive']} of {eligible} "
            f"non-vacuous instances); {need}")


def reference_text(t: TheoremResult) -> str:
    return f"{t.theorem_number} — {t.reference}" if t.theorem_number else t.reference


def replay_lines(out: Path, t: TheoremResult) -> list[tuple[str, str]]:
    """(counterexample file, its exact replay command with --instance K) per saved counterexample."""
    rows = []
    for rel in t.counterexamples:
        txt = out / (rel[:-4] + ".replay.txt") if rel.endswith(".npz") else None
        if txt is not None and txt.exists():
            rows.append((rel, txt.read_text(encoding="utf-8").strip()))
        else:
            m = re.search(r"-(\d+)\.npz$", rel)
            rows.append((rel, f"{t.reproduce} --instance {m.group(1)}" if m else t.reproduce))
    return rows


def _top_reasons(t: TheoremResult, outcomes: Sequence[str], k: int = 2) -> list[str]:
    return [f"{r} ({n}×)" for r, n in t.reasons.items() if r.split(":", 1)[0] in outcomes][:k]


def run_summary(theorems: Sequence[TheoremResult]) -> dict[str, Any]:
    """What a reader needs first: verdict and status counts, what failed the run and why, what was not
    decided (INCONCLUSIVE/VACUOUS) and why, and the known findings reproduced."""
    verdicts: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for t in theorems:
        v = "n/a" if t.not_applicable else t.verdict
        verdicts[v] = verdicts.get(v, 0) + 1
        statuses[status_of(t)] = statuses.get(status_of(t), 0) + 1
    order = {v: i for i, v in enumerate(VERDICT_ORDER)}
    verdicts = dict(sorted(verdicts.items(), key=lambda kv: order.get(kv[0], 99)))
    undecided_v = ("INCONCLUSIVE", "VACUOUS")
    failed = [(t, _top_reasons(t, ("refuted", "error"))) for t in theorems
              if fails_run(t) and t.verdict not in undecided_v]
    undecided = [(t, _top_reasons(t, ("inconclusive",) if t.verdict == "INCONCLUSIVE" else ("vacuous",)))
                 for t in theorems if not t.not_applicable and t.verdict in undecided_v]
    known = [t for t in theorems if status_of(t) == "KNOWN FINDING"]
    return {"verdicts": verdicts, "statuses": statuses, "failed": failed, "undecided": undecided,
            "known": known, "fails": sum(1 for t in theorems if fails_run(t))}


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


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def write_markdown(out: Path, rep: dict[str, Any], theorems: Sequence[TheoremResult]) -> None:
    run = rep["run"]
    L = [f"# attnsvm report — run {run['id']}", ""]
    L.append(f"profile **{run['profile']}**, seed **{run['seed']}**, device {run['device']}, "
             f"started {run['started']}, git {run.get('git')}"
             + (" — **INTERRUPTED (partial report)**" if run.get("interrupted") else ""))
    if run.get("data"):
        L.append(f"\ndata: `{run['data']}`")
    L.append(f"\n{DOCS_LINE}")
    S = run_summary(theorems)
    L += ["", "## Summary", "",
          "Verdicts: " + ", ".join(f"{v} {n}" for v, n in S["verdicts"].items())
          + "; statuses: " + ", ".join(f"{s} {n}" for s, n in S["statuses"].items()) + ". "
          + (f"**{S['fails']} theorem(s) fail the run.**" if S["fails"] else "Nothing fails the run.")]
    if S["failed"]:
        L += ["", "**Failed** (status, verdict, why):", ""]
        L += [f"- [{t.id}](#{safe_name(t.id)}): {status_of(t)}, {t.verdict} (expected {t.expected})"
              + ("".join(f"\n  - {r}" for r in why)) for t, why in S["failed"]]
    if S["undecided"]:
        L += ["", "**Not decided** (INCONCLUSIVE / VACUOUS, why):", ""]
        L += [f"- [{t.id}](#{safe_name(t.id)}): {t.verdict}, {status_of(t)}"
              + ("".join(f"\n  - {r}" for r in why)) for t, why in S["undecided"]]
    if S["known"]:
        L += ["", "**Known findings reproduced**: " + ", ".join(t.id for t in S["known"])]
    L += ["", "## Contents", "", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    L += ["| " + " | ".join([f"[{r[0]}](#{safe_name(r[0])})"] + r[1:]) + " |" for r in summary_rows(theorems)]
    L.append("\nTolerances, package versions and solver settings of this run: [Run settings](#run-settings).")
    for t in theorems:
        L += ["", f"<a id=\"{safe_name(t.id)}\"></a>", f"## {t.id} — {t.title}", "", f"*{reference_text(t)}*"
              + (f" — negative control of `{t.control_of}`" if t.control_of else ""), ""]
        L.append(f"Statement: ${t.statement}$" if t.statement else "")
        if t.hypotheses_text:
            L.append(f"\nHypotheses implemented: {t.hypotheses_text}")
        if t.finding:
            L.append(f"\n{_finding_line(t, '**')}")
        if t.not_applicable:
            L.append(f"\n**Not applicable to the given data**: {t.not_applicable}")
            continue
        L.append(f"\nVerdict **{t.verdict}** (expected {t.expected}), status {status_of(t)}; "
                 f"{inconclusive_text(t)}.")
        L += ["", "| " + " | ".join(COUNT_KEYS) + " |", "|" + "---|" * len(COUNT_KEYS),
              "| " + " | ".join(str(t.counts.get(k, 0)) for k in COUNT_KEYS) + " |"]
        if status_of(t) == "hyp. unmet":
            L.append("\n**The given data do not meet this theorem's hypotheses** (reasons below), so its claim says "
                     "nothing about them.")
        crit = criteria_rows(t)
        if crit:
            L += ["", "Decision criteria:", ""] + [f"- {_md_cell(n)} {_md_cell(r)} {v}".rstrip() for n, r, v in crit]
        else:
            L.append("\nDecision criteria: criteria not declared.")
        sz = sizes_text(t)
        if sz:
            L.append(f"\nInstance sizes: {sz}")
        if t.hypotheses:
            L.append("\nHypothesis rates: " + ", ".join(
                f"{n} {h['held']}/{h['tested']}" for n, h in t.hypotheses.items()))
        ml = _metric_lines(t)
        if ml:
            L += ["", "Metrics:", ""] + [f"- {m}" for m in ml]
        if t.reasons:
            L += ["", "Why instances were not confirmed (count):", ""] + [f"- {k} ({v})" for k, v in t.reasons.items()]
        rl = replay_lines(out, t)
        if rl:
            L += ["", "Counterexamples (file: exact replay):", ""] + [f"- `{p}`: `{c}`" for p, c in rl]
        L.append(f"\nReplay the theorem: `{t.reproduce}`")
        fig = out / "figures" / f"{safe_name(t.id)}.png"
        if fig.exists():
            L.append(f"\n![{t.id}](figures/{fig.name})")
    L += ["", "<a id=\"run-settings\"></a>", "## Run settings", ""]
    L += [f"- {k}: {v}" for k, v in _settings(run).items()]
    write_text(out / "report.md", "\n".join(L) + "\n")


def _settings(run: dict[str, Any]) -> dict[str, str]:
    """Package versions, solver settings and tolerances of the run, flattened for display."""
    out: dict[str, str] = {}
    for key in ("versions", "solver", "settings", "gd", "tolerances"):
        val = run.get(key)
        if isinstance(val, dict):
            for k, v in val.items():
                out[f"{key}.{k}"] = _fmt(v) if not isinstance(v, (dict, list)) else json.dumps(v)
    for note in run.get("data_notes", []) or []:
        out.setdefault("data notes", "")
        out["data notes"] += ("; " if out["data notes"] else "") + str(note)
    return out

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


def _num(y: Any) -> float:
    return float(y) if isinstance(y, (int, float)) and not isinstance(y, bool) else float("nan")


def curve_series(results: Sequence[InstanceResult], curve: str) -> list[dict[str, Any]]:
    """The data of one ``*_curve`` panel: per instance, x (the GD iteration when the instance records
    ``<name>_iterations`` or ``iterations`` of the same length, else the record index), y, and outcome."""
    base = curve[: -len("_curve")] if curve.endswith("_curve") else curve
    out = []
    for r in results:
        ys = r.metrics.get(curve)
        if not (isinstance(ys, list) and ys):
            continue
        xs = r.metrics.get(f"{base}_iterations", r.metrics.get("iterations"))
        by_iter = isinstance(xs, list) and len(xs) == len(ys)
        out.append({"instance": r.instance, "outcome": r.outcome, "iterations": by_iter,
                    "x": [_num(x) for x in xs] if by_iter else list(range(len(ys))), "y": [_num(y) for y in ys]})
    return out


def _thresholds(t: TheoremResult, metric: str) -> list[tuple[float, str]]:
    return [(float(c["value"]), f"{c['rule'].strip()} {_fmt(c['value'])}") for c in t.criteria
            if c.get("plot_metric") == metric and isinstance(c.get("value"), (int, float))
            and not isinstance(c.get("value"), bool)]


def _set_yscale(ax: Any, vals: Sequence[float], error_like: bool) -> str:
    """log for an error metric or positive values spanning > 3 decades; symlog when values of both signs
    (or zeros) span > 3 decades; linear otherwise. Returns the scale set."""
    a = np.asarray([v for v in vals if np.isfinite(v)], dtype=float)
    if a.size == 0:
        return "linear"
    nz = np.abs(a[a != 0])
    span = nz.size and nz.max() / nz.min() > 1e3
    if (a > 0).all() and (error_like or span):
        ax.set_yscale("log")
        return "log"
    if span:
        from matplotlib.ticker import FixedLocator

        lin = float(nz.min())
        lo, hi = int(np.ceil(np.log10(lin))), int(np.floor(np.log10(nz.max())))
        # at most ~8 labelled decades: a tick every `step` decades; the linear part around 0 as wide as a step
        step = max(1, int(np.ceil((hi - lo + 1) / 8)))
        ax.set_yscale("symlog", linthresh=lin, linscale=float(step))
        pos = [10.0 ** k for k in range(lo, hi + 1, step)]
        ticks = [0.0] + pos + ([-x for x in pos if x <= -a.min()] if a.min() < 0 else [])
        ax.yaxis.set_major_locator(FixedLocator(sorted(ticks)))
        ax.yaxis.set_minor_locator(FixedLocator([]))
        if a.min() >= 0:
            ax.set_ylim(bottom=-0.5 * lin)  # no empty negative half for non-negative values
        return "symlog"
    if error_like and (a > 0).any():
        ax.set_yscale("log")  # zeros (exact agreement) drop out of a log axis; they are below every threshold
        return "log"
    return "linear"


def _error_like(name: str) -> bool:
    return "err" in name.lower()


def _legend(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for h, lab in zip(handles, labels, strict=True):
        seen.setdefault(lab, h)
    if seen:
        ax.legend(list(seen.values()), list(seen), fontsize=7)


def plot_theorem(out: Path, cls: Any, t: TheoremResult, results: Sequence[InstanceResult]) -> Path | None:
    """One small figure per theorem: its plot metric per instance, and up to two ``*_curve`` series
    against the GD iteration (see :func:`curve_series`), instances coloured by outcome, the criteria's
    thresholds as dashed lines, log scales where values are errors or span more than three decades."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    path = out / "figures" / f"{safe_name(t.id)}.png"
    metric = getattr(cls, "plot_metric", None)
    if metric is None:
        metric = next((k for r in results for k, v in r.metrics.items() if k not in SIZE_KEYS
                       and isinstance(v, (int, float)) and not isinstance(v, bool)), None)
    curves: list[str] = []
    for r in results:
        for k, v in r.metrics.items():
            if k.endswith("_curve") and isinstance(v, list) and k not in curves:
                curves.append(k)
    curves = curves[:2]
    has_metric = metric is not None and any(np.isfinite(_num(r.metrics.get(metric))) for r in results)
    panels = ([metric] if has_metric else []) + curves
    if not results or not panels:
        path.unlink(missing_ok=True)  # no stale figure from an earlier run in this folder
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.0), squeeze=False)
    axes = axes[0]
    for ax, name in zip(axes, panels, strict=True):
        vals: list[float] = []
        if name == metric:
            for outcome, c in COLORS.items():
                pts = [(r.instance, _num(r.metrics.get(metric))) for r in results if r.outcome == outcome]
                pts = [p for p in pts if np.isfinite(p[1])]
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    ax.scatter(xs, ys, s=14, color=c, label=outcome)
                    vals += ys
            ax.set_xlabel("instance")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        else:
            series = curve_series(results, name)
            for s in series:
                ax.plot(s["x"], s["y"], color=COLORS.get(s["outcome"], "k"), alpha=0.6, lw=1, label=s["outcome"])
                vals += s["y"]
            iters = bool(series) and all(s["iterations"] for s in series)
            ax.set_xlabel("GD iteration" if iters else "record index")
        for y, lab in _thresholds(t, name):
            ax.axhline(y, color="k", ls="--", lw=1, label=f"threshold {lab}")
            vals.append(y)
        _set_yscale(ax, vals, _error_like(name))
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=8)
        _legend(ax)
    fig.suptitle(f"{t.id}: {t.verdict} (expected {t.expected})", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    write_bytes(path, buf.getvalue())
    return path


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
        H.append(f"<p class='na'>Not applicable to the given data: {html.escape(t.not_applicable)}</p></details>")
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
        H.append("<p>Decision criteria:</p><table class='crit'><tr><th>quantity</th><th>rule</th><th>threshold</th>"
                 "</tr>" + "".join(f"<tr><td>{html.escape(n)}</td><td>{html.escape(r)}</td><td>{html.escape(v)}"
                                   f"</td></tr>" for n, r, v in crit) + "</table>")
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
        more = (f"<details><summary>{len(li) - 5} more counterexamples</summary><ul class='why'>{''.join(li[5:])}"
                f"</ul></details>" if len(li) > 5 else "")
        H.append(f"<p>Counterexamples (file: exact replay):</p><ul class='why'>{''.join(li[:5])}</ul>{more}")
    H.append(f"<p>Replay the theorem: <code>{html.escape(t.reproduce)}</code></p>")
    fig = out / "figures" / f"{safe_name(t.id)}.png"
    if fig.exists():
        b64 = base64.b64encode(fig.read_bytes()).decode()
        H.append(f"<img alt='{html.escape(t.id)} figure' src='data:image/png;base64,{b64}'/>")
    H.append(f"<details class='settings'><summary>tolerances, package versions and solver settings of this run"
             f"</summary>{settings_html}</details></details>")
    return H


def write_html(out: Path, rep: dict[str, Any], theorems: Sequence[TheoremResult]) -> None:
    run = rep["run"]
    css = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em;line-height:1.35}"
           "table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;"
           "text-align:left}th{background:#f3f3f3}"
           ".ok{color:#070}.bad{color:#b00;font-weight:bold}.na{color:#666}"
           "code{background:#f6f6f6;overflow-wrap:anywhere}li{overflow-wrap:anywhere;margin:2px 0}"
           "details.thm{border:1px solid #ddd;border-radius:4px;padding:2px 10px;margin:6px 0}"
           "details.thm>summary{cursor:pointer;padding:4px 0;font-size:15px}"
           "details.settings>summary{cursor:pointer;color:#555;font-size:13px}"
           ".stmt{overflow-x:auto;overflow-y:hidden;font-size:115%;padding:4px 0}img{max-width:100%}")
    H = [f"<!doctype html><html><head><meta charset='utf-8'><title>attnsvm report {html.escape(run['id'])}</title>",
         f"<style>{css}</style></head><body>",
         f"<h1>attnsvm report</h1><p>run {html.escape(run['id'])}; profile <b>{run['profile']}</b>, seed "
         f"<b>{run['seed']}</b>, device {html.escape(str(run['device']))}, started {run['started']}, "
         f"git {html.escape(str(run.get('git')))}"
         + (f"; data <code>{html.escape(str(run['data']))}</code>" if run.get("data") else "") + "</p>"]
    H.append(f"<p>{html.escape(DOCS_LINE)}</p>")
    if run.get("interrupted"):
        H.append("<p class='bad'>INTERRUPTED — partial report; `attnsvm check --resume` finishes it.</p>")
    H += _html_summary(run_summary(theorems))
    H.append("<nav id='toc'><h2>Contents</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in HEAD) + "</tr>")
    for t, row in zip(theorems, summary_rows(theorems), strict=True):
        cells = [f"<a href='#{safe_name(t.id)}'>{html.escape(row[0])}</a>"] + [html.escape(c) for c in row[1:]]
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

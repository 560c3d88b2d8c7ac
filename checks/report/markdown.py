"""report.md."""

from __future__ import annotations

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
    inconclusive_text,
    reference_text,
    replay_lines,
    run_summary,
    safe_name,
    sizes_text,
    status_of,
    summary_rows,
)


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
        L += _theorem_section(out, t)
    L += ["", "<a id=\"run-settings\"></a>", "## Run settings", ""]
    L += [f"- {k}: {v}" for k, v in _settings(run).items()]
    write_text(out / "report.md", "\n".join(L) + "\n")


def _theorem_section(out: Path, t: TheoremResult) -> list[str]:
    """The report.md section of one theorem."""
    L: list[str] = []
    L += ["", f"<a id=\"{safe_name(t.id)}\"></a>", f"## {t.id} — {t.title}", "", f"*{reference_text(t)}*"
          + (f" — negative control of `{t.control_of}`" if t.control_of else ""), ""]
    L.append(f"Statement: ${t.statement}$" if t.statement else "")
    if t.hypotheses_text:
        L.append(f"\nHypotheses implemented: {t.hypotheses_text}")
    if t.finding:
        L.append(f"\n{_finding_line(t, '**')}")
    if t.not_applicable:
        L.append(f"\n**Not applicable to the given data**: {t.not_applicable}")
        return L
    L.append(f"\nVerdict **{t.verdict}** (expected {t.expected}), status {status_of(t)}; "
             f"{inconclusive_text(t)}.")
    L += ["", "| " + " | ".join(COUNT_KEYS) + " |", "|" + "---|" * len(COUNT_KEYS),
          "| " + " | ".join(str(t.counts.get(k, 0)) for k in COUNT_KEYS) + " |"]
    if status_of(t) == "hyp. unmet":
        L.append(
            "\n**The given data do not meet this theorem's hypotheses** (reasons below), so its claim says "
            "nothing about them."
        )
    crit = criteria_rows(t)
    if crit:
        L += ["", "Decision criteria:", ""] + [
            f"- {_md_cell(n)} {_md_cell(r)} {v}".rstrip() for n, r, v in crit
        ]
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
        L += ["", "Why instances were not confirmed (count):", ""] + [
            f"- {k} ({v})" for k, v in t.reasons.items()
        ]
    rl = replay_lines(out, t)
    if rl:
        L += ["", "Counterexamples (file: exact replay):", ""] + [f"- `{p}`: `{c}`" for p, c in rl]
    L.append(f"\nReplay the theorem: `{t.reproduce}`")
    fig = out / "figures" / f"{safe_name(t.id)}.png"
    if fig.exists():
        L.append(f"\n![{t.id}](figures/{fig.name})")
    return L

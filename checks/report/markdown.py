"""report.md."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from numerics.fileio import write_text

from ..harness import TheoremResult
from .model import (
    DOCS_LINE,
    HEAD,
    _settings,
    run_summary,
    safe_name,
    status_of,
    summary_rows,
)
from .sections import theorem_blocks, to_markdown


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
    """The report.md section of one theorem: its heading, then the shared section model (sections.py)."""
    head = ["", f"<a id=\"{safe_name(t.id)}\"></a>", f"## {t.id} — {t.title}"]
    return head + to_markdown(theorem_blocks(out, t))

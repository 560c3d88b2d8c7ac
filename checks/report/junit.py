"""junit.xml: one testcase per theorem, consistent with the exit code."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from numerics.fileio import write_text

from ..harness import TheoremResult
from .model import (
    fails_run,
    status_of,
)


def write_junit(out: Path, theorems: Sequence[TheoremResult]) -> None:
    """One testcase per theorem, consistent with the exit code: a failure or error exactly where
    :func:`fails_run`; skipped (with the reason) for n/a, hypotheses unmet on given data and known
    findings."""
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
        msg = xml_escape(
            f"{st}: expected {t.expected}, got {t.verdict}; counts {t.counts}; replay: {t.reproduce}", q
        )
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

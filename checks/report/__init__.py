"""Rendering a run: report.json (schema 1), report.md, a self-contained report.html, junit.xml,
figures/*.png and counterexamples/*.npz. Reports are rendered only from result dataclasses.

One module per output: :mod:`.model` (statuses, the run summary and the rows every format shows,
report.json, counterexamples), :mod:`.sections` (the section model of a theorem, built once and rendered
to Markdown and HTML), :mod:`.markdown`, :mod:`.html`, :mod:`.junit`, :mod:`.plots`; their public
names are re-exported as ``checks.report``, private helpers are imported from their module."""

from __future__ import annotations

from .html import (
    math_html,
    write_html,
)
from .junit import (
    write_junit,
)
from .markdown import (
    write_markdown,
)
from .model import (
    COUNT_KEYS,
    DOCS_LINE,
    HEAD,
    QUIET,
    SCHEMA,
    VERDICT_ORDER,
    criteria_rows,
    fails_run,
    inconclusive_text,
    lost_power,
    reference_text,
    refuted_by_text,
    replay_lines,
    report_dict,
    run_summary,
    safe_name,
    save_counterexample,
    sizes_text,
    status_of,
    summary_rows,
    text_table,
    write_json,
)
from .plots import (
    COLORS,
    curve_series,
    plot_theorem,
)
from .sections import theorem_blocks, to_html, to_markdown

__all__ = [
    "theorem_blocks",
    "to_html",
    "to_markdown",
    "COLORS",
    "COUNT_KEYS",
    "DOCS_LINE",
    "HEAD",
    "QUIET",
    "SCHEMA",
    "VERDICT_ORDER",
    "criteria_rows",
    "curve_series",
    "fails_run",
    "inconclusive_text",
    "lost_power",
    "math_html",
    "plot_theorem",
    "reference_text",
    "refuted_by_text",
    "replay_lines",
    "report_dict",
    "run_summary",
    "safe_name",
    "save_counterexample",
    "sizes_text",
    "status_of",
    "summary_rows",
    "text_table",
    "write_html",
    "write_json",
    "write_junit",
    "write_markdown",
]

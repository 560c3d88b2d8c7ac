"""Rendering a run: report.json (schema 1), report.md, a self-contained report.html, junit.xml,
figures/*.png and counterexamples/*.npz. Reports are rendered only from result dataclasses.

One module per output: :mod:`.model` (statuses, the run summary and the rows every format shows,
report.json, counterexamples), :mod:`.sections` (the section model of a theorem, built once and rendered
to Markdown and HTML), :mod:`.markdown`, :mod:`.html`, :mod:`.junit`, :mod:`.plots`; every name stays
importable from ``checks.report``."""

from __future__ import annotations

from .html import (
    _badge,
    _html_summary,
    _html_theorem,
    _kv_table,
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
    _finding_line,
    _fmt,
    _fmt_threshold,
    _metric_lines,
    _settings,
    _top_reasons,
    criteria_rows,
    fails_run,
    inconclusive_text,
    reference_text,
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
    _error_like,
    _legend,
    _num,
    _set_yscale,
    _thresholds,
    curve_series,
    plot_theorem,
)
from .sections import _STATUS_CLASS, _md_cell, theorem_blocks, to_html, to_markdown

__all__ = [
    "_fmt_threshold",
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
    "_STATUS_CLASS",
    "_badge",
    "_error_like",
    "_finding_line",
    "_fmt",
    "_html_summary",
    "_html_theorem",
    "_kv_table",
    "_legend",
    "_md_cell",
    "_metric_lines",
    "_num",
    "_set_yscale",
    "_settings",
    "_thresholds",
    "_top_reasons",
    "criteria_rows",
    "curve_series",
    "fails_run",
    "inconclusive_text",
    "math_html",
    "plot_theorem",
    "reference_text",
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

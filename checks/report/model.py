"""What a report says about a run, independent of the output format: statuses, the run summary, the
text rows shared by report.md, report.html and the terminal table, report.json, counterexample files."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from numerics.data import AttentionData
from numerics.fileio import write_bytes, write_text

from ..harness import SIZE_KEYS, TheoremResult

SCHEMA = 1
#: Where a reader finds the mathematics and the contracts (in the repository, beside the README).
DOCS_LINE = (
    "The mathematics, every statement with the exact hypotheses implemented, and the decision rules: "
    "docs/theory.md (a plugin theorem: the docstring its section names); report fields, verdicts and exit "
    "codes: docs/architecture.md."
)


def safe_name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


#: Statuses that do not fail the run: as expected, not applicable to the given data, (on given data) vacuous
#: because the data do not meet the theorem's hypotheses — a statement about the data, named in the reasons —
#: or a FAIL only on a known finding's instances (recognised by its mechanism, or listed for this profile and
#: seed) while the other instances PASS on their own.
#: Every other status fails the run (exit 1): UNEXPECTED, CONTROL NOT REFUTED, ERROR. ``undecided`` is a
#: theorem left INCONCLUSIVE by *given* data (``--data``): the budget did not decide the user's instances,
#: which
#: says nothing about the suite's power (on its own random family INCONCLUSIVE is UNEXPECTED and fails the
#: run).
#: UNDECIDABLE: INCONCLUSIVE where the theorem documents (Theorem.undecidable, measured) that its own
#: algorithm cannot decide the claim in float64; named with its reason in the summary, never a PASS.
QUIET = ("ok", "n/a", "hyp. unmet", "undecided", "KNOWN FINDING", "UNDECIDABLE")


def status_of(t: TheoremResult) -> str:
    """'ok' when the verdict is what the catalogue expects; otherwise a short flag for humans.

    A control is refuted only by FAIL: a control that comes out PASS, VACUOUS or INCONCLUSIVE has lost
    the power to refute its false claim (CONTROL NOT REFUTED), and an ERROR is an ERROR either way.
    """
    if t.not_applicable:
        return "n/a"
    if lost_power(t):
        return "CONTROL LOST POWER"
    if t.verdict == t.expected:
        return "ok"
    if t.given_data and t.verdict == "VACUOUS":
        return "hyp. unmet"
    if t.given_data and t.verdict == "INCONCLUSIVE" and not t.control_of:
        return "undecided"
    if t.known_finding:
        return "KNOWN FINDING"
    if t.undecidable and t.verdict == "INCONCLUSIVE":
        return "UNDECIDABLE"
    if t.verdict == "ERROR":
        return "ERROR"
    if t.control_of:
        return "CONTROL NOT REFUTED"
    return "UNEXPECTED"


def lost_power(t: TheoremResult) -> bool:
    """A control FAILed, but every refuted instance was refuted by ``integrity`` predictions alone (broken
    numerics on that instance, e.g. a wrong autograd reference), never by its false claim: no evidence of
    power."""
    return bool(t.control_of and t.verdict == "FAIL" and t.integrity_only
                and len(t.integrity_only) == t.counts.get("refuted", 0))


def refuted_by_text(t: TheoremResult) -> str:
    """"pred (k instances), ..." with the integrity-only instances named, or "" when nothing was refuted."""
    if not t.refuted_by:
        return ""
    s = ", ".join(f"{p} ({n} instance{'s' if n != 1 else ''})" for p, n in t.refuted_by.items())
    if t.integrity_only:
        s += (f"; refuted by integrity predictions alone: instance{'s' if len(t.integrity_only) > 1 else ''} "
              f"{', '.join(map(str, t.integrity_only))}")
    return s


def _finding_line(t: TheoremResult, bold: str = "") -> str:
    """The known finding, said as what this run shows: reproduced here, or only seen elsewhere."""
    where = "; ".join(f"{k}, instance{'s' if len(v) > 1 else ''} {', '.join(map(str, v))}"
                      for k, v in t.finding_seen.items())
    how = "recognised by its mechanism on any seed; " if t.finding_by_mechanism else ""
    mine = t.finding_instances
    here = f"instance{'s' if len(mine) > 1 else ''} {', '.join(map(str, mine))} of this run; " if mine else ""
    if t.known_finding:
        return f"{bold}Known finding, reproduced in this run{bold} ({here}{how}seen on {where}): {t.finding}"
    if mine:  # matched, but the run fails for other reasons (other refutations or undecided instances)
        return (f"{bold}Known finding on {here.rstrip('; ')}{bold}, but the other instances do not decide "
                f"the theorem on their own ({how}seen on {where}): {t.finding}")
    return f"Known finding, not drawn in this run ({how}seen on {where}): {t.finding}"


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
        lines.append(
            f"{name}: mean {_fmt(s['mean'])}, min {_fmt(s['min'])}, max {_fmt(s['max'])} (n={s['n']})"
        )
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


def _fmt_threshold(x: Any) -> str:
    """A threshold exactly as the check compares it (12 significant digits: 1 − 1e-9 is not shown as 1)."""
    return f"{x:.12g}" if isinstance(x, float) else str(x)


def criteria_rows(t: TheoremResult) -> list[tuple[str, str, str]]:
    """(quantity, rule, threshold) per declared criterion."""
    return [(str(c.get("name", "")), str(c.get("rule", "")).strip(),
             "" if c.get("value") is None else _fmt_threshold(c["value"])) for c in t.criteria]


def inconclusive_text(t: TheoremResult) -> str:
    c = t.counts
    eligible = c["instances"] - c["vacuous"]
    need = (
        f"PASS needs at most {t.max_inconclusive:.0%} inconclusive and at least {t.min_confirmed} confirmed"
    )
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
        rows.append(
            [
                t.id,
                t.expected,
                "n/a" if t.not_applicable else t.verdict,
                status_of(t),
                str(c["instances"]),
                str(c["confirmed"]),
                str(c["refuted"]),
                str(c["vacuous"]),
                str(c["inconclusive"]),
                str(c["error"]),
            ]
        )
    return rows


HEAD = ["theorem", "expected", "verdict", "status", "inst", "conf", "refut", "vac", "inconcl", "err"]


def text_table(theorems: Sequence[TheoremResult]) -> str:
    rows = [HEAD] + summary_rows(theorems)
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)



def _settings(run: dict[str, Any]) -> dict[str, str]:
    """Package versions, solver settings and tolerances of the run, flattened for display."""
    out: dict[str, str] = {}
    for key in ("versions", "solver", "settings", "gd", "tolerances"):
        val = run.get(key)
        if isinstance(val, dict):
            for k, v in val.items():
                out[f"{key}.{k}"] = _fmt(v) if not isinstance(v, (dict, list)) else json.dumps(v)
    for p in run.get("plugins", []) or []:  # provenance of each plugin theorem file (plan.plugin_provenance)
        if isinstance(p, dict):
            git = f", git {str(p.get('git'))[:12]}{' (file modified)' if p.get('dirty') else ''}" if p.get(
                "git") else ", not in a git repository"
            out[f"plugin {p.get('path')}"] = f"{p.get('source')}, sha256 {str(p.get('sha256'))[:16]}…{git}"
    if run.get("sabotage"):
        out["sabotage"] = f"{run['sabotage']} (a power test: these verdicts are not results)"
    for note in run.get("data_notes", []) or []:
        out.setdefault("data notes", "")
        out["data notes"] += ("; " if out["data notes"] else "") + str(note)
    return out


def _numeric_fields(inst: Any) -> dict[str, np.ndarray]:
    """The instance's numeric fields (a dict's items or a typed instance's attributes), the dataset aside."""
    src = inst if isinstance(inst, dict) else getattr(inst, "__dict__", {})
    out: dict[str, np.ndarray] = {}
    for key, val in src.items():
        # a field holding a mapping of arrays (overparam-global's starts by d) is saved one array per entry
        items = ((f"{key}_{k}", v) for k, v in val.items()) if isinstance(val, dict) and key != "data" \
            else ((str(key), val),)
        for name, v in items:
            if isinstance(v, (np.ndarray, int, float)) and np.asarray(v).dtype.kind in "fiub":
                out[name] = np.asarray(v)
    return out


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def save_counterexample(out: Path, theorem_id: str, k: int, inst: Any, replay: str) -> str | None:
    """Write the refuted instance's data as .npz (plus a .replay.txt); returns the relative path. An instance
    carrying a dataset (AttentionData, or an NTP dataset) saves it in its loadable format (``attnsvm check
    --data FILE.npz`` reads it) and its other numeric fields (α, a start W(0), ...) beside it as
    ``<name>.instance.npz``; an instance without one saves its numeric fields."""
    data = inst if isinstance(inst, AttentionData) else None
    if isinstance(inst, (tuple, list)):
        data = next((x for x in inst if isinstance(x, AttentionData)), None)
    cand = inst.get("data") if isinstance(inst, dict) else getattr(inst, "data", None)
    if data is None and (isinstance(cand, AttentionData) or getattr(cand, "data_kind", None) == "ntp"):
        data = cand  # a dataset field: AttentionData, or an NTP dataset (numerics.ntp.NTPData, own format)
    rel = f"counterexamples/{safe_name(theorem_id)}-{k}.npz"
    fields = _numeric_fields(inst) if not isinstance(inst, (AttentionData, tuple, list)) else {}
    if data is not None:
        write_bytes(out / rel, data.to_npz_bytes())
        if fields:
            write_bytes(out / (rel[:-4] + ".instance.npz"), _npz_bytes(fields))
    else:
        if not fields:
            return None
        write_bytes(out / rel, _npz_bytes(fields))
    write_text(out / (rel[:-4] + ".replay.txt"), replay + "\n")
    return rel

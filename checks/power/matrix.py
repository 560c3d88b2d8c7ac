"""``attnsvm power``: the power matrix theorem x sabotage -- which checks catch which numeric bug.

For every selected theorem, run it once clean and once under every sabotage (checks/power/sabotage.py)
of a component it declares in ``Theorem.depends_on``, in memory, with the same profile and seed. A
sabotage is *detected* when plain ``attnsvm check`` would exit non-zero under it although the clean
run does not (checks.report.fails_run: a PASS that turns FAIL, ERROR, INCONCLUSIVE or VACUOUS; a
known finding whose refutations are no longer exactly the documented ones); where the clean run fails
already, when the verdict changes. It *SURVIVED* otherwise (the check cannot tell the broken
component from the working one); it is *not relevant* when it breaks no component the theorem
declares. A cell that runs past its time limit is TIMEOUT (power not shown).

Controls run too (issue 23 item 5), judged the other way round: a control is expected to FAIL, so a
sabotage that leaves it FAIL (or ERROR: the pipeline caught the bug) *kept* its power, and one that turns
it PASS, INCONCLUSIVE or VACUOUS LOST it -- under that bug the check could no longer refute a false claim,
so its PASS on the theorem says nothing. A LOST cell counts as a survivor.

A survivor listed in ``BLIND_SPOTS`` (theorem, sabotage) -> reason is a *known blind spot*: shown with its
reason, not counted. Exit code: 1 if any relevant sabotage survived, lost a control's power or timed out
(blind spots excepted), else 0; 2 on bad usage.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from numerics.errors import InvalidInputError

from .. import catalogue
from ..harness import TheoremResult, run_theorem
from ..report import fails_run
from ..theorem import Theorem
from . import sabotage as sab
from .resolution import LADDER, MEASURED, perturbed

SCHEMA = 1

#: A cell may take this many times its clean run (at least CELL_MIN_SECONDS) before it is stopped
#: as TIMEOUT: a sabotage can make solvers or GD slower, never hang the matrix.
CELL_TIME_FACTOR = 20.0
CELL_MIN_SECONDS = 120.0

DETECTED, SURVIVED, NOT_RELEVANT, TIMEOUT = "detected", "SURVIVED", "not relevant", "TIMEOUT"
KEPT, LOST, BLIND = "kept", "LOST", "blind spot"

#: Known blind spots: (theorem id, sabotage) -> why the check cannot see that bug (measured, quick seed 0).
#: why a regularisation-path control cannot be refuted when the path optimiser itself is broken
_PATH_CONTROL_UNDER_BROKEN_PATH = (
    "the path checks refute only on a certificate (the path's point beats the claimed direction's ball point "
    "by more than the loss's rounding bound, or the path approaches a certified other direction); a no-op, "
    "ascending or random path approaches nothing, so the control's false claim is left undecided, not "
    "refuted; the theorem itself FAILs or is INCONCLUSIVE under the same sabotage (detected), so the broken "
    "optimiser cannot hide behind a PASS")
#: why an NTP control cannot be refuted once the graph-SVM lost its equality rows
_NTP_CONTROL_WITHOUT_EQUALITIES = (
    "without its SCC equality rows the graph-SVM of cyclic data is TLTO's single-token Att-SVM, infeasible "
    "there (certified by its Farkas vector): the hypothesis 'graph-SVM feasible' fails for theorem and "
    "control alike, so the control is VACUOUS; the theorem goes VACUOUS too (detected: the run exits 1), so "
    "the bug cannot hide behind a PASS (measured 2026-11-27, quick seed 0)")
#: why a control refuted only by a certificate cannot be refuted when the sabotage breaks what certifies it
_CONTROL_CERTIFICATE_BROKEN = (
    "the control is refuted only by a certificate built from the component this sabotage breaks (the "
    "certified other limit a path or GD approaches, the selection it is compared with, a certified SVM of "
    "each d): with it broken the control is left undecided or its hypotheses fail, never confirmed; the "
    "theorem itself goes INCONCLUSIVE, ERROR or FAIL under the same sabotage (detected), so the bug cannot "
    "hide behind a PASS (measured 2026-11-27, quick seed 0, the whole matrix)")
#: why a dropped SVM row can leave an NTP check's verdict unchanged: the answer is repaired, not wrong
_NTP_SVM_REPAIRED = (
    "repaired, not missed: under the sabotage the NTP SVM answers equal the clean ones to 1e-15 (measured "
    "2026-11-27: ntp_svm on four linear problems, graph_svm on two cyclic datasets; rung nnls+polish or "
    "clarabel+polish): the certified ladder's polish re-reads the active set off every row's margin, the "
    "dropped row included, and re-solves, so there is no wrong answer for the check to see")
BLIND_SPOTS: dict[tuple[str, str], str] = {
    **{(tid, sab): _NTP_SVM_REPAIRED for tid, sab in (
        ("ntp-graph-svm", "last-row-dropped-svm"), ("ntp-regpath", "last-row-dropped-svm"),
        ("ntp-linear-conditions", "dropped-constraint-svm"),
        ("ntp-linear-conditions", "last-row-dropped-svm"),
        ("ntp-linear-gd", "dropped-constraint-svm"), ("ntp-linear-gd", "last-row-dropped-svm"),
    )},
    **{(cid, sab): _CONTROL_CERTIFICATE_BROKEN for cid, sab in (
        ("no-stationary-points-control", "argmin-optimal-token"),
        ("rp-w-frobenius-control", "argmin-optimal-token"), ("rp-w-frobenius-control", "transposed-gradient"),
        ("rp-kq-nuclear-control", "argmin-optimal-token"), ("rp-kq-nuclear-control", "transposed-gradient"),
        ("rp-w-local-control", "argmin-optimal-token"), ("rp-w-local-control", "transposed-gradient"),
        ("overparam-global-control", "dropped-constraint-svm"), ("overparam-global-control", "scaled-svm"),
        ("overparam-global-control", "argmin-optimal-token"),
        ("rp-kq-local-control", "argmin-optimal-token"), ("md-global-control", "argmin-optimal-token"),
        ("md-global-normalized-control", "argmin-optimal-token"),
        ("rp-w-frobenius-self-control", "argmin-optimal-token"),
        ("rp-w-frobenius-self-control", "transposed-gradient"),
        ("rp-kq-nuclear-self-control", "argmin-optimal-token"),
        ("rp-kq-nuclear-self-control", "transposed-gradient"),
        ("overparam-global-control", "last-row-dropped-svm"),
    )},
    **{(cid, "ntp-equalities-dropped"): _NTP_CONTROL_WITHOUT_EQUALITIES
       for cid in ("ntp-gd-control", "ntp-gd-finite-control", "ntp-regpath-control", "ntp-acyclic-control")},
    ("ntp-linear-gd-control", "scaled-finite-part"): (
        "the control (full supports: ‖W‖ does not diverge) is refuted by a certificate, CE(W⋆) = 𝓗 at the "
        "finite W⋆; a W⋆ 1.05x off attains no such thing, so the control is left undecided, not refuted; "
        "ntp-linear-gd FAILs under the same sabotage (its finite part misses W⋆; measured 2026-11-27, quick "
        "seed 0)"),
    # The regularisation-path controls under a broken path optimiser (measured 2026-11-26, quick seed 0,
    # `attnsvm power rp-w-frobenius rp-kq-nuclear rp-w-local rp-kq-local rp-w-frobenius-self
    # rp-kq-nuclear-self p-rp-path p-nonlinear-head --sabotage noop-gd ascent-gd random-gd`: 24 theorem
    # cells detected, 13 control cells INCONCLUSIVE, listed below).
    **{(cid, sab): _PATH_CONTROL_UNDER_BROKEN_PATH for cid, sab in (
        ("rp-w-frobenius-control", "noop-gd"), ("rp-w-frobenius-control", "ascent-gd"),
        ("rp-kq-nuclear-control", "noop-gd"), ("rp-kq-nuclear-control", "ascent-gd"),
        ("rp-w-local-control", "ascent-gd"), ("rp-w-local-control", "random-gd"),
        ("rp-kq-local-control", "noop-gd"), ("rp-kq-local-control", "ascent-gd"),
        ("p-nonlinear-head-control", "random-gd"),
        ("rp-w-frobenius-self-control", "noop-gd"), ("rp-w-frobenius-self-control", "ascent-gd"),
        ("rp-kq-nuclear-self-control", "noop-gd"), ("rp-kq-nuclear-self-control", "ascent-gd"),
    )},
    ("softmax-simplex", "softmax-temperature"): (
        "invariant by design: softmax(z / 1.1) is the softmax of other logits, still on the simplex with "
        "every entry positive; the claim cannot tell a temperature"),
    ("gen-svm", "last-row-dropped-svm"): (
        "no effect on this family: the last inequality row of the directional SVM binds on no instance "
        "(counts identical to the clean run, 58 confirmed / 6 inconclusive of 64; where a dropped row binds, "
        "the certificate's full-row check turns the instance ERROR, as on every other SVM theorem)"),
    ("no-stationary-points", "softmax-temperature"): (
        "invariant by design: ⟨∇L_T(W), W^mm⟩ = ⟨∇L(W / 1.1), W^mm⟩ / 1.1 has the same sign"),
    ("no-stationary-points", "last-row-dropped-svm"): (
        "repaired, not missed: the certified Frobenius ladder's clarabel+polish rung reads the active set "
        "off the margins of ALL rows (the dropped row's slack is negative, so it is active) and re-solves on "
        "it, so W^mm is the clean one (b1_data n=2 T=3: nnls and clarabel 'kkt NOT verified, "
        "min_margin=0.5', then clarabel+polish certified, same objective); the claim reads correct numerics"),
}
#: a relevant sabotage the theorem declares its claim invariant to (``Theorem.invariant_to``, with the
#: reason): not run, not a survivor
INVARIANT = "invariant"
#: a cell of a control whose claim the theorem's own algorithm cannot decide (``Theorem.undecidable``): it
#: refutes nothing clean, so it has no power for a sabotage to keep or lose (not run, not counted)
NO_POWER = "no power (undecidable)"


class _CellTimeout(Exception):
    pass


def _on_alarm(signum, frame):  # noqa: ARG001
    raise _CellTimeout


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """SIGALRM-based limit (main thread on POSIX only; elsewhere no limit)."""
    usable = seconds is not None and hasattr(signal, "SIGALRM")
    if usable:
        try:
            old = signal.signal(signal.SIGALRM, _on_alarm)
        except ValueError:  # not the main thread
            usable = False
    if not usable:
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _summary(res: TheoremResult | None, seconds: float, error: str | None = None) -> dict[str, Any]:
    if res is None:
        return {
            "verdict": "TIMEOUT" if error == "timeout" else "ERROR",
            "counts": {},
            "fails_run": error != "timeout",
            "seconds": round(seconds, 2),
            "reasons": {error: 1} if error else {},
        }
    return {
        "verdict": res.verdict,
        "counts": res.counts,
        "fails_run": fails_run(res),
        "seconds": round(seconds, 2),
        "reasons": dict(list(res.reasons.items())[:3]),
        "refuted_by": dict(res.refuted_by),
        "integrity_only": list(res.integrity_only),
    }


def _run(cls: type[Theorem], profile: str, seed: int, limit: float | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        with _time_limit(limit), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # overflow under a climbing optimiser, etc.
            res = run_theorem(cls, profile=profile, seed=seed)
    except _CellTimeout:
        return _summary(None, time.perf_counter() - t0, "timeout")
    except Exception as exc:  # noqa: BLE001 - a crash outside the per-instance guard: the run would fail
        return _summary(None, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
    return _summary(res, time.perf_counter() - t0)


def relevant(cls: type[Theorem], name: str) -> bool:
    """Does sabotage ``name`` break a component the theorem declares?"""
    return bool(sab.breaks(name) & set(cls.depends_on))


def _idle_cell(cls: type[Theorem], name: str) -> dict[str, Any]:
    """The cell of a sabotage that is not run: declared invariant (with the reason) or not relevant."""
    if relevant(cls, name) and name in cls.invariant_to:
        return {"status": INVARIANT, "reason": cls.invariant_to[name]}
    return {"status": NOT_RELEVANT}


def power_row(tid: str, names: Sequence[str], profile: str, seed: int, plugins: Sequence[str],
              time_limit: bool, log: Callable[[str], None] | None = None) -> tuple[dict[str, Any], list[str]]:
    """One theorem's row of the matrix: its clean run, then every relevant sabotage (each in force for its
    cell only). Returns the row and its progress lines (also given to ``log`` as each cell ends). A task of
    :func:`checks.executor.map_completed`: it loads the catalogue (and ``plugins``) where it runs. A cell's
    time limit is a SIGALRM, which only a process's main thread has: inline and on the process pool it
    applies, on a Dask worker (tasks run in threads) there is none."""
    from ..plan import load_catalogue
    from ..theorem import REGISTRY

    load_catalogue(plugins)
    cls = REGISTRY[tid]
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        if log:
            log(line)

    row: dict[str, Any] = {
        "id": cls.id,
        "expected": cls.expected,
        "control_of": cls.control_of,
        "finding": cls.finding,
        "depends_on": list(cls.depends_on),
        "invariant_to": dict(cls.invariant_to),
        "clean": None,
        "cells": {},
    }
    rel = [n for n in names if relevant(cls, n) and n not in cls.invariant_to]
    if not rel:  # nothing to sabotage: the clean run would tell nothing here
        row["cells"] = {n: _idle_cell(cls, n) for n in names}
        return row, lines
    if cls.control_of and cls.undecidable:  # gd-local-control, p-svm-gd-control: nothing to keep or lose
        row["cells"] = {n: {"status": NO_POWER, "reason": cls.undecidable} if n in rel
                        else _idle_cell(cls, n) for n in names}
        return row, lines
    clean = _run(cls, profile, seed, None)
    row["clean"] = clean
    say(f"{cls.id} clean: {clean['verdict']} ({clean['seconds']:.1f}s)")
    limit = max(CELL_MIN_SECONDS, CELL_TIME_FACTOR * clean["seconds"]) if time_limit else None
    for n in names:
        if n not in rel:
            row["cells"][n] = _idle_cell(cls, n)
            continue
        with sab.sabotage(n):
            cell = _run(cls, profile, seed, limit)
        if cell["verdict"] == "TIMEOUT":
            cell["status"] = TIMEOUT
        elif cls.control_of and clean["verdict"] == cls.expected == "FAIL":  # a control refuted clean
            cell["status"] = KEPT if cell["verdict"] in ("FAIL", "ERROR") else LOST
        elif not clean["fails_run"]:  # the usual case: detected iff `attnsvm check` would now exit 1
            cell["status"] = DETECTED if cell["fails_run"] else SURVIVED
        else:  # the clean run fails already (e.g. an undocumented refutation): only a change tells
            cell["status"] = DETECTED if cell["verdict"] != clean["verdict"] else SURVIVED
        if cell["status"] == SURVIVED and cell["counts"] != clean["counts"]:
            cell["note"] = "instance counts changed but the verdict did not"
        if cell["status"] in (SURVIVED, LOST) and (cls.id, n) in BLIND_SPOTS:
            cell["blind"], cell["status"] = cell["status"], BLIND
            cell["note"] = BLIND_SPOTS[(cls.id, n)]
        row["cells"][n] = cell
        say(f"{cls.id} x {n}: {cell['status']} ({cell['verdict']}, {cell['seconds']:.1f}s)")
    return row, lines


def run_power(
    ids: Sequence[str] = (),
    *,
    profile: str = "quick",
    sabotages: Sequence[str] = (),
    seed: int = 0,
    plugins: Sequence[str] = (),
    log: Callable[[str], None] | None = None,
    time_limit: bool = True,
    workers: int | None = None,
    dask: Any = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    done: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The power matrix as a JSON-able dict (see module docstring); ``log`` gets one line per cell,
    ``on_row`` each theorem's row as it finishes (``attnsvm power`` appends it to power-rows.jsonl, so an
    interrupted run keeps the rows it finished). ``done``: rows finished by an earlier run of the same
    matrix (``--resume``), kept as they are; their theorems do not run again.

    The theorems' rows are independent tasks of one executor (:mod:`checks.executor`): in this process
    (default, ``workers`` 1), on a process pool of ``workers`` processes, or on a Dask cluster (``dask``: an
    address, ``local:N`` or a Client); the matrix is the same either way (a cell's time limit does not apply
    on Dask, see :func:`power_row`)."""
    from ..executor import choose, map_completed
    from ..plan import load_catalogue

    if sab.active():
        raise InvalidInputError(f"power analysis needs clean numerics, but a sabotage is installed "
                                f"{'+'.join(sab.active())}; unset it")
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise InvalidInputError(f"--workers must be an integer >= 1, got {workers}")
    executor = choose(workers, dask, default=1)
    names = list(dict.fromkeys(sabotages)) if sabotages else sab.default_names()
    sab.resolve(names)  # unknown names: one-line error
    load_catalogue(plugins)
    selected = catalogue.select(list(ids))
    thms = list(selected)
    kept = {r["id"]: r for r in done if r.get("id") in {c.id for c in thms} and set(r["cells"]) == set(names)}
    if kept and log:
        log(f"resuming: {len(kept)} of {len(thms)} theorem rows kept from the earlier run")
    run_thms = [c for c in thms if c.id not in kept]
    todo = sum(1 for c in run_thms for n in names if relevant(c, n) and n not in c.invariant_to) + sum(
        1 for c in run_thms if c.depends_on)
    done = 0

    def counted(line: str) -> None:
        nonlocal done
        done += 1
        if log:
            log(f"[{done}/{todo}] {line}")

    slots = [k for k, c in enumerate(thms) if c.id not in kept]
    tasks = [(thms[k].id, names, profile, seed, [str(p) for p in plugins], time_limit) for k in slots]
    rows: list[dict[str, Any]] = [kept.get(c.id, {}) for c in thms]
    if executor.kind == "inline":  # each cell's line as it ends
        for k, t in zip(slots, tasks, strict=True):
            rows[k] = power_row(*t, log=counted)[0]
            if on_row:
                on_row(rows[k])
    else:
        for j, (row, lines) in map_completed(executor, power_row, tasks, star=True):
            k = slots[j]
            rows[k] = row
            for line in lines:
                counted(line)
            if on_row:
                on_row(row)
    survivors = [
        [r["id"], n] for r in rows for n, c in r["cells"].items() if c["status"] in (SURVIVED, LOST, TIMEOUT)
    ]
    blind = [[r["id"], n, c["note"]] for r in rows for n, c in r["cells"].items() if c["status"] == BLIND]
    from ..runner import git_sha

    return {
        "schema": SCHEMA,
        "run": {
            "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "profile": profile,
            "seed": seed,
            "git": git_sha(),
            "plugins": [str(p) for p in plugins],
            "executor": executor.describe(),
        },
        "sabotages": {n: {"breaks": sorted(sab.breaks(n)), "how": sab.CATALOGUE[n].how} for n in names},
        "components": dict(sab.COMPONENTS),
        "theorems": rows,
        "survivors": survivors,
        "blind_spots": blind,
        "figures": figures(rows),
    }


def figures(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Cell counts: relevant cells, their verdicts under the sabotage, and the statuses."""
    cells = [c for r in rows for c in r["cells"].values() if c["status"] not in (NOT_RELEVANT, NO_POWER)]
    out = {"cells": len(cells)}
    for v in ("FAIL", "ERROR", "INCONCLUSIVE", "VACUOUS", "PASS", "TIMEOUT"):
        out[v] = sum(c.get("verdict") == v for c in cells)
    for st in (DETECTED, KEPT, SURVIVED, LOST, BLIND):
        out[st] = sum(c["status"] == st for c in cells)
    return out


# -- rendering ---------------------------------------------------------------------------------------

def _cell_text(cell: dict[str, Any], *, short: bool) -> str:
    st = cell["status"]
    if st == NOT_RELEVANT:
        return "." if short else "·"
    if st == INVARIANT:
        return "inv" if short else f"invariant ({cell['reason']})"
    if st == NO_POWER:
        return "undec" if short else "no power to test: the control is UNDECIDABLE by the theorem's algorithm"
    if st == TIMEOUT:
        return "TIMEOUT"
    v = cell["verdict"]
    if short:
        v = {"INCONCLUSIVE": "INCONC", "VACUOUS": "VACUOUS"}.get(v, v)
        return v if st in (DETECTED, KEPT) else f"?{v}" if st == BLIND else f"!{v}"
    by = cell.get("refuted_by") or {}
    how = f" (refuted by {', '.join(by)})" if by else ""
    if cell.get("integrity_only") and len(cell["integrity_only"]) == cell["counts"].get("refuted"):
        how += " (integrity predictions only)"
    if st in (DETECTED, KEPT):
        return f"{st}: {v}{how}"
    return f"blind spot: {v}{how}" if st == BLIND else f"**{st}**: {v}{how}"


def text_table(rep: dict[str, Any]) -> str:
    """The matrix for a terminal: column k is sabotage k (legend below)."""
    names = list(rep["sabotages"])
    w = max([len(r["id"]) for r in rep["theorems"]] + [7])
    cw = 8
    head = f"{'theorem'.ljust(w)}  {'clean':8}" + "".join(f"{f'S{k + 1}':>{cw}}" for k in range(len(names)))
    lines = [head, "-" * len(head)]
    for r in rep["theorems"]:
        clean = r["clean"]["verdict"] if r["clean"] else "-"
        lines.append(f"{r['id'].ljust(w)}  {clean:8}"
                     + "".join(f"{_cell_text(r['cells'][n], short=True):>{cw}}" for n in names))
    lines.append("")
    lines.extend(f"  S{k + 1} = {n}" for k, n in enumerate(names))
    lines.append("  cell: the verdict under the sabotage; VERDICT = detected (a theorem: differs from clean; "
                 "a control: still FAIL/ERROR, power kept), !VERDICT = SURVIVED (theorem unchanged) or LOST "
                 "(control no longer refuted), ?VERDICT = known blind spot, inv = declared invariant "
                 "(Theorem.invariant_to), undec = a control UNDECIDABLE by the theorem's algorithm (no "
                 "power to test), . = not relevant")
    f = rep.get("figures") or {}
    if f:
        lines.append("  figures: " + ", ".join(f"{k} {v}" for k, v in f.items()))
    surv = rep["survivors"]
    lines.append(f"\n{len(surv)} relevant sabotage(s) survived or lost a control's power"
                 + (":" if surv else ""))
    lines.extend(f"  {t} survives {n}" for t, n in surv)
    for t, n, why in rep.get("blind_spots", []):
        lines.append(f"  known blind spot: {t} x {n}: {why}")
    return "\n".join(lines)


def markdown(rep: dict[str, Any]) -> str:
    names = list(rep["sabotages"])
    run = rep["run"]
    out = [f"# Power matrix (profile {run['profile']}, seed {run['seed']})", "",
           "Each theorem ran clean and under every sabotage of a component it declares (`depends_on`). "
           "*detected*: the verdict differs from the clean one; **SURVIVED**: unchanged verdict (the check "
           "cannot tell the broken component from the working one); a control *kept* its power when it is "
           "still FAIL (or ERROR), **LOST** it otherwise; invariant (reason): the claim is declared "
           "invariant to that sabotage (`invariant_to`), not run; ·: not relevant. A detected or kept cell "
           "names the predictions that refuted its instances.", "",
           "| theorem | depends on | clean | " + " | ".join(f"`{n}`" for n in names) + " |",
           "|" + "---|" * (3 + len(names))]
    for r in rep["theorems"]:
        clean = r["clean"]["verdict"] if r["clean"] else "–"
        deps = ", ".join(r["depends_on"]) or "(none)"
        cells = [_cell_text(r["cells"][n], short=False).replace("|", "\\|") for n in names]  # ||G||: a table
        out.append(f"| `{r['id']}` | {deps} | {clean} | " + " | ".join(cells) + " |")
    out += ["", f"## Survivors ({len(rep['survivors'])})", ""]
    by = {r["id"]: r for r in rep["theorems"]}
    for t, n in rep["survivors"]:
        c = by[t]["cells"][n]
        extra = f"; {c['note']}" if c.get("note") else ""
        out.append(f"- `{t}` survives `{n}`: verdict {c.get('verdict')} (clean {by[t]['clean']['verdict']}), "
                   f"counts {c.get('counts')}{extra}")
    if not rep["survivors"]:
        out.append("none")
    if rep.get("blind_spots"):
        out += ["", f"## Known blind spots ({len(rep['blind_spots'])})", ""]
        out += [f"- `{t}` x `{n}`: {why}" for t, n, why in rep["blind_spots"]]
    if rep.get("figures"):
        out += ["", "Figures: " + ", ".join(f"{k} {v}" for k, v in rep["figures"].items())]
    out += ["", "## Sabotages", ""]
    out += [f"- `{n}` (breaks {', '.join(s['breaks'])}): {s['how']}" for n, s in rep["sabotages"].items()]
    return "\n".join(out) + "\n"


def _streamed_rows(stream: Path, header: Path, run_key: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows an interrupted ``attnsvm power`` streamed to ``stream``, if its ``header`` says it ran with
    ``run_key`` (profile, seed, sabotages, plugins); a line cut short by the kill is dropped."""
    try:
        if json.loads(header.read_text(encoding="utf-8")) != run_key:
            return []
        lines = stream.read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        return []
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "id" in row and isinstance(row.get("cells"), dict):
            rows.append(row)
    return rows


def cmd_power(args) -> int:
    if getattr(args, "resolution", False):
        return cmd_resolution(args)
    if args.list_sabotages:
        for n, s in sab.CATALOGUE.items():
            print(f"{n:36} breaks {', '.join(s.breaks):40} {'' if s.default else '(opt-in) '}{s.how}")
        print("\ncomponents (Theorem.depends_on):")
        for c, doc in sab.COMPONENTS.items():
            print(f"  {c:14} {doc}")
        return 0
    log = None if args.no_progress else (lambda line: print(line, file=sys.stderr, flush=True))
    from numerics.fileio import write_text

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stream = out / "power-rows.jsonl"  # one flushed line per finished theorem row: nothing lost to a kill
    header = out / "power-run.json"  # what the streamed rows were run with: --resume keeps only a match
    names = list(dict.fromkeys(args.sabotage)) if args.sabotage else sab.default_names()
    from ..runner import git_sha

    run_key = {"profile": args.profile, "seed": args.seed, "sabotages": names, "git": git_sha(),
               "plugins": [str(Path(p).resolve()) for p in args.plugin]}
    done = _streamed_rows(stream, header, run_key) if getattr(args, "resume", False) else []
    if getattr(args, "resume", False) and not done and log:
        log(f"--resume: no finished rows of this run in {out}; starting afresh")
    write_text(header, json.dumps(run_key))
    stream.write_text("".join(json.dumps(r) + "\n" for r in done), encoding="utf-8")

    def on_row(row: dict[str, Any]) -> None:
        with stream.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()

    rep = run_power(
        args.ids, profile=args.profile, sabotages=args.sabotage, seed=args.seed, plugins=args.plugin, log=log,
        workers=getattr(args, "workers", None), dask=getattr(args, "dask", None), on_row=on_row, done=done,
    )
    write_text(out / "power.json", json.dumps(rep, indent=1))
    write_text(out / "power.md", markdown(rep))
    print(text_table(rep))
    print(f"\npower matrix: {out / 'power.md'} (also power.json)")
    return 1 if rep["survivors"] else 0


# -- resolution: the predicted objects perturbed (checks.power.resolution is the seam) -----------------
def measure(cls: type, *, profile: str = "quick", seed: int = 0,
            run: Callable[..., Any] | None = None, ladder: Sequence[float] = LADDER) -> dict[str, Any]:
    """The theorem at ε = 0 (clean; which objects it declares) and at every ε of the ladder: its verdicts
    and its resolution, the smallest ε at which the verdict is FAIL (None if none is, or nothing is
    declared)."""
    run = run or run_theorem
    with perturbed(0.0) as st:
        clean = run(cls, profile=profile, seed=seed)
    row: dict[str, Any] = {"id": cls.id, "profile": profile, "seed": seed, "clean": clean.verdict,
                           "objects": sorted(st.used), "verdicts": {}, "resolution": None}
    if not st.used:
        return row
    for eps in ladder:
        with perturbed(eps):
            row["verdicts"][f"{eps:g}"] = run(cls, profile=profile, seed=seed).verdict
    fails = [float(e) for e, v in row["verdicts"].items() if v == "FAIL"]
    # a FAIL at ε says something only where the clean run PASSes (a known finding FAILs at every ε)
    row["resolution"] = min(fails) if fails and clean.verdict == "PASS" else None
    return row


#: The goals of issue 23, by kind of the object a theorem declares: a direction must be resolved at
#: ε <= 0.05 on the quick profile, a finite part ("point") at 0.1, a bound at a factor 2 (ε = 0.5); a value
#: the numerics must equal (a limit value, ‖W‖_⋆ of a factorisation) is a point on a line: the point's 0.1.
GOALS = {"direction": 0.05, "point": 0.1, "upper": 0.5, "lower": 0.5, "value": 0.1}


def _goal(objects: Sequence[str]) -> float | None:
    kinds = [o.rsplit("(", 1)[-1].rstrip(")") for o in objects]
    goals = [GOALS[k] for k in kinds if k in GOALS]
    return min(goals) if goals else None


def run_resolution(ids: Sequence[str] = (), *, profile: str = "quick", seed: int = 0,
                   plugins: Sequence[str] = (), log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """:func:`measure` for every selected theorem (controls only if named), with its goal."""
    from ..plan import load_catalogue

    if sab.active():
        raise InvalidInputError("resolution needs clean numerics, but a sabotage is installed")
    load_catalogue(plugins)
    named = set(ids)
    rows = []
    for cls in catalogue.select(list(ids)):
        if cls.control_of and cls.id not in named:
            continue
        row = measure(cls, profile=profile, seed=seed)
        row["goal"] = _goal(row["objects"])
        row["meets_goal"] = (None if row["goal"] is None else
                             row["resolution"] is not None and row["resolution"] <= row["goal"])
        rows.append(row)
        if log:
            log(f"{cls.id}: clean {row['clean']}, resolution {row['resolution']} "
                f"({', '.join(row['objects']) or 'no predicted object declared'})")
    return {"profile": profile, "seed": seed, "ladder": list(LADDER), "theorems": rows}


def resolution_markdown(rep: dict[str, Any]) -> str:
    eps = [f"{e:g}" for e in rep["ladder"]]
    lines = [f"# Resolution (profile {rep['profile']}, seed {rep['seed']})", "",
             "Verdict with the predicted object perturbed by a relative ε (checks/power/resolution.py); the "
             "resolution is the smallest ε whose verdict is FAIL.", "",
             "| theorem | predicted object | clean | " + " | ".join(f"ε={e}" for e in eps)
             + " | resolution | goal | met |",
             "|---|---|---|" + "---|" * len(eps) + "---|---|---|"]
    for r in rep["theorems"]:
        if not r["objects"]:
            continue
        v = [r["verdicts"].get(e, "") for e in eps]
        lines.append(f"| {r['id']} | {', '.join(r['objects'])} | {r['clean']} | " + " | ".join(v)
                     + f" | {r['resolution'] if r['resolution'] is not None else 'none'} | {r['goal']} | "
                     + ("yes" if r["meets_goal"] else "**no**") + " |")
    undeclared = [r["id"] for r in rep["theorems"] if not r["objects"]]
    if undeclared:
        lines += ["", "No predicted object declared through the seam yet (resolution not measured): "
                  + ", ".join(undeclared) + "."]
    return "\n".join(lines) + "\n"


def write_measured(rep: dict[str, Any], path: Path = MEASURED, limits: dict[str, str] | None = None) -> None:
    """Merge the rows of ``rep`` into the committed data file (by theorem id; rows of theorems not measured
    now are kept), with the date. ``limits``: the measured reason of an unmet goal, kept from the file when
    not given (it is prose: a limit named in the check's docstring)."""
    from numerics.fileio import write_text

    try:
        table = json.loads(path.read_text(encoding="utf-8")).get("theorems", {})
    except (OSError, ValueError):
        table = {}
    today = _dt.date.today().isoformat()
    for row in rep["theorems"]:
        old = table.get(row["id"], {})
        new = dict(row, measured=today)
        limit = (limits or {}).get(row["id"], old.get("limit"))
        if limit and not new.get("meets_goal"):
            new["limit"] = limit
        table[row["id"]] = new
    doc = {"about": "resolution of every theorem (attnsvm power --resolution --write; README, Resolution)",
           "ladder": list(LADDER), "theorems": dict(sorted(table.items()))}
    write_text(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def cmd_resolution(args) -> int:
    from numerics.fileio import write_text

    log = None if args.no_progress else (lambda line: print(line, file=sys.stderr, flush=True))
    rep = run_resolution(args.ids, profile=args.profile, seed=args.seed, plugins=args.plugin, log=log)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "resolution.json", json.dumps(rep, indent=1))
    if getattr(args, "write", False):
        write_measured(rep)
        print(f"resolution: merged into {MEASURED}")
    md = resolution_markdown(rep)
    write_text(out / "resolution.md", md)
    print(md)
    print(f"resolution: {out / 'resolution.md'} (also resolution.json)")
    return 0

"""``attnsvm assumptions``: how often each hypothesis of the catalogue holds on the paper's random
family (unit-sphere tokens, queries and head, random labels; cross-attention), over a grid of (n, T, d).

For every cell and trial (data seeded from (seed, n, T, d, trial) via SeedSequence, see
:mod:`checks.experiments.sweep`) it records whether

================== ============================================================================ hypothesis
holds when ================== ============================================================================
feasible_opt Att-SVM(opt) is feasible (certified; Farkas certificate otherwise) feasible_all_alpha Att-SVM(α)
is feasible for every α ∈ [T]^n — all T^n enumerated when
                    T^n ≤ ALPHA_ENUM_MAX, else ALPHA_SAMPLES uniformly sampled α (plus opt): then
                    "held" means no sampled α was infeasible, an upper estimate of the true rate
opt_unique          the optimal token of every example is unique (no score within TIE_TOL)
B1                  Att-SVM(opt) feasible and every non-optimal token is a support token of W^mm
B2                  all non-optimal scores of every example are equal (within TIE_TOL)
gd_locally_optimal  α_GD (argmax of GD's final softmax) has a feasible Att-SVM and is locally optimal
gd_global           α_GD = opt on every example (GD selected the global solution's tokens) and
                    Att-SVM(opt) is feasible
==================  ============================================================================

GD: normalised, step 0.1, 2000 steps (the authors' protocol numerics.gd.AUTHORS, THEORY.md §5),
W-parametrised, logistic loss, initialisation drawn from the trial's seed; one batched
:func:`numerics.gd.run_gd` call per chunk of trials. Rates are unconditional (held / trials); a hypothesis
that needs W^mm counts a trial whose Att-SVM(opt) is infeasible as not held, and the ``infeasible`` column
says how many such trials a cell had (for feasible_all_alpha: trials with some infeasible α). Intervals:
Wilson 95%.

Solver trouble is an outcome: a trial whose Att-SVM no rung of numerics.svm's solver ladder can certify
(SolverError) leaves the hypotheses that need that SVM *undecided* for that trial — it is counted in
``solver_errors`` with the solver's status (``solver_status``), left out of ``trials``/``rate``, shown in the
Markdown table and the figure, and the run finishes. (An α other than opt that cannot be certified while
testing feasible_all_alpha is skipped and counted in ``alpha_solver_errors``.) Finished chunks are kept in
``OUT/.assumptions.parts`` until the outputs are written, so an interrupted run resumes where it stopped
(see :func:`checks.experiments.reproduce.kept_sweep`).

Writes assumptions.csv (n, T, d, hypothesis, trials, held, rate, ci_low, ci_high, infeasible, solver_errors,
alpha_solver_errors, solver_status), assumptions.md and assumptions.png into --out.
"""

from __future__ import annotations

import csv
import io
import itertools
import shutil
import time
from pathlib import Path

import numpy as np

from numerics.errors import InvalidInputError, SolverError
from numerics.fileio import write_bytes, write_text
from numerics.gd import AUTHORS

from .. import hypotheses as hyp
from .common import INIT_SCALE, error_status, kept_sweep, status_summary
from .sweep import trial_rng, wilson_interval

NAME = "assumptions"
HYPOTHESES = (
    "feasible_opt",
    "feasible_all_alpha",
    "opt_unique",
    "B1",
    "B2",
    "gd_locally_optimal",
    "gd_global",
)
DEFAULT_GRID = "n=4:6,T=4:6,d=2:4:6:8:10"
CSV_COLUMNS = (
    "n",
    "T",
    "d",
    "hypothesis",
    "trials",
    "held",
    "rate",
    "ci_low",
    "ci_high",
    "infeasible",
    "solver_errors",
    "alpha_solver_errors",
    "solver_status",
)
#: Hypotheses decided without any SVM solve (never undecided by solver trouble).
NO_SVM = ("opt_unique", "B2")

#: Enumerate every α when there are at most this many (each is one ~1 ms certified QP).
ALPHA_ENUM_MAX = 256
#: Otherwise sample this many α uniformly (keeps a trial well under a second).
ALPHA_SAMPLES = 64
#: Trials per task: one batched run_gd call each. Fixed (never derived from the worker count), so a
#: trial's numbers do not depend on how the sweep was split.
TRIAL_CHUNK = 25
#: Largest grid values accepted (a guard against typos like d=2000 that would run for hours).
GRID_MAX = {"n": 64, "T": 64, "d": 256}


# -- grid ---------------------------------------------------------------------------------------
def parse_grid(spec: str | None) -> dict[str, list[int]]:
    """``"n=5,T=5,d=2:4:6:8"`` -> {"n": [5], "T": [5], "d": [2, 4, 6, 8]} (values colon-separated)."""
    spec = DEFAULT_GRID if spec is None else spec
    usage = "expected e.g. --grid n=5,T=5,d=2:4:6:8 (keys n, T, d, each once; colon-separated integer values)"
    out: dict[str, list[int]] = {}
    for part in str(spec).split(","):
        part = part.strip()
        if "=" not in part:
            raise InvalidInputError(f"bad --grid {spec!r}: {part!r} is not KEY=VALUES; {usage}")
        key, vals = (s.strip() for s in part.split("=", 1))
        if key not in ("n", "T", "d"):
            raise InvalidInputError(f"bad --grid {spec!r}: unknown key {key!r}; {usage}")
        if key in out:
            raise InvalidInputError(f"bad --grid {spec!r}: key {key!r} given twice; {usage}")
        try:
            nums = [int(v) for v in vals.split(":")]
        except ValueError:
            raise InvalidInputError(
                f"bad --grid {spec!r}: values of {key} must be integers, got {vals!r}; {usage}"
            ) from None
        lo = 2 if key == "T" else 1
        for v in nums:
            if not lo <= v <= GRID_MAX[key]:
                raise InvalidInputError(f"bad --grid {spec!r}: {key}={v} out of range {lo}..{GRID_MAX[key]}")
        out[key] = sorted(set(nums))
    missing = [k for k in ("n", "T", "d") if k not in out]
    if missing:
        raise InvalidInputError(f"bad --grid {spec!r}: missing key(s) {', '.join(missing)}; {usage}")
    return out


# -- one chunk of trials (runs in a worker) ------------------------------------------------------
def _alphas(n: int, T: int, opt: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """All α (enumerated) or ALPHA_SAMPLES sampled α plus opt; second value: enumerated?"""
    if T**n <= ALPHA_ENUM_MAX:
        return np.array(list(itertools.product(range(T), repeat=n)), dtype=np.int64), True
    return np.vstack([opt[None, :], rng.integers(0, T, size=(ALPHA_SAMPLES, n))]), False


def run_chunk(seed: int, n: int, T: int, d: int, trials: list[int]) -> list[dict]:
    """Evaluate every hypothesis on the given trials of cell (n, T, d); one dict per trial."""
    from numerics.data import random_unit_sphere
    from numerics.gd import RandomInit, run_gd
    from numerics.svm import is_locally_optimal, solve_att_svm
    from numerics.tokens import optimal_tokens, scores, softmax_probs

    datas, inits, rngs = [], [], []
    for k in trials:
        rng = trial_rng(seed, NAME, (n, T, d), k)
        datas.append(random_unit_sphere(n, T, d, rng=rng))
        inits.append(int(rng.integers(0, 2**31 - 1)))
        rngs.append(rng)
    W_final = run_gd(datas, AUTHORS, init=RandomInit(inits, INIT_SCALE)).W
    rows = []
    for j, (data, rng) in enumerate(zip(datas, rngs, strict=False)):
        ot = optimal_tokens(data)
        g = scores(data)
        opt = ot.index
        b2 = hyp.b2_holds(g, opt)
        try:
            sol = solve_att_svm(data, opt)
        except SolverError as exc:  # every SVM-dependent hypothesis is undecided on this trial
            rows.append({"n": n, "T": T, "d": d, "trial": int(trials[j]), "opt_infeasible": False,
                         **{h: None for h in HYPOTHESES}, "opt_unique": bool(ot.unique), "B2": b2,
                         "solver_errors": 0, "error": error_status(exc)})
            continue
        feas = sol.feasible
        b1 = hyp.b1_holds(sol.support, T, feasible=feas)
        alphas, _ = _alphas(n, T, opt, rng)
        all_feas, solver_errors = feas, 0
        if feas:
            for a in alphas:
                if np.array_equal(a, opt):
                    continue
                try:
                    ok = solve_att_svm(data, a).feasible
                except SolverError:  # an uncertifiable answer is counted (solver_errors), never a verdict
                    solver_errors += 1
                    continue
                if not ok:
                    all_feas = False
                    break
        a_gd = softmax_probs(data, W_final[j]).argmax(axis=1)
        err = None
        if np.array_equal(a_gd, opt):
            lo = feas  # opt is always locally optimal when feasible
        else:
            try:
                lo = bool(is_locally_optimal(data, a_gd))
            except SolverError as exc:  # undecided on this trial (the other hypotheses stand)
                lo, err = None, error_status(exc)
        rows.append(
            {
                "n": n,
                "T": T,
                "d": d,
                "trial": int(trials[j]),
                "opt_infeasible": not feas,
                "feasible_opt": feas,
                "feasible_all_alpha": all_feas,
                "opt_unique": bool(ot.unique),
                "B1": b1,
                "B2": b2,
                "gd_locally_optimal": lo,
                "gd_global": bool(feas and np.array_equal(a_gd, opt)),
                "solver_errors": solver_errors,
                "error": err,
            }
        )
    return rows


# -- aggregation and outputs --------------------------------------------------------------------
def aggregate(rows: list[dict], cells: list[tuple[int, int, int]]) -> list[dict]:
    """One record per (cell, hypothesis): trials, held, rate, Wilson interval, infeasible count."""
    by_cell: dict[tuple[int, int, int], list[dict]] = {c: [] for c in cells}
    for r in rows:
        by_cell[(r["n"], r["T"], r["d"])].append(r)
    out = []
    for c in cells:
        every = by_cell[c]
        for h in HYPOTHESES:
            rs = [r for r in every if r[h] is not None]  # decided trials
            errs = [r.get("error") or "error" for r in every if r[h] is None]
            k = len(rs)
            held = sum(bool(r[h]) for r in rs)
            lo, hi = wilson_interval(held, k)
            if h == "feasible_all_alpha":
                infeas = sum(not r[h] for r in rs)
            elif h in NO_SVM:
                infeas = 0  # do not depend on the SVM
            else:
                infeas = sum(r["opt_infeasible"] for r in rs)
            out.append(
                {
                    "n": c[0],
                    "T": c[1],
                    "d": c[2],
                    "hypothesis": h,
                    "trials": k,
                    "held": held,
                    "rate": held / k if k else float("nan"),
                    "ci_low": lo,
                    "ci_high": hi,
                    "infeasible": infeas,
                    "solver_errors": len(errs),
                    "solver_status": status_summary(errs),
                    "alpha_solver_errors": sum(r["solver_errors"] for r in rs)
                    if h == "feasible_all_alpha"
                    else 0,
                }
            )
    return out


def _fmt(x: float) -> str:
    return "nan" if not np.isfinite(x) else f"{x:.4f}"


def to_csv(records: list[dict], columns=CSV_COLUMNS) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in records:
        w.writerow([_fmt(r[c]) if isinstance(r[c], float) else r[c] for c in columns])
    return buf.getvalue()


def to_markdown(records: list[dict], grid: dict, trials: int, seed: int, seconds: float) -> str:
    cells = sorted({(r["n"], r["T"], r["d"]) for r in records})
    rec = {(r["n"], r["T"], r["d"], r["hypothesis"]): r for r in records}
    worst = [max((rec[(*c, h)] for h in HYPOTHESES), key=lambda r: r["solver_errors"]) for c in cells]
    n_err = sum(
        r["solver_errors"] for r in worst
    )  # trials with a solver error (per cell: the most of any hypothesis)
    st = [s.rsplit("×", 1)[0] for r in worst if r["solver_status"] for s in r["solver_status"].split("; ")
          for _ in range(int(s.rsplit("×", 1)[1]))]
    lines = [
        "# Assumption report",
        "",
        f"Random unit-sphere family (cross-attention), {trials} trials per cell, seed {seed}, "
        f"grid n={':'.join(map(str, grid['n']))}, T={':'.join(map(str, grid['T']))}, "
        f"d={':'.join(map(str, grid['d']))}; {seconds:.1f} s.",
        "",
        "Each entry: rate of trials on which the hypothesis held, with its Wilson 95% interval. "
        "`infeas.` = trials whose Att-SVM(opt) was infeasible (certified by a Farkas vector); "
        "`some α infeas.` = trials with some infeasible α. feasible_all_alpha enumerates all T^n selections "
        f"when T^n ≤ {ALPHA_ENUM_MAX}, else samples {ALPHA_SAMPLES} (an upper estimate). "
        f"GD: normalised, step {AUTHORS.lr}, {AUTHORS.steps} steps. Trials whose SVM no solver could certify "
        "(SolverError) "
        "leave the hypotheses needing it undecided: they are errors, outside the rates, counted in the last "
        "column "
        f"(per cell, the most of any hypothesis); {n_err} in all"
        f"{' (' + status_summary(st) + ')' if st else ''}. Other α solves that could not be certified while "
        "testing feasible_all_alpha are skipped and counted: "
        f"{sum(r['alpha_solver_errors'] for r in records)} in all.",
        "",
        "| n | T | d | " + " | ".join(HYPOTHESES) + " | infeas. | some α infeas. | solver errors |",
        "|" + "---|" * (len(HYPOTHESES) + 6),
    ]
    for c in cells:
        ents = []
        for h in HYPOTHESES:
            r = rec[(*c, h)]
            ents.append(f"{r['rate']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]")
        cell_err = max(rec[(*c, h)]["solver_errors"] for h in HYPOTHESES)
        lines.append(
            f"| {c[0]} | {c[1]} | {c[2]} | "
            + " | ".join(ents)
            + f" | {rec[(*c, 'feasible_opt')]['infeasible']} | "
                f"{rec[(*c, 'feasible_all_alpha')]['infeasible']} "
            f"| {cell_err} |"
        )
    lines += ["", "![rates](assumptions.png)", ""]
    return "\n".join(lines)


def plot(records: list[dict]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncol = 4
    nrow = int(np.ceil(len(HYPOTHESES) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False)
    groups = sorted({(r["n"], r["T"]) for r in records})
    for ax, h in zip(axes.flat, HYPOTHESES, strict=False):
        for g in groups:
            rs = sorted(
                (r for r in records if (r["n"], r["T"]) == g and r["hypothesis"] == h), key=lambda r: r["d"]
            )
            d = np.array([r["d"] for r in rs])
            rate = np.array([r["rate"] for r in rs])
            err = np.array([[r["rate"] - r["ci_low"] for r in rs], [r["ci_high"] - r["rate"] for r in rs]])
            ax.errorbar(d, rate, yerr=err, marker="o", ms=4, capsize=3, label=f"n={g[0]}, T={g[1]}")
        nerr = sum(r["solver_errors"] for r in records if r["hypothesis"] == h)
        ax.set_title(h + (f" ({nerr} solver errors)" if nerr else ""))
        ax.set_xlabel("d")
        ax.set_ylabel("rate held")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(HYPOTHESES):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    spare = list(axes.flat)[len(HYPOTHESES):]
    if spare:
        spare[0].legend(handles, labels, loc="center", title="(n, T)")
    else:
        axes.flat[0].legend(fontsize=8)
    fig.suptitle("How often each hypothesis holds (Wilson 95% intervals)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def run_assumptions(grid: dict, trials: int, seed: int, *, workers=None, dask=None, progress=True,
                    keep=None) -> list[dict]:
    """The per-(cell, hypothesis) records (see :func:`aggregate`); finished chunks kept in ``keep`` if
    given."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidInputError(f"--trials must be an integer >= 1, got {trials!r}")
    cells = [(n, T, d) for n in grid["n"] for T in grid["T"] for d in grid["d"]]
    tasks = [(seed, n, T, d, list(range(s, min(s + TRIAL_CHUNK, trials))))
             for (n, T, d) in cells for s in range(0, trials, TRIAL_CHUNK)]
    results = kept_sweep(run_chunk, tasks, keep, workers=workers, dask=dask, progress=progress, desc=NAME)
    rows = [r for chunk in results for r in chunk]
    return aggregate(rows, cells)


def cmd_assumptions(args) -> int:
    grid = parse_grid(args.grid)
    t0 = time.perf_counter()
    out = Path(args.out)
    keep = out / f".{NAME}.parts"  # finished chunks, kept until the outputs are written
    records = run_assumptions(grid, args.trials, args.seed, workers=args.workers, dask=args.dask,
                              progress=not args.no_progress, keep=keep)
    seconds = time.perf_counter() - t0
    write_text(out / "assumptions.csv", to_csv(records))
    write_text(out / "assumptions.md", to_markdown(records, grid, args.trials, args.seed, seconds))
    write_bytes(out / "assumptions.png", plot(records))
    shutil.rmtree(keep, ignore_errors=True)
    print(f"assumptions: {len(records) // len(HYPOTHESES)} cells x {args.trials} trials in {seconds:.1f} s; "
          f"wrote {out / 'assumptions.csv'}, assumptions.md, assumptions.png")
    return 0

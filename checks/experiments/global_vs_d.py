"""``attnsvm reproduce global-vs-d``: see the table in :mod:`checks.experiments.reproduce`."""

from __future__ import annotations

import numpy as np

from numerics.errors import SolverError
from numerics.gd import AUTHORS
from numerics.tokens import corr

from .common import (
    CHUNK,
    INIT_SCALE,
    _csv,
    _plt,
    _png,
    error_status,
    kept_sweep,
    status_summary,
)
from .sweep import trial_rng, wilson_interval

GLOBAL_NT = ((5, 5), (6, 8))
GLOBAL_D = (2, 3, 4, 6, 8, 10, 15, 20)


def global_chunk(seed: int, n: int, T: int, d: int, trials: list[int]) -> list[dict]:
    from numerics.data import random_unit_sphere
    from numerics.gd import RandomInit, run_gd
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens, softmax_probs

    datas, inits = [], []
    for k in trials:
        rng = trial_rng(seed, "global-vs-d", (n, T, d), k)
        datas.append(random_unit_sphere(n, T, d, rng=rng))
        inits.append(int(rng.integers(0, 2**31 - 1)))
    W = run_gd(datas, AUTHORS, init=RandomInit(inits, INIT_SCALE)).W
    out = []
    for j, data in enumerate(datas):
        opt = optimal_tokens(data).index
        try:
            sol = solve_att_svm(data, opt)
        except SolverError as exc:  # undecided: counted as an error, not in the share
            out.append({"error": error_status(exc)})
            continue
        a = softmax_probs(data, W[j]).argmax(axis=1)
        reached = bool(sol.feasible and np.array_equal(a, opt))
        out.append({"infeasible": not sol.feasible, "reached": reached,
                    "corr": float(corr(W[j], sol.W)) if sol.feasible else float("nan")})
    return out


def run_global_vs_d(seed, trials, workers=None, dask=None, progress=True, keep=None) -> list[dict]:
    cells = [(n, T, d) for (n, T) in GLOBAL_NT for d in GLOBAL_D]
    tasks = [
        (seed, *c, list(range(s, min(s + CHUNK * 2, trials))))
        for c in cells
        for s in range(0, trials, CHUNK * 2)
    ]
    parts = kept_sweep(
        global_chunk, tasks, keep, workers=workers, dask=dask, progress=progress, desc="global-vs-d"
    )
    rows = []
    for c in cells:
        every = [r for t, p in zip(tasks, parts, strict=False) if tuple(t[1:4]) == c for r in p]
        errs = [r["error"] for r in every if "error" in r]
        rs = [r for r in every if "error" not in r]
        k = sum(r["reached"] for r in rs)
        lo, hi = wilson_interval(k, len(rs))
        cs = [r["corr"] for r in rs if r["reached"]]
        rows.append({"n": c[0], "T": c[1], "d": c[2], "trials": len(rs), "reached": k,
                     "share": k / len(rs) if rs else float("nan"),
                     "ci_low": lo, "ci_high": hi, "infeasible": sum(r["infeasible"] for r in rs),
                     "corr_reached_mean": float(np.mean(cs)) if cs else float("nan"),
                     "solver_errors": len(errs), "solver_status": status_summary(errs)})
    return rows


def report_global_vs_d(rows, trials, seed):
    cols = [
        "n",
        "T",
        "d",
        "trials",
        "reached",
        "share",
        "ci_low",
        "ci_high",
        "infeasible",
        "corr_reached_mean",
        "solver_errors",
        "solver_status",
    ]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for (n, T) in GLOBAL_NT:
        rs = [r for r in rows if (r["n"], r["T"]) == (n, T)]
        s = np.array([r["share"] for r in rs])
        err = np.array([s - [r["ci_low"] for r in rs], np.array([r["ci_high"] for r in rs]) - s])
        ax.errorbar([r["d"] for r in rs], s, yerr=err, marker="o", capsize=3, label=f"n={n}, T={T}")
    ax.set_xlabel("d")
    ax.set_ylabel("share of runs reaching the global solution")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend()
    nerr = sum(r["solver_errors"] for r in rows)
    ax.set_title(f"Global convergence vs d ({trials} runs per point, Wilson 95%; solver errors: {nerr})")
    md = [
        "# global-vs-d",
        "",
        f"Random unit-sphere data; normalised GD on W, step {AUTHORS.lr}, {AUTHORS.steps} steps, "
        f"{trials} runs per "
        "cell "
        f"(seed {seed}). A run reaches the global solution when its final softmax selects the optimal token "
        "of "
        "every example and Att-SVM(opt) is feasible (infeasible trials counted as not reached). Runs whose "
        f"Att-SVM(opt) no solver could certify are errors, outside the share ({nerr} in all).",
        "",
        "| n | T | d | runs | reached | share [95% CI] | infeasible | mean corr(W, W^mm) when reached | "
        "solver errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        err = f"{r['solver_errors']} ({r['solver_status']})" if r["solver_errors"] else "0"
        md.append(
            f"| {r['n']} | {r['T']} | {r['d']} | {r['trials']} | {r['reached']} | {r['share']:.2f} "
            f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}] | {r['infeasible']} | {r['corr_reached_mean']:.4f} | "
            f"{err} |"
        )
    md += ["", "![global-vs-d](global-vs-d.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)

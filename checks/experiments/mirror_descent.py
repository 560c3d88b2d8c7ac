"""``attnsvm reproduce mirror-descent``: the 3×3 table of corr(W_p, W^mm_q(α)) — the ℓp mirror-descent iterate
against the ℓq-AttSVM solution of the tokens it selects — for p, q ∈ {1.75, 2, 3} (Julistiono, Tarzanagh,
Azizan, arXiv 2410.14581: each MD-p correlates best with the SVM of its own p), see
:mod:`checks.experiments.reproduce`.

Protocol: random unit-sphere data (n = MD_N, T = MD_T, d = MD_D), the same --trials instances for every p;
normalised ℓp mirror descent (numerics.gd.Mirror(p, normalized=True)) with md-global-normalized's step and
budget (checks/theorems/_mirror.py: η = 0.1, 4000 steps, 1024 at p = 1.75 before float64 saturates) from
the small start N(0, 0.01²); α = the final iterate's softmax argmax per example; W^mm_q(α) the certified
ℓq-AttSVM(α) (numerics.svm.solve_lp_att_svm). A run whose ℓq-AttSVM(α) is infeasible or uncertified is
counted (``infeasible``, ``solver_errors``), never dropped silently, and left out of that cell's mean.
"""

from __future__ import annotations

import numpy as np

from numerics.errors import SolverError
from numerics.tokens import corr

from ..theorems._mirror import ETA_N, EXPONENTS, normalized_steps
from .common import CHUNK, INIT_SCALE, _csv, _plt, _png, error_status, kept_sweep, status_summary
from .sweep import trial_rng

MD_N, MD_T, MD_D = 4, 5, 6


def md_chunk(seed: int, p: float, trials: list[int]) -> list[dict]:
    from numerics.data import random_unit_sphere
    from numerics.gd import GDConfig, Mirror, run_gd
    from numerics.svm.lp import solve_lp_att_svm
    from numerics.tokens import softmax_probs

    datas, inits = [], []
    for k in trials:  # the instance depends on (seed, trial) only: every p runs on the same data
        rng = trial_rng(seed, "mirror-descent", (MD_N, MD_T, MD_D), k)
        datas.append(random_unit_sphere(MD_N, MD_T, MD_D, rng=rng))
        inits.append(INIT_SCALE * rng.standard_normal((MD_D, MD_D)))
    cfg = GDConfig(steps=normalized_steps(p), lr=ETA_N, geometry=Mirror(p, normalized=True))
    W = run_gd(datas, cfg, init=np.stack(inits)).W
    out = []
    for j, data in enumerate(datas):
        alpha = softmax_probs(data, W[j]).argmax(axis=1)
        row: dict = {"trial": trials[j]}
        for q in EXPONENTS:
            try:
                sol = solve_lp_att_svm(data, alpha, p=q)
            except SolverError as exc:
                row[q] = ("error", error_status(exc))
                continue
            row[q] = ("ok", float(corr(W[j], sol.W))) if sol.feasible else ("infeasible", "")
        out.append(row)
    return out


def run_mirror_descent(seed, trials, workers=None, dask=None, progress=True, keep=None) -> list[dict]:
    tasks = [(seed, p, list(range(s, min(s + CHUNK, trials)))) for p in EXPONENTS
             for s in range(0, trials, CHUNK)]
    parts = kept_sweep(md_chunk, tasks, keep, workers=workers, dask=dask, progress=progress,
                       desc="mirror-descent")
    rows = []
    for p in EXPONENTS:
        every = [r for t, part in zip(tasks, parts, strict=True) if t[1] == p for r in part]
        for q in EXPONENTS:
            cs = np.array([r[q][1] for r in every if r[q][0] == "ok"])
            errs = [r[q][1] for r in every if r[q][0] == "error"]
            best = sum(1 for r in every if all(r[s][0] == "ok" for s in EXPONENTS)
                       and max(EXPONENTS, key=lambda s: r[s][1]) == q)
            rows.append({"p": p, "q": q, "runs": len(cs),
                         "corr_mean": float(cs.mean()) if len(cs) else float("nan"),
                         "corr_min": float(cs.min()) if len(cs) else float("nan"),
                         "best_of_row": best,
                         "infeasible": sum(1 for r in every if r[q][0] == "infeasible"),
                         "solver_errors": len(errs), "solver_status": status_summary(errs)})
    return rows


def report_mirror_descent(rows, trials, seed):
    cols = ["p", "q", "runs", "corr_mean", "corr_min", "best_of_row", "infeasible", "solver_errors",
            "solver_status"]
    k = len(EXPONENTS)
    M = np.array([[next(r["corr_mean"] for r in rows if r["p"] == p and r["q"] == q) for q in EXPONENTS]
                  for p in EXPONENTS])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    im = ax.imshow(M, cmap="viridis")
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{M[i, j]:.4f}", ha="center", va="center",
                    color="k" if M[i, j] > (M.min() + M.max()) / 2 else "w")
    ax.set_xticks(range(k), [f"{q:g}" for q in EXPONENTS])
    ax.set_yticks(range(k), [f"{p:g}" for p in EXPONENTS])
    ax.set_xlabel("q of the ℓq-AttSVM solution")
    ax.set_ylabel("p of ℓp mirror descent")
    fig.colorbar(im, ax=ax)
    ax.set_title(f"mean corr(W_p, W^mm_q(α)), {trials} runs")
    md = [
        "# mirror-descent",
        "",
        f"Random unit-sphere data n={MD_N}, T={MD_T}, d={MD_D}, the same {trials} instances for every p "
        f"(seed {seed}); normalised ℓp mirror descent, step {ETA_N}, "
        + ", ".join(f"{normalized_steps(p)} steps at p = {p:g}" for p in EXPONENTS)
        + "; α = the final softmax argmax; W^mm_q(α) the certified ℓq-AttSVM(α). Cells: mean "
        "corr(W_p, W^mm_q(α)) over the runs whose ℓq-AttSVM(α) is feasible and certified; best of row: "
        "runs where q has the largest corr of the three.",
        "",
        "| MD p \\ SVM q | " + " | ".join(f"{q:g}" for q in EXPONENTS) + " |",
        "|---|" + "---|" * k,
    ]
    for i, p in enumerate(EXPONENTS):
        md.append(f"| {p:g} | " + " | ".join(f"{M[i, j]:.5f}" for j in range(k)) + " |")
    md += ["", "| p | q | runs | mean corr | min corr | best of row | infeasible | solver errors |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = f"{r['solver_errors']} ({r['solver_status']})" if r["solver_errors"] else "0"
        md.append(f"| {r['p']:g} | {r['q']:g} | {r['runs']} | {r['corr_mean']:.5f} | {r['corr_min']:.5f} | "
                  f"{r['best_of_row']} | {r['infeasible']} | {err} |")
    md += ["", "![mirror-descent](mirror-descent.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)

"""``attnsvm reproduce svm-rank``: see the table in :mod:`checks.experiments.reproduce`."""

from __future__ import annotations

import numpy as np

from numerics.errors import SolverError

from .common import (
    SVM_RANK_MAX_DRAWS,
    _csv,
    _plt,
    _png,
    error_status,
    kept_sweep,
    solve_nuc,
    status_summary,
)
from .sweep import trial_rng

RANK_NT = ((5, 5), (10, 5), (15, 5), (5, 10), (5, 15))
RANK_D = (1, 2, 3, 4, 5, 10, 15, 20)


def rank_cell(seed: int, n: int, T: int, d: int, trials: int) -> dict:
    """Draw until ``trials`` feasible instances (or the draw cap); ranks of both certified solutions."""
    from numerics.data import random_unit_sphere
    from numerics.svm import solve_att_svm

    fro_r, nuc_r, infeasible, retries, draws, errors = [], [], 0, 0, 0, []
    while len(fro_r) < trials and draws < SVM_RANK_MAX_DRAWS * trials:
        data = random_unit_sphere(n, T, d, rng=trial_rng(seed, "svm-rank", (n, T, d), draws))
        draws += 1
        try:
            fro = solve_att_svm(data)
            if not fro.feasible:
                infeasible += 1
                continue
            nuc, retried = solve_nuc(data, None)
        except SolverError as exc:  # an outcome: recorded with the solver's status, the cell goes on drawing
            errors.append(error_status(exc))
            continue
        retries += retried
        fro_r.append(fro.rank)
        nuc_r.append(nuc.rank)
    f, u = np.array(fro_r, float), np.array(nuc_r, float)
    nan = float("nan")
    return {
        "n": n,
        "T": T,
        "d": d,
        "feasible": len(fro_r),
        "infeasible": infeasible,
        "draws": draws,
        "fro_rank_mean": float(f.mean()) if f.size else nan,
        "nuc_rank_mean": float(u.mean()) if u.size else nan,
        "fro_rank_std": float(f.std()) if f.size else nan,
        "nuc_rank_std": float(u.std()) if u.size else nan,
        "fro_rank_is_min_dn": float(np.mean(f == min(d, n))) if f.size else nan,
        "nuc_retries": retries,
        "solver_errors": len(errors),
        "solver_status": status_summary(errors),
    }


def run_svm_rank(seed, trials, workers=None, dask=None, progress=True, keep=None) -> list[dict]:
    tasks = [(seed, n, T, d, trials) for (n, T) in RANK_NT for d in RANK_D]
    return kept_sweep(rank_cell, tasks, keep, workers=workers, dask=dask, progress=progress, desc="svm-rank")


def report_svm_rank(rows, trials, seed):
    cols = [
        "n",
        "T",
        "d",
        "feasible",
        "infeasible",
        "fro_rank_mean",
        "nuc_rank_mean",
        "fro_rank_std",
        "nuc_rank_std",
        "fro_rank_is_min_dn",
        "draws",
        "nuc_retries",
        "solver_errors",
        "solver_status",
    ]
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax, sel, lab in (
        (axes[0], [(5, 5), (10, 5), (15, 5)], "n"),
        (axes[1], [(5, 5), (5, 10), (5, 15)], "T"),
    ):
        for k, (n, T) in enumerate(sel):
            rs = [r for r in rows if (r["n"], r["T"]) == (n, T)]
            d = np.array([r["d"] for r in rs])
            c = f"C{k}"
            val = n if lab == "n" else T
            ax.errorbar(
                d,
                [r["fro_rank_mean"] for r in rs],
                yerr=[r["fro_rank_std"] for r in rs],
                color=c,
                ls="--",
                marker="s",
                ms=4,
                capsize=2,
                label=f"Frobenius, {lab}={val}",
            )
            ax.errorbar(
                d,
                [r["nuc_rank_mean"] for r in rs],
                yerr=[r["nuc_rank_std"] for r in rs],
                color=c,
                ls="-",
                marker="o",
                ms=4,
                capsize=2,
                label=f"nuclear, {lab}={val}",
            )
            bad = [r for r in rs if r["solver_errors"]]
            if bad:  # cells with solver errors: marked, with their count
                ax.scatter([r["d"] for r in bad], [0.0] * len(bad), marker="x", color=c, s=40, zorder=3,
                           label=f"solver errors, {lab}={val}")
                for r in bad:
                    ax.annotate(
                        str(r["solver_errors"]),
                        (r["d"], 0.0),
                        textcoords="offset points",
                        xytext=(3, 3),
                        fontsize=7,
                        color=c,
                    )
        ax.set_xlabel("d")
        ax.set_ylabel("rank of certified Att-SVM solution")
        ax.set_title(f"varying {lab} ({'T=5' if lab == 'n' else 'n=5'})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    nerr = sum(r["solver_errors"] for r in rows)
    fig.suptitle(f"Rank of SVM solutions (σ_j > 1e-6 σ_1; up to {trials} feasible instances per cell; "
                 f"solver errors: {nerr})")
    md = [
        "# svm-rank",
        "",
        "Random unit-sphere data (cross-attention), Att-SVM(opt), certified Frobenius (KKT) and nuclear "
        "(SDP "
        f"duality) solutions; rank = #σ_j > 1e-6 σ_1. Up to {trials} feasible instances per cell (at most "
        f"{SVM_RANK_MAX_DRAWS}×{trials} draws; seed {seed}); every infeasible draw counted "
        "(Farkas-certified); "
        f"draws no solver could certify are errors, counted with the solver's status ({nerr} in all).",
        "",
        "| n | T | d | feasible | infeasible | Frobenius rank | min(d, n) | share = min(d,n) | nuclear rank "
        "| solver errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        err = f"{r['solver_errors']} ({r['solver_status']})" if r["solver_errors"] else "0"
        md.append(
            f"| {r['n']} | {r['T']} | {r['d']} | {r['feasible']} | {r['infeasible']} | "
            f"{r['fro_rank_mean']:.2f} | "
            f"{min(r['d'], r['n'])} | {r['fro_rank_is_min_dn']:.2f} | {r['nuc_rank_mean']:.2f} ± "
            f"{r['nuc_rank_std']:.2f} "
            f"| {err} |"
        )
    md += ["", "![svm-rank](svm-rank.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)

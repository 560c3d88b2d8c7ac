"""``attnsvm reproduce multi-token``: see the table in :mod:`checks.experiments.reproduce`."""

from __future__ import annotations

import warnings

import numpy as np

from numerics.errors import SolverError
from numerics.gd import AUTHORS
from numerics.tokens import corr

from .common import (
    CHUNK,
    RECORD_EVERY,
    _csv,
    _plt,
    _png,
    error_status,
    kept_sweep,
    status_summary,
)
from .sweep import trial_rng

MT_N, MT_T = 3, 4
MT_D = (4, 6, 8, 10)
#: The authors' protocol (2000 steps: iterates 0..2000, 2001 of them).
MT_GD = AUTHORS
CANDIDATES = ("svmeq", "dir", "one_token")


def mt_chunk(seed: int, d: int, trials: list[int]) -> dict:
    """1 − corr curves of the three candidates per unambiguous run; counts of excluded runs."""
    import torch

    from numerics.attention import ReLUHead
    from numerics.data import random_unit_sphere
    from numerics.gd import RandomInit, run_gd
    from numerics.svm import fit_svmeq, gen_svm, solve_att_svm
    from numerics.tokens import softmax_probs

    datas, inits, Vs = [], [], []
    for k in trials:
        rng = trial_rng(seed, "multi-token", (MT_N, MT_T, d), k)
        datas.append(random_unit_sphere(MT_N, MT_T, d, rng=rng))
        Vs.append(rng.standard_normal((d, d)) / np.sqrt(d))
        inits.append(int(rng.integers(0, 2**31 - 1)))
    head = ReLUHead(torch.as_tensor(np.stack(Vs)))
    res = run_gd(datas, MT_GD, init=RandomInit(inits), head=head, record_every=RECORD_EVERY * 2)
    curves = {c: [] for c in CANDIDATES}
    ambiguous = dir_infeasible = one_infeasible = 0
    errors = []
    for j, data in enumerate(datas):
        try:
            g = gen_svm(data, res.W[j], kind="W")
            if g.ambiguous:
                ambiguous += 1
                continue
            if g.W_dir is None or not g.directional.feasible:
                dir_infeasible += 1
                continue
            one = solve_att_svm(data, softmax_probs(data, res.W[j]).argmax(axis=1))
        except SolverError as exc:  # an outcome: counted, excluded from the curves
            errors.append(error_status(exc))
            continue
        one_infeasible += not one.feasible
        cur = {c: [] for c in CANDIDATES}
        for W in res.W_traj[:, j]:
            _, Weq = fit_svmeq(g.W_fin, g.W_dir, W)
            cur["svmeq"].append(1 - float(corr(W, Weq)))
            cur["dir"].append(1 - float(corr(W, g.W_dir)))  # NaN when W^dir = 0 (no masked token anywhere)
            cur["one_token"].append(1 - float(corr(W, one.W)) if one.feasible else float("nan"))
        for c in CANDIDATES:
            curves[c].append(cur[c])
        curves.setdefault("multi", []).append(int(sum(len(s) > 1 for s in g.selected)))
    return {"iterations": res.iterations, "curves": {c: np.array(v).reshape(-1, len(res.iterations))
                                                     for c, v in curves.items() if c in CANDIDATES},
            "multi": curves.get("multi", []), "ambiguous": ambiguous, "dir_infeasible": dir_infeasible,
            "one_infeasible": one_infeasible, "runs": len(trials), "solver_errors": len(errors),
            "error_statuses": errors}


def run_multi_token(seed, trials, workers=None, dask=None, progress=True, keep=None) -> dict:
    tasks = [(seed, d, list(range(s, min(s + CHUNK, trials)))) for d in MT_D for s in range(0, trials, CHUNK)]
    parts = kept_sweep(
        mt_chunk, tasks, keep, workers=workers, dask=dask, progress=progress, desc="multi-token"
    )
    out = {}
    for d in MT_D:
        ps = [p for t, p in zip(tasks, parts, strict=False) if t[1] == d]
        out[d] = {"iterations": ps[0]["iterations"],
                  "curves": {c: np.concatenate([p["curves"][c] for p in ps]) for c in CANDIDATES},
                  **{k: sum(p[k] for p in ps)
                     for k in ("ambiguous", "dir_infeasible", "one_infeasible", "runs", "solver_errors")},
                  "error_statuses": [e for p in ps for e in p["error_statuses"]],
                  "multi_selected": sum(int(m > 0) for p in ps for m in p["multi"])}
    return out


def report_multi_token(res, trials, seed):
    cols = [
        "d",
        "iteration",
        "candidate",
        "one_minus_corr_mean",
        "one_minus_corr_median",
        "runs",
        "ambiguous",
        "dir_infeasible",
        "one_token_infeasible",
        "solver_errors",
    ]
    rows = []
    plt = _plt()
    fig, axes = plt.subplots(1, len(MT_D), figsize=(4.2 * len(MT_D), 4.0), sharey=True)
    labels = {"svmeq": "W^svmeq (Gen-SVM)", "dir": "W^dir", "one_token": "one-token Att-SVM"}
    for ax, d in zip(axes, MT_D, strict=False):
        r = res[d]
        for c in CANDIDATES:
            A = r["curves"][c]
            with warnings.catch_warnings():  # a candidate undefined on every run (e.g. W^dir = 0) is NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                med = np.nanmedian(A, axis=0) if A.size else np.full(len(r["iterations"]), np.nan)
                mean = np.nanmean(A, axis=0) if A.size else med
            for s, it in enumerate(r["iterations"]):
                rows.append(
                    {
                        "d": d,
                        "iteration": int(it),
                        "candidate": c,
                        "one_minus_corr_mean": float(mean[s]),
                        "one_minus_corr_median": float(med[s]),
                        "runs": int(A.shape[0]),
                        "ambiguous": r["ambiguous"],
                        "dir_infeasible": r["dir_infeasible"],
                        "solver_errors": r["solver_errors"],
                        "one_token_infeasible": r["one_infeasible"],
                    }
                )
            ax.semilogy(r["iterations"][1:], np.maximum(med[1:], 1e-16), label=labels[c])
        ax.set_title(f"d={d} ({r['curves']['svmeq'].shape[0]} unambiguous of {r['runs']}"
                     + (f"; {r['solver_errors']} solver errors" if r["solver_errors"] else "") + ")")
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("median 1 − corr(W(k), candidate)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Multi-token selection with a ReLU head (n=3, T=4): which SVM predicts GD")
    md = [
        "# multi-token",
        "",
        "n=3, T=4, ReLU head h(u) = 1ᵀReLU(Vᵀu), V (d×d) random fixed per run; "
        f"normalised GD step {MT_GD.lr}, "
        f"{MT_GD.steps + 1} iterates; {trials} runs per d (seed {seed}). Token sets from the final softmax "
        "(selected s > 1e-3, masked s ≤ 1e-6); runs with probabilities in between are ambiguous and excluded "
        "(counted). W^svmeq = W^fin + R W^dir with R fitted per iterate.",
        "",
        "| d | runs | ambiguous | W^dir infeasible | unambiguous | with a multi-token example | "
        "1−corr W^svmeq | 1−corr W^dir | 1−corr one-token (infeasible) | solver errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in MT_D:
        r = res[d]
        fin = {c: [x for x in rows if x["d"] == d and x["candidate"] == c][-1]["one_minus_corr_median"]
               for c in CANDIDATES}
        md.append(
            f"| {d} | {r['runs']} | {r['ambiguous']} | {r['dir_infeasible']} | "
            f"{r['curves']['svmeq'].shape[0]} | "
            f"{r['multi_selected']} | {fin['svmeq']:.2e} | {fin['dir']:.2e} | {fin['one_token']:.2e} "
            f"({r['one_infeasible']}) | {r['solver_errors']}"
            + (f" ({status_summary(r['error_statuses'])})" if r["solver_errors"] else "")
            + " |"
        )
    md += ["", "(medians at the last iterate)", "", "![multi-token](multi-token.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)

"""``attnsvm reproduce local-convergence``: see the table in :mod:`checks.experiments.reproduce`."""

from __future__ import annotations

import numpy as np

from numerics.errors import SolverError
from numerics.gd import AUTHORS, AUTHORS_KQ, AUTHORS_WD, uniform_init
from numerics.tokens import corr

from .common import (
    CHUNK,
    INIT_SCALE,
    RECORD_EVERY,
    _csv,
    _plt,
    _png,
    error_status,
    kept_sweep,
    solve_nuc,
    status_summary,
)
from .sweep import trial_rng

LC_SHAPE = (6, 8, 10)
#: The two GD protocols of local-convergence (same data per trial, paired):
#: "authors": umich-sota/TF-as-SVM local_converge.ipynb — nn.Linear's default initialisation (entries
#: uniform on ±1/√d) for W and for K, Q, and, for (K, Q) only, eps·(‖K‖_F² + ‖Q‖_F²) added to the loss with
#: eps = float64 machine epsilon (their W loss has no such term); "plain": INIT_SCALE·N(0, 1), no decay.
LC_PROTOCOLS = ("authors", "plain")
def _lc_run(datas, inits, seed, trials, protocol, param, d):
    from numerics.gd import RandomInit, run_gd

    if protocol == "plain":
        return run_gd(datas, AUTHORS.but(param=param), init=RandomInit(inits, INIT_SCALE),
                      record_every=RECORD_EVERY)
    rngs = [trial_rng(seed, f"local-convergence-authors-init-{param}", LC_SHAPE, k) for k in trials]
    if param == "W":
        return run_gd(datas, AUTHORS, init=np.stack([uniform_init(g, (d, d), d) for g in rngs]),
                      record_every=RECORD_EVERY)
    K0 = np.stack([uniform_init(g, (d, d), d) for g in rngs])
    Q0 = np.stack([uniform_init(g, (d, d), d) for g in rngs])
    return run_gd(datas, AUTHORS_KQ, init=(K0, Q0), record_every=RECORD_EVERY)


def lc_chunk(seed: int, trials: list[int]) -> dict:
    """Curves (per run) of max-softmax and corr with Frobenius / nuclear Att-SVM(α) for W and (K, Q),
    under both protocols (LC_PROTOCOLS)."""
    from numerics.data import random_unit_sphere
    from numerics.svm import solve_att_svm
    from numerics.tokens import softmax_probs

    n, T, d = LC_SHAPE
    datas, inits = [], []
    for k in trials:
        rng = trial_rng(seed, "local-convergence", LC_SHAPE, k)
        datas.append(random_unit_sphere(n, T, d, rng=rng))
        inits.append(int(rng.integers(0, 2**31 - 1)))
    out = {"retries": 0, "error_statuses": []}
    for protocol in LC_PROTOCOLS:
        for param in ("W", "KQ"):
            res = _lc_run(datas, inits, seed, trials, protocol, param, d)
            its, Wt = res.iterations, res.W_traj
            S = len(its)
            ms = np.full((len(datas), S), np.nan)
            cf = np.full((len(datas), S), np.nan)
            cn = np.full((len(datas), S), np.nan)
            infeasible = errors = 0
            for j, data in enumerate(datas):
                for s in range(S):
                    ms[j, s] = softmax_probs(data, Wt[s, j]).max(axis=1).mean()
                alpha = softmax_probs(data, Wt[-1, j]).argmax(axis=1)
                try:
                    fro = solve_att_svm(data, alpha)
                    if not fro.feasible:
                        infeasible += 1
                        continue
                    nuc, retried = solve_nuc(data, alpha)
                except SolverError as exc:  # an outcome: counted, the run goes on
                    errors += 1
                    out["error_statuses"].append(error_status(exc))
                    continue
                out["retries"] += retried
                for s in range(S):
                    cf[j, s] = float(corr(Wt[s, j], fro.W))
                    cn[j, s] = float(corr(Wt[s, j], nuc.W))
            out[(protocol, param)] = {
                "iterations": its,
                "max_softmax": ms,
                "corr_fro": cf,
                "corr_nuc": cn,
                "infeasible": infeasible,
                "solver_errors": errors,
                "final_norm": res.norms,
            }
    return out


def run_local_convergence(seed, trials, workers=None, dask=None, progress=True, keep=None) -> dict:
    tasks = [(seed, list(range(s, min(s + CHUNK, trials)))) for s in range(0, trials, CHUNK)]
    parts = kept_sweep(
        lc_chunk, tasks, keep, workers=workers, dask=dask, progress=progress, desc="local-convergence"
    )
    out = {"retries": sum(p["retries"] for p in parts),
           "error_statuses": [st for p in parts for st in p["error_statuses"]]}
    for key in ((pr, pa) for pr in LC_PROTOCOLS for pa in ("W", "KQ")):
        out[key] = {
            "iterations": parts[0][key]["iterations"],
            **{k: np.concatenate([p[key][k] for p in parts])
               for k in ("max_softmax", "corr_fro", "corr_nuc", "final_norm")},
            "infeasible": sum(p[key]["infeasible"] for p in parts),
            "solver_errors": sum(p[key]["solver_errors"] for p in parts),
        }
    return out


def report_local_convergence(res, trials, seed):
    cols = ["iteration", "param", "mean_max_softmax", "max_softmax_std", "corr_fro_mean", "corr_fro_std",
            "corr_nuc_mean", "corr_nuc_std", "runs", "infeasible", "protocol", "solver_errors"]
    rows = []
    nan = float("nan")
    for protocol in LC_PROTOCOLS:
        for param in ("W", "KQ"):
            r = res[(protocol, param)]
            ok = ~np.isnan(r["corr_fro"][:, -1])
            for s, it in enumerate(r["iterations"]):
                rows.append({"iteration": int(it), "param": param,
                             "mean_max_softmax": float(np.mean(r["max_softmax"][:, s])),
                             "max_softmax_std": float(np.std(r["max_softmax"][:, s])),
                             "corr_fro_mean": float(np.mean(r["corr_fro"][ok, s])) if ok.any() else nan,
                             "corr_fro_std": float(np.std(r["corr_fro"][ok, s])) if ok.any() else nan,
                             "corr_nuc_mean": float(np.mean(r["corr_nuc"][ok, s])) if ok.any() else nan,
                             "corr_nuc_std": float(np.std(r["corr_nuc"][ok, s])) if ok.any() else nan,
                             "runs": int(ok.sum()), "infeasible": int(r["infeasible"]), "protocol": protocol,
                             "solver_errors": int(r["solver_errors"])})
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    styles = {"authors": ("-", 0.15), "plain": ("--", 0.07)}
    for protocol in LC_PROTOCOLS:
        ls, fa = styles[protocol]
        for param, c in (("W", "tab:blue"), ("KQ", "tab:red")):
            rs = [r for r in rows if r["param"] == param and r["protocol"] == protocol]
            it = np.array([r["iteration"] for r in rs])
            lab = "W" if param == "W" else "(K, Q)"
            for ax, key, sdkey in ((axes[0], "mean_max_softmax", "max_softmax_std"),
                                   (axes[1], "corr_fro_mean", "corr_fro_std"),
                                   (axes[2], "corr_nuc_mean", "corr_nuc_std")):
                m = np.array([r[key] for r in rs])
                sd = np.array([r[sdkey] for r in rs])
                ax.plot(it, m, color=c, ls=ls, label=f"GD on {lab}, {protocol}")
                ax.fill_between(it, m - sd, np.minimum(m + sd, 1.0), color=c, alpha=fa)
    for ax, title in zip(
        axes, ("mean max-softmax", "corr with Frobenius W^mm_α", "corr with nuclear W^mm_⋆,α"), strict=True
    ):
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    nerr = len(res["error_statuses"])
    fig.suptitle(f"Local convergence: n=6, T=8, d=10, {trials} seeds, normalised GD step {AUTHORS.lr} "
                 "(mean ± std"
                 f"{f'; {nerr} solver errors excluded' if nerr else ''}); "
                 "solid: authors' protocol (U(±1/√d) init, eps·(‖K‖²+‖Q‖²) for (K, Q)), dashed: plain "
                 f"({INIT_SCALE}·N(0,1) init, no decay)", fontsize=9)
    fin = {(pr, p): [r for r in rows if r["param"] == p and r["protocol"] == pr][-1]
           for pr in LC_PROTOCOLS for p in ("W", "KQ")}
    errors_why = f" ({status_summary(res['error_statuses'])})" if res["error_statuses"] else ""
    md = [
        "# local-convergence",
        "",
        f"n=6, T=8, d=10 cross-attention, {trials} seeds (seed {seed}); normalised GD, step {AUTHORS.lr}, "
        f"{AUTHORS.steps} steps, W and (K, Q) with m = d; α = argmax of the final softmax; "
        "certified Att-SVM(α). "
        "Two protocols on the same data:",
        "",
        "- **authors** (the faithful reproduction of umich-sota/TF-as-SVM `local_converge.ipynb`): "
        "nn.Linear's "
        "default initialisation, entries uniform on ±1/√d, for W and for K, Q; for (K, Q) the loss gets "
        f"eps·(‖K‖_F² + ‖Q‖_F²) with eps = {AUTHORS_WD:.3g} (float64 machine epsilon; their W loss has no "
        "such term);",
        f"- **plain**: entries {INIT_SCALE}·N(0, 1), no weight decay.",
        "",
        f"Nuclear solves certified by a later rung of the solver ladder: {res['retries']}. Runs whose "
        "Att-SVM(α) no solver could certify (errors, excluded from the curves): "
        f"{len(res['error_statuses'])}{errors_why}.",
        "",
        "| protocol | param | iteration | mean max-softmax | corr Frobenius | corr nuclear | median ‖W‖_F | "
        "runs | infeasible Att-SVM(α) | solver errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (pr, p), f in fin.items():
        md.append(
            f"| {pr} | {p} | {f['iteration']} | {f['mean_max_softmax']:.4f} | {f['corr_fro_mean']:.4f} ± "
            f"{f['corr_fro_std']:.4f} | {f['corr_nuc_mean']:.4f} ± {f['corr_nuc_std']:.4f} | "
            f"{float(np.median(res[(pr, p)]['final_norm'])):.4g} | {f['runs']} | {f['infeasible']} | "
            f"{f['solver_errors']} |"
        )
    a_kq, p_kq = fin[("authors", "KQ")]["corr_nuc_mean"], fin[("plain", "KQ")]["corr_nuc_mean"]
    md += [
        "",
        "Paper (TLTO §6): W ↔ Frobenius and (K, Q) ↔ nuclear reach corr ≈ 0.997, cross pairs ≈ 0.85.",
        "",
        f"(K, Q) ↔ nuclear: {a_kq:.4f} with the authors' protocol, {p_kq:.4f} with the plain one. "
        "The paper's (K, Q) result depends on the tiny weight decay eps·(‖K‖² + ‖Q‖²), which stops the "
        "quadratic growth of ‖K Q^T‖ and so keeps the softmax out of exact float64 underflow, where the "
        "gradient is exactly 0 and plain normalised GD freezes (the dashed (K, Q) curves go flat within "
        "≈ 750 steps, short of the nuclear direction). With the decay, once the data gradient falls to the "
        "size of the decay term the normalised step stops growing K and Q, the norm settles and GD keeps "
        "moving towards the nuclear-norm SVM direction.",
        "",
        "![local-convergence](local-convergence.png)",
        "",
    ]
    return _csv(rows, cols), _png(fig), "\n".join(md)

"""``attnsvm reproduce gd-paths``: see the table in :mod:`checks.experiments.reproduce`."""

from __future__ import annotations

import numpy as np

from numerics.gd import AUTHORS
from numerics.tokens import corr

from .common import (
    INIT_SCALE,
    _csv,
    _plt,
    _png,
    solve_nuc,
)
from .sweep import trial_rng

#: Hand-placed tokens (n=2, T=3, d=2), head v = e_1, labels (+1, -1), cross-attention queries; chosen so
#: that the Frobenius and nuclear SVM directions differ clearly (corr(W^mm, W^mm_⋆) ≈ 0.73).
PATHS_X = np.array([[[0.4, -1.0], [0.2, 0.8], [-0.2, 0.4]],
                    [[-0.7, 0.5], [0.5, 0.2], [0.8, 0.1]]])
PATHS_Y = np.array([1.0, -1.0])
PATHS_Z = np.array([[0.2, -1.0], [0.6, -0.3]])
PATHS_V = np.array([1.0, 0.0])


def _paths_data():
    from numerics.data import AttentionData

    return AttentionData(PATHS_X, PATHS_Y, PATHS_Z, PATHS_V)


def run_gd_paths(seed: int, trials: int, workers=None, dask=None, progress=True, keep=None) -> dict:
    from numerics.gd import RandomInit, run_gd
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens

    data = _paths_data()
    opt = optimal_tokens(data).index
    fro = solve_att_svm(data, opt)
    nuc, _ = solve_nuc(data, opt)
    inits = [int(trial_rng(seed, "gd-paths", (2, 3, 2), k).integers(0, 2**31 - 1)) for k in range(trials)]
    rows, traj = [], {}
    for param in ("W", "KQ"):
        res = run_gd([data] * trials, AUTHORS.but(param=param), init=RandomInit(inits, INIT_SCALE),
                     record_every=10)
        its, Wt = res.iterations, res.W_traj
        traj[param] = (its, Wt)
        for s, it in enumerate(its):
            for r in range(trials):
                W = Wt[s, r]
                nW = np.linalg.norm(W)
                for i in range(2):
                    u = W @ PATHS_Z[i] / nW if nW > 0 else np.zeros(2)
                    rows.append({"iteration": int(it), "param": param, "init": r, "example": i,
                                 "wz_x": float(u[0]), "wz_y": float(u[1]),
                                 "corr_fro": float(corr(W, fro.W)), "corr_nuc": float(corr(W, nuc.W))})
    return {"rows": rows, "traj": traj, "fro": fro, "nuc": nuc, "opt": opt, "data": data}


def report_gd_paths(res: dict, trials: int, seed: int) -> tuple[str, bytes, str]:
    cols = ["iteration", "param", "init", "example", "wz_x", "wz_y", "corr_fro", "corr_nuc"]
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.2))
    colors = ["tab:blue", "tab:red"]
    fro, nuc, data = res["fro"], res["nuc"], res["data"]
    for ax, param, title in zip(axes, ("W", "KQ"), ("GD on W", "GD on (K, Q)"), strict=False):
        its, Wt = res["traj"][param]
        for i in range(2):
            for t in range(3):
                mk = "*" if t == res["opt"][i] else "o"
                ax.scatter(*data.X[i, t], marker=mk, s=140 if mk == "*" else 50, color=colors[i], alpha=0.35,
                           edgecolor="k", zorder=2)
            for r in range(Wt.shape[1]):
                P = np.array([W @ PATHS_Z[i] / max(np.linalg.norm(W), 1e-300) for W in Wt[:, r]])
                ax.plot(P[:, 0], P[:, 1], color=colors[i], lw=1.2, alpha=0.8,
                        label=f"W(k) z_{i + 1}/‖W(k)‖ (example {i + 1})" if r == 0 else None)
                ax.plot(*P[-1], "o", color=colors[i], ms=4)
            for Wsv, ls, nm in ((fro.W, "--", "Frobenius W^mm"), (nuc.W, ":", "nuclear W^mm_⋆")):
                u = Wsv @ PATHS_Z[i] / np.linalg.norm(Wsv)
                u = u / np.linalg.norm(u) * 1.3
                ax.plot([0, u[0]], [0, u[1]], ls, color=colors[i], lw=2.0,
                        label=f"{nm} z_{i + 1} direction")
        cf = np.mean([float(corr(W, fro.W)) for W in Wt[-1]])
        cn = np.mean([float(corr(W, nuc.W)) for W in Wt[-1]])
        ax.set_title(f"{title}: final corr fro {cf:.3f}, nuc {cn:.3f}")
        ax.set_xlabel("coordinate 1")
        ax.set_ylabel("coordinate 2")
        ax.axhline(0, color="0.8", lw=0.6)
        ax.axvline(0, color="0.8", lw=0.6)
        ax.set_aspect("equal", adjustable="datalim")
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle("GD paths vs Att-SVM directions (n=2, T=3, d=2; stars: optimal tokens)")
    final = {
        p: [r for r in res["rows"]
            if r["param"] == p and r["iteration"] == AUTHORS.steps and r["example"] == 0]
        for p in ("W", "KQ")
    }
    md = [
        "# gd-paths", "",
        f"n=2, T=3, d=2 hand-placed tokens; normalised GD, step {AUTHORS.lr}, {AUTHORS.steps} steps; "
        f"{trials} "
        f"initialisations (seed {seed}). corr(W^mm, W^mm_⋆) = {float(corr(fro.W, nuc.W)):.4f}; "
        f"ranks: Frobenius {fro.rank}, nuclear {nuc.rank}.", "",
        "| parametrisation | final corr with Frobenius (mean) | final corr with nuclear (mean) |",
        "|---|---|---|",
    ]
    for p in ("W", "KQ"):
        md.append(f"| {p} | {np.mean([r['corr_fro'] for r in final[p]]):.4f} | "
                  f"{np.mean([r['corr_nuc'] for r in final[p]]):.4f} |")
    md += ["", "![gd-paths](gd-paths.png)", ""]
    return _csv(res["rows"], cols), _png(fig), "\n".join(md)

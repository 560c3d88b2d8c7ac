"""``attnsvm reproduce ntp-cyclic``: the cyclic experiment of Li, Huang, Ildiz, Rawat, Oymak (AISTATS 2024,
arXiv 2403.08081) in its setting n = 3, T = 3, K = 5, d = 8: see the table in
:mod:`checks.experiments.reproduce`.

Per trial one draw of numerics.ntp.random_ntp (cyclic: some G^(k) has an SCC of two or more tokens), plain GD
from W(0) = 0 at η = 1/L for NTP_STEPS steps, and on a log grid of τ: corr(W(τ), W^svm),
‖Π_{S_fin} W(τ) − W^fin‖_F and corr(W(τ), W^fin + R W^svm/‖W^svm‖) with R = ⟨W(τ), W^svm⟩/‖W^svm‖.
"""

from __future__ import annotations

import numpy as np

from .common import _csv, _plt, _png
from .sweep import trial_rng

NTP_SETTING = (3, 3, 5, 8)  # n, T, K, d (the paper's)
NTP_STEPS = 20000


def run_ntp_cyclic(seed: int, trials: int, workers=None, dask=None, progress=True, keep=None) -> dict:
    """Every trial's draw, certified graph-SVM and W^fin, and one batched GD run over all trials (one
    shape)."""
    from numerics.ntp import finite_part, graph_svm, random_ntp, scc_json, smoothness_bound
    from numerics.ntp_gd import record_grid, run_ntp_gd
    from numerics.tokens import corr

    datas = [random_ntp(trial_rng(seed, "ntp-cyclic", NTP_SETTING, k), *NTP_SETTING, kind="cyclic")[0]
             for k in range(trials)]
    svs, fps = [graph_svm(x) for x in datas], [finite_part(x) for x in datas]
    r = run_ntp_gd(datas, steps=NTP_STEPS, lr=[1.0 / smoothness_bound(x) for x in datas],
                   record_at=record_grid(NTP_STEPS))
    rows, infos = [], []
    for k, (data, sv, fp) in enumerate(zip(datas, svs, fps, strict=True)):
        u = sv.W / np.linalg.norm(sv.W)
        for it, W in zip(r.iterations, r.W_traj[:, k], strict=True):
            R = float(np.sum(W * u))
            rows.append({"trial": k, "iteration": int(it), "W_norm": float(np.linalg.norm(W)),
                         "corr_svm": float(corr(W, sv.W)) if np.any(W) else 0.0,
                         "fin_resid": float(np.linalg.norm(fp.project(W) - fp.W)),
                         "corr_svmeq": float(corr(W, fp.W + R * u)) if np.any(W) else 0.0})
        infos.append({"trial": k, "tokens": data.tokens.tolist(), "labels": data.labels.tolist(),
                      "scc": scc_json(sv.graphs), "fin_norm": float(np.linalg.norm(fp.W)),
                      "svm_norm": sv.objective})
    return {"rows": rows, "infos": infos}


def report_ntp_cyclic(res: dict, trials: int, seed: int) -> tuple[str, bytes, str]:
    cols = ["trial", "iteration", "W_norm", "corr_svm", "fin_resid", "corr_svmeq"]
    rows = res["rows"]
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    panels = (("1 − corr(W(τ), W^svm)", lambda r: 1 - r["corr_svm"]),
              ("‖Π_Sfin W(τ) − W^fin‖_F", lambda r: r["fin_resid"]),
              ("1 − corr(W(τ), W^fin + R W^svm/‖W^svm‖)", lambda r: 1 - r["corr_svmeq"]))
    for ax, (name, f) in zip(axes, panels, strict=True):
        for k in range(trials):
            pts = [(r["iteration"], f(r)) for r in rows if r["trial"] == k and r["iteration"] > 0]
            x, y = np.array(pts).T
            ax.loglog(x, np.maximum(y, 1e-16), lw=1.2, label=f"trial {k}")
        ax.set_xlabel("iteration τ")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"NTP, cyclic graphs (n, T, K, d) = {NTP_SETTING}: plain GD, η = 1/L, {NTP_STEPS} steps")
    its = np.array(sorted({r["iteration"] for r in rows}))
    marks = {int(its[np.argmin(np.abs(its - t))]) for t in (10, 100, 1000, 10000, NTP_STEPS)}
    md = ["# ntp-cyclic", "",
          f"Li et al. (AISTATS 2024, arXiv 2403.08081), cyclic experiment: (n, T, K, d) = {NTP_SETTING}, "
          f"{trials} draws of numerics.ntp.random_ntp (seed {seed}), plain GD from 0 at η = 1/L.", "",
          "| trial | SCCs per last token | ‖W^fin‖ | ‖W^svm‖ |", "|---|---|---|---|"]
    for info in res["infos"]:
        md.append(f"| {info['trial']} | {info['scc']} | {info['fin_norm']:.4f} | {info['svm_norm']:.4f} |")
    md += ["", "| trial | τ | ‖W‖ | corr(W, W^svm) | ‖Π_Sfin W − W^fin‖ | corr(W, W^fin + R W^svm) |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        if r["iteration"] in marks:
            md.append(f"| {r['trial']} | {r['iteration']} | {r['W_norm']:.3f} | {r['corr_svm']:.6f} | "
                      f"{r['fin_resid']:.3e} | {r['corr_svmeq']:.6f} |")
    md += ["", "![ntp-cyclic](ntp-cyclic.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)

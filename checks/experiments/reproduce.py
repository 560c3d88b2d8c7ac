"""``attnsvm reproduce NAME``: regenerate one of the paper's experiments (TLTO, arXiv 2308.16898;
THEORY.md §6) as NAME.csv, NAME.png and NAME.md in --out.

=================  ===============================================================================
name               experiment
=================  ===============================================================================
gd-paths           n=2, T=3, d=2 hand-placed tokens; normalised GD (2000 steps) on W and on (K, Q)
                   from --trials initialisations; 2-D paths of W(k) z_i / ‖W(k)‖_F against the
                   directions of W^mm z_i (Frobenius) and W^mm_⋆ z_i (nuclear).
local-convergence  n=6, T=8, d=10 cross-attention, --trials seeds (default 100), normalised GD
                   2000 steps, step 0.1, for W and for (K, Q) (m = d); α = final argmax of softmax;
                   curves of mean max-softmax and corr with the Frobenius and nuclear Att-SVM(α).
svm-rank           n ∈ {5,10,15} (T=5) and T ∈ {5,10,15} (n=5), d ∈ {1,2,3,4,5,10,15,20}: ranks of
                   certified Att-SVM(opt) solutions (Frobenius and nuclear) over --trials feasible
                   instances per cell (at most SVM_RANK_MAX_DRAWS × trials draws); infeasible count.
global-vs-d        share of GD runs (normalised, step 0.1, 2000 steps) whose final softmax selects
                   the optimal tokens (the global Att-SVM solution) as d grows, Wilson intervals.
multi-token        Gen-SVM: n=3, T=4, d ∈ {4,6,8,10}, ReLU head h(u) = 1ᵀReLU(Vᵀu) with fixed random V,
                   normalised GD 2001 iterates; 1 − corr(W(k), ·) for W^svmeq, W^dir and the
                   one-token Att-SVM, on unambiguous runs (ambiguous ones counted, not dropped silently).
=================  ===============================================================================

Every trial's random numbers come from (seed, name, cell, trial) via SeedSequence
(:func:`checks.sweep.trial_rng`); work is split into fixed-size chunks and run by
:func:`checks.sweep.run_sweep` (process pool, or Dask with --dask), so results do not depend on the
backend or the worker count.

Solver trouble is an outcome, never a crash: an instance whose SVM no rung of numerics.svm's solver ladder
can certify (:class:`numerics.errors.SolverError`) is recorded as an *error* with the solver's status,
counted in the CSV (``solver_errors``, ``solver_status``), the Markdown table and the figure, and the run
finishes. Every finished task is kept on disk as it completes (``OUT/.NAME.parts/``, one pickle per task,
written atomically), so an interrupted run loses nothing: the same command resumes, re-running only the
tasks that had not finished, and the directory is removed once NAME.csv/png/md are written. (With --dask
the workers may not share the disk, so tasks are not kept.)
"""

from __future__ import annotations

import csv
import hashlib
import io
import pickle
import shutil
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

from numerics.errors import InvalidInputError, SolverError
from numerics.fileio import write_bytes, write_text

from .sweep import run_sweep, trial_rng, wilson_interval

#: The authors' GD protocol (THEORY.md §5-6): normalised GD, step 0.1, 2000 steps.
GD_LR, GD_STEPS = 0.1, 2000
#: Iterations between recorded iterates for the curves.
RECORD_EVERY = 50
#: Runs per task (one batched run_gd call each). Fixed, so results do not depend on the split.
CHUNK = 20
#: svm-rank: stop drawing in a cell after this many draws per requested feasible instance (at d = 1
#: feasibility is essentially impossible; the infeasible count says how many draws were needed).
SVM_RANK_MAX_DRAWS = 20

DEFAULT_TRIALS = {"gd-paths": 4, "local-convergence": 100, "svm-rank": 10, "global-vs-d": 50, "multi-token": 40}


# -- helpers ------------------------------------------------------------------------------------
def _csv(rows: list[dict], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([(f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in columns])
    return buf.getvalue()


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    return buf.getvalue()


def solve_nuc(data, alpha):
    """Certified nuclear Att-SVM(α) by numerics.svm's solver ladder; returns (solution, retried) where
    retried says the certified answer is not the first rung's polished one (a later rung, or the first
    rung's unpolished answer; see ``solution.attempts``).
    Raises :class:`SolverError` (with the solver's status) when no rung certifies."""
    from numerics.svm import solve_att_svm

    sol = solve_att_svm(data, alpha, norm="nuc")
    return sol, sol.attempts[-1] != "clarabel+reduced+polish: certified"


def error_status(exc: SolverError) -> str:
    """The solver's status of a failed instance, as recorded in the outputs."""
    return str(exc.status or "error")


def status_summary(statuses) -> str:
    """'uncertified×2; max_iterations×1' (most frequent first), '' when there were none."""
    return "; ".join(f"{k}×{v}" for k, v in Counter(statuses).most_common())


# -- sweeps whose finished tasks are kept --------------------------------------------------------------
def _task_path(parts: Path, fn, task) -> Path:
    key = hashlib.sha1(repr((fn.__module__, fn.__qualname__, tuple(task))).encode()).hexdigest()[:20]
    return parts / f"{key}.pkl"


def _kept_call(fn, path: str, task: tuple):
    """fn(*task), loaded from ``path`` if a finished copy is there, else computed and written atomically."""
    p = Path(path)
    if p.exists():
        try:
            return pickle.loads(p.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            pass  # a damaged part is recomputed
    res = fn(*task)
    write_bytes(p, pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
    return res


def kept_sweep(fn, tasks, parts: Path | None, **kw) -> list:
    """:func:`checks.sweep.run_sweep` (``star=True``) keeping every finished task in ``parts`` (None: plain
    run_sweep). Returns the results in task order; ``kept_sweep.resumed`` holds how many were reloaded."""
    tasks = [tuple(t) for t in tasks]
    kept_sweep.resumed = 0
    if parts is None or kw.get("dask") is not None:
        return run_sweep(fn, tasks, star=True, **kw)
    parts = Path(parts)
    parts.mkdir(parents=True, exist_ok=True)
    paths = [_task_path(parts, fn, t) for t in tasks]
    kept_sweep.resumed = sum(p.exists() for p in paths)
    return run_sweep(_kept_call, [(fn, str(p), t) for p, t in zip(paths, tasks, strict=True)], star=True, **kw)


kept_sweep.resumed = 0


#: Scale of the random initialisation (entries INIT_SCALE * N(0, 1), drawn by numerics.gd.run_gd from each
#: run's own seed), as run_gd's default.
INIT_SCALE = 0.01


def _corr(A, B) -> float:
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    return float(np.sum(A * B) / (na * nb)) if na > 0 and nb > 0 else float("nan")


# ================================================================================================
# gd-paths
# ================================================================================================
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
    from numerics.gd import run_gd
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens

    data = _paths_data()
    opt = optimal_tokens(data).index
    fro = solve_att_svm(data, opt)
    nuc, _ = solve_nuc(data, opt)
    inits = [int(trial_rng(seed, "gd-paths", (2, 3, 2), k).integers(0, 2**31 - 1)) for k in range(trials)]
    rows, traj = [], {}
    for param in ("W", "KQ"):
        res = run_gd([data] * trials, param=param, steps=GD_STEPS, lr=GD_LR, seed=inits, init_scale=INIT_SCALE,
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
                                 "corr_fro": _corr(W, fro.W), "corr_nuc": _corr(W, nuc.W)})
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
        cf = np.mean([_corr(W, fro.W) for W in Wt[-1]])
        cn = np.mean([_corr(W, nuc.W) for W in Wt[-1]])
        ax.set_title(f"{title}: final corr fro {cf:.3f}, nuc {cn:.3f}")
        ax.set_xlabel("coordinate 1")
        ax.set_ylabel("coordinate 2")
        ax.axhline(0, color="0.8", lw=0.6)
        ax.axvline(0, color="0.8", lw=0.6)
        ax.set_aspect("equal", adjustable="datalim")
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle("GD paths vs Att-SVM directions (n=2, T=3, d=2; stars: optimal tokens)")
    final = {p: [r for r in res["rows"] if r["param"] == p and r["iteration"] == GD_STEPS and r["example"] == 0]
             for p in ("W", "KQ")}
    md = [
        "# gd-paths", "",
        f"n=2, T=3, d=2 hand-placed tokens; normalised GD, step {GD_LR}, {GD_STEPS} steps; {trials} "
        f"initialisations (seed {seed}). corr(W^mm, W^mm_⋆) = {_corr(fro.W, nuc.W):.4f}; "
        f"ranks: Frobenius {fro.rank}, nuclear {nuc.rank}.", "",
        "| parametrisation | final corr with Frobenius (mean) | final corr with nuclear (mean) |",
        "|---|---|---|",
    ]
    for p in ("W", "KQ"):
        md.append(f"| {p} | {np.mean([r['corr_fro'] for r in final[p]]):.4f} | "
                  f"{np.mean([r['corr_nuc'] for r in final[p]]):.4f} |")
    md += ["", "![gd-paths](gd-paths.png)", ""]
    return _csv(res["rows"], cols), _png(fig), "\n".join(md)


# ================================================================================================
# local-convergence
# ================================================================================================
LC_SHAPE = (6, 8, 10)
#: The two GD protocols of local-convergence (same data per trial, paired):
#: "authors": umich-sota/TF-as-SVM local_converge.ipynb — nn.Linear's default initialisation (entries
#: uniform on ±1/√d) for W and for K, Q, and, for (K, Q) only, eps·(‖K‖_F² + ‖Q‖_F²) added to the loss with
#: eps = float64 machine epsilon (their W loss has no such term); "plain": INIT_SCALE·N(0, 1), no decay.
LC_PROTOCOLS = ("authors", "plain")
#: The authors' weight decay for (K, Q): torch.finfo(torch.double).eps.
AUTHORS_WD = float(np.finfo(np.float64).eps)


def _uniform_init(rng: np.random.Generator, shape: tuple[int, ...], d: int) -> np.ndarray:
    """nn.Linear(d, ·)'s default weight initialisation: uniform on ±1/√d (fan_in = d)."""
    b = 1.0 / np.sqrt(d)
    return rng.uniform(-b, b, size=shape)


def _lc_run(datas, inits, seed, trials, protocol, param, d):
    from numerics.gd import run_gd

    kw = dict(param=param, steps=GD_STEPS, lr=GD_LR, record_every=RECORD_EVERY)
    if protocol == "plain":
        return run_gd(datas, seed=inits, init_scale=INIT_SCALE, **kw)
    rngs = [trial_rng(seed, f"local-convergence-authors-init-{param}", LC_SHAPE, k) for k in trials]
    if param == "W":
        return run_gd(datas, init=np.stack([_uniform_init(g, (d, d), d) for g in rngs]), **kw)
    K0 = np.stack([_uniform_init(g, (d, d), d) for g in rngs])
    Q0 = np.stack([_uniform_init(g, (d, d), d) for g in rngs])
    return run_gd(datas, init=(K0, Q0), weight_decay=AUTHORS_WD, **kw)


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
                    cf[j, s] = _corr(Wt[s, j], fro.W)
                    cn[j, s] = _corr(Wt[s, j], nuc.W)
            out[(protocol, param)] = {"iterations": its, "max_softmax": ms, "corr_fro": cf, "corr_nuc": cn,
                                      "infeasible": infeasible, "solver_errors": errors, "final_norm": res.norms}
    return out


def run_local_convergence(seed, trials, workers=None, dask=None, progress=True, keep=None) -> dict:
    tasks = [(seed, list(range(s, min(s + CHUNK, trials)))) for s in range(0, trials, CHUNK)]
    parts = kept_sweep(lc_chunk, tasks, keep, workers=workers, dask=dask, progress=progress, desc="local-convergence")
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
    for ax, title in zip(axes, ("mean max-softmax", "corr with Frobenius W^mm_α", "corr with nuclear W^mm_⋆,α"),
                         strict=True):
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    nerr = len(res["error_statuses"])
    fig.suptitle(f"Local convergence: n=6, T=8, d=10, {trials} seeds, normalised GD step {GD_LR} (mean ± std"
                 f"{f'; {nerr} solver errors excluded' if nerr else ''}); "
                 "solid: authors' protocol (U(±1/√d) init, eps·(‖K‖²+‖Q‖²) for (K, Q)), dashed: plain "
                 f"({INIT_SCALE}·N(0,1) init, no decay)", fontsize=9)
    fin = {(pr, p): [r for r in rows if r["param"] == p and r["protocol"] == pr][-1]
           for pr in LC_PROTOCOLS for p in ("W", "KQ")}
    md = [
        "# local-convergence", "",
        f"n=6, T=8, d=10 cross-attention, {trials} seeds (seed {seed}); normalised GD, step {GD_LR}, "
        f"{GD_STEPS} steps, W and (K, Q) with m = d; α = argmax of the final softmax; certified Att-SVM(α). "
        "Two protocols on the same data:",
        "",
        "- **authors** (the faithful reproduction of umich-sota/TF-as-SVM `local_converge.ipynb`): nn.Linear's "
        "default initialisation, entries uniform on ±1/√d, for W and for K, Q; for (K, Q) the loss gets "
        f"eps·(‖K‖_F² + ‖Q‖_F²) with eps = {AUTHORS_WD:.3g} (float64 machine epsilon; their W loss has no such "
        "term);",
        f"- **plain**: entries {INIT_SCALE}·N(0, 1), no weight decay.",
        "",
        f"Nuclear solves certified by a later rung of the solver ladder: {res['retries']}. Runs whose Att-SVM(α) "
        f"no solver could certify (errors, excluded from the curves): "
        f"{len(res['error_statuses'])}{' (' + status_summary(res['error_statuses']) + ')' if res['error_statuses'] else ''}.",
        "",
        "| protocol | param | iteration | mean max-softmax | corr Frobenius | corr nuclear | median ‖W‖_F | runs "
        "| infeasible Att-SVM(α) | solver errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (pr, p), f in fin.items():
        md.append(f"| {pr} | {p} | {f['iteration']} | {f['mean_max_softmax']:.4f} | {f['corr_fro_mean']:.4f} ± "
                  f"{f['corr_fro_std']:.4f} | {f['corr_nuc_mean']:.4f} ± {f['corr_nuc_std']:.4f} | "
                  f"{float(np.median(res[(pr, p)]['final_norm'])):.4g} | {f['runs']} | {f['infeasible']} | "
                  f"{f['solver_errors']} |")
    a_kq, p_kq = fin[("authors", "KQ")]["corr_nuc_mean"], fin[("plain", "KQ")]["corr_nuc_mean"]
    md += ["", "Paper (TLTO §6): W ↔ Frobenius and (K, Q) ↔ nuclear reach corr ≈ 0.997, cross pairs ≈ 0.85.", "",
           f"(K, Q) ↔ nuclear: {a_kq:.4f} with the authors' protocol, {p_kq:.4f} with the plain one. "
           "The paper's (K, Q) result depends on the tiny weight decay eps·(‖K‖² + ‖Q‖²), which stops the "
           "quadratic growth of ‖K Q^T‖ and so keeps the softmax out of exact float64 underflow, where the "
           "gradient is exactly 0 and plain normalised GD freezes (the dashed (K, Q) curves go flat within "
           "≈ 750 steps, short of the nuclear direction). With the decay, once the data gradient falls to the "
           "size of the decay term the normalised step stops growing K and Q, the norm settles and GD keeps "
           "moving towards the nuclear-norm SVM direction.", "",
           "![local-convergence](local-convergence.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)


# ================================================================================================
# svm-rank
# ================================================================================================
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
    return {"n": n, "T": T, "d": d, "feasible": len(fro_r), "infeasible": infeasible, "draws": draws,
            "fro_rank_mean": float(f.mean()) if f.size else nan, "nuc_rank_mean": float(u.mean()) if u.size else nan,
            "fro_rank_std": float(f.std()) if f.size else nan, "nuc_rank_std": float(u.std()) if u.size else nan,
            "fro_rank_is_min_dn": float(np.mean(f == min(d, n))) if f.size else nan, "nuc_retries": retries,
            "solver_errors": len(errors), "solver_status": status_summary(errors)}


def run_svm_rank(seed, trials, workers=None, dask=None, progress=True, keep=None) -> list[dict]:
    tasks = [(seed, n, T, d, trials) for (n, T) in RANK_NT for d in RANK_D]
    return kept_sweep(rank_cell, tasks, keep, workers=workers, dask=dask, progress=progress, desc="svm-rank")


def report_svm_rank(rows, trials, seed):
    cols = ["n", "T", "d", "feasible", "infeasible", "fro_rank_mean", "nuc_rank_mean", "fro_rank_std", "nuc_rank_std",
            "fro_rank_is_min_dn", "draws", "nuc_retries", "solver_errors", "solver_status"]
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax, sel, lab in ((axes[0], [(5, 5), (10, 5), (15, 5)], "n"), (axes[1], [(5, 5), (5, 10), (5, 15)], "T")):
        for k, (n, T) in enumerate(sel):
            rs = [r for r in rows if (r["n"], r["T"]) == (n, T)]
            d = np.array([r["d"] for r in rs])
            c = f"C{k}"
            val = n if lab == "n" else T
            ax.errorbar(d, [r["fro_rank_mean"] for r in rs], yerr=[r["fro_rank_std"] for r in rs], color=c, ls="--",
                        marker="s", ms=4, capsize=2, label=f"Frobenius, {lab}={val}")
            ax.errorbar(d, [r["nuc_rank_mean"] for r in rs], yerr=[r["nuc_rank_std"] for r in rs], color=c, ls="-",
                        marker="o", ms=4, capsize=2, label=f"nuclear, {lab}={val}")
            bad = [r for r in rs if r["solver_errors"]]
            if bad:  # cells with solver errors: marked, with their count
                ax.scatter([r["d"] for r in bad], [0.0] * len(bad), marker="x", color=c, s=40, zorder=3,
                           label=f"solver errors, {lab}={val}")
                for r in bad:
                    ax.annotate(str(r["solver_errors"]), (r["d"], 0.0), textcoords="offset points", xytext=(3, 3),
                                fontsize=7, color=c)
        ax.set_xlabel("d")
        ax.set_ylabel("rank of certified Att-SVM solution")
        ax.set_title(f"varying {lab} ({'T=5' if lab == 'n' else 'n=5'})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    nerr = sum(r["solver_errors"] for r in rows)
    fig.suptitle(f"Rank of SVM solutions (σ_j > 1e-6 σ_1; up to {trials} feasible instances per cell; "
                 f"solver errors: {nerr})")
    md = ["# svm-rank", "",
          f"Random unit-sphere data (cross-attention), Att-SVM(opt), certified Frobenius (KKT) and nuclear (SDP "
          f"duality) solutions; rank = #σ_j > 1e-6 σ_1. Up to {trials} feasible instances per cell (at most "
          f"{SVM_RANK_MAX_DRAWS}×{trials} draws; seed {seed}); every infeasible draw counted (Farkas-certified); "
          f"draws no solver could certify are errors, counted with the solver's status ({nerr} in all).", "",
          "| n | T | d | feasible | infeasible | Frobenius rank | min(d, n) | share = min(d,n) | nuclear rank "
          "| solver errors |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = f"{r['solver_errors']} ({r['solver_status']})" if r["solver_errors"] else "0"
        md.append(f"| {r['n']} | {r['T']} | {r['d']} | {r['feasible']} | {r['infeasible']} | {r['fro_rank_mean']:.2f} | "
                  f"{min(r['d'], r['n'])} | {r['fro_rank_is_min_dn']:.2f} | {r['nuc_rank_mean']:.2f} ± {r['nuc_rank_std']:.2f} "
                  f"| {err} |")
    md += ["", "![svm-rank](svm-rank.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)


# ================================================================================================
# global-vs-d
# ================================================================================================
GLOBAL_NT = ((5, 5), (6, 8))
GLOBAL_D = (2, 3, 4, 6, 8, 10, 15, 20)


def global_chunk(seed: int, n: int, T: int, d: int, trials: list[int]) -> list[dict]:
    from numerics.data import random_unit_sphere
    from numerics.gd import run_gd
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens, softmax_probs

    datas, inits = [], []
    for k in trials:
        rng = trial_rng(seed, "global-vs-d", (n, T, d), k)
        datas.append(random_unit_sphere(n, T, d, rng=rng))
        inits.append(int(rng.integers(0, 2**31 - 1)))
    W = run_gd(datas, param="W", steps=GD_STEPS, lr=GD_LR, seed=inits, init_scale=INIT_SCALE).W
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
                    "corr": _corr(W[j], sol.W) if sol.feasible else float("nan")})
    return out


def run_global_vs_d(seed, trials, workers=None, dask=None, progress=True, keep=None) -> list[dict]:
    cells = [(n, T, d) for (n, T) in GLOBAL_NT for d in GLOBAL_D]
    tasks = [(seed, *c, list(range(s, min(s + CHUNK * 2, trials)))) for c in cells for s in range(0, trials, CHUNK * 2)]
    parts = kept_sweep(global_chunk, tasks, keep, workers=workers, dask=dask, progress=progress, desc="global-vs-d")
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
    cols = ["n", "T", "d", "trials", "reached", "share", "ci_low", "ci_high", "infeasible", "corr_reached_mean",
            "solver_errors", "solver_status"]
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
    md = ["# global-vs-d", "",
          f"Random unit-sphere data; normalised GD on W, step {GD_LR}, {GD_STEPS} steps, {trials} runs per cell "
          f"(seed {seed}). A run reaches the global solution when its final softmax selects the optimal token of "
          "every example and Att-SVM(opt) is feasible (infeasible trials counted as not reached). Runs whose "
          f"Att-SVM(opt) no solver could certify are errors, outside the share ({nerr} in all).", "",
          "| n | T | d | runs | reached | share [95% CI] | infeasible | mean corr(W, W^mm) when reached | solver errors |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        err = f"{r['solver_errors']} ({r['solver_status']})" if r["solver_errors"] else "0"
        md.append(f"| {r['n']} | {r['T']} | {r['d']} | {r['trials']} | {r['reached']} | {r['share']:.2f} "
                  f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}] | {r['infeasible']} | {r['corr_reached_mean']:.4f} | {err} |")
    md += ["", "![global-vs-d](global-vs-d.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)


# ================================================================================================
# multi-token (Gen-SVM)
# ================================================================================================
MT_N, MT_T = 3, 4
MT_D = (4, 6, 8, 10)
MT_STEPS = 2000  # iterates 0..2000: 2001 of them
CANDIDATES = ("svmeq", "dir", "one_token")


def mt_chunk(seed: int, d: int, trials: list[int]) -> dict:
    """1 − corr curves of the three candidates per unambiguous run; counts of excluded runs."""
    import torch

    from numerics.attention import ReLUHead
    from numerics.data import random_unit_sphere
    from numerics.gd import run_gd
    from numerics.svm import fit_svmeq, gen_svm, solve_att_svm
    from numerics.tokens import softmax_probs

    datas, inits, Vs = [], [], []
    for k in trials:
        rng = trial_rng(seed, "multi-token", (MT_N, MT_T, d), k)
        datas.append(random_unit_sphere(MT_N, MT_T, d, rng=rng))
        Vs.append(rng.standard_normal((d, d)) / np.sqrt(d))
        inits.append(int(rng.integers(0, 2**31 - 1)))
    head = ReLUHead(torch.as_tensor(np.stack(Vs)))
    res = run_gd(datas, steps=MT_STEPS, lr=GD_LR, seed=inits, head=head, record_every=RECORD_EVERY * 2)
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
            cur["svmeq"].append(1 - _corr(W, Weq))
            cur["dir"].append(1 - _corr(W, g.W_dir))  # NaN when W^dir = 0 (no masked token anywhere)
            cur["one_token"].append(1 - _corr(W, one.W) if one.feasible else float("nan"))
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
    parts = kept_sweep(mt_chunk, tasks, keep, workers=workers, dask=dask, progress=progress, desc="multi-token")
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
    cols = ["d", "iteration", "candidate", "one_minus_corr_mean", "one_minus_corr_median", "runs", "ambiguous",
            "dir_infeasible", "one_token_infeasible", "solver_errors"]
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
                rows.append({"d": d, "iteration": int(it), "candidate": c, "one_minus_corr_mean": float(mean[s]),
                             "one_minus_corr_median": float(med[s]), "runs": int(A.shape[0]),
                             "ambiguous": r["ambiguous"], "dir_infeasible": r["dir_infeasible"],
                             "solver_errors": r["solver_errors"],
                             "one_token_infeasible": r["one_infeasible"]})
            ax.semilogy(r["iterations"][1:], np.maximum(med[1:], 1e-16), label=labels[c])
        ax.set_title(f"d={d} ({r['curves']['svmeq'].shape[0]} unambiguous of {r['runs']}"
                     + (f"; {r['solver_errors']} solver errors" if r["solver_errors"] else "") + ")")
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("median 1 − corr(W(k), candidate)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Multi-token selection with a ReLU head (n=3, T=4): which SVM predicts GD")
    md = ["# multi-token", "",
          f"n=3, T=4, ReLU head h(u) = 1ᵀReLU(Vᵀu), V (d×d) random fixed per run; normalised GD step {GD_LR}, "
          f"{MT_STEPS + 1} iterates; {trials} runs per d (seed {seed}). Token sets from the final softmax "
          "(selected s > 1e-3, masked s ≤ 1e-6); runs with probabilities in between are ambiguous and excluded "
          "(counted). W^svmeq = W^fin + R W^dir with R fitted per iterate.", "",
          "| d | runs | ambiguous | W^dir infeasible | unambiguous | with a multi-token example | "
          "1−corr W^svmeq | 1−corr W^dir | 1−corr one-token (infeasible) | solver errors |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for d in MT_D:
        r = res[d]
        fin = {c: [x for x in rows if x["d"] == d and x["candidate"] == c][-1]["one_minus_corr_median"]
               for c in CANDIDATES}
        md.append(f"| {d} | {r['runs']} | {r['ambiguous']} | {r['dir_infeasible']} | {r['curves']['svmeq'].shape[0]} | "
                  f"{r['multi_selected']} | {fin['svmeq']:.2e} | {fin['dir']:.2e} | {fin['one_token']:.2e} "
                  f"({r['one_infeasible']}) | {r['solver_errors']}"
                  + (f" ({status_summary(r['error_statuses'])})" if r["solver_errors"] else "") + " |")
    md += ["", "(medians at the last iterate)", "", "![multi-token](multi-token.png)", ""]
    return _csv(rows, cols), _png(fig), "\n".join(md)


# ================================================================================================
EXPERIMENTS = {
    "gd-paths": (run_gd_paths, report_gd_paths),
    "local-convergence": (run_local_convergence, report_local_convergence),
    "svm-rank": (run_svm_rank, report_svm_rank),
    "global-vs-d": (run_global_vs_d, report_global_vs_d),
    "multi-token": (run_multi_token, report_multi_token),
}


def reproduce(name: str, *, trials: int | None = None, seed: int = 0, out: str | Path = "reports/reproduce",
              workers=None, dask=None, progress: bool = True) -> dict[str, Path]:
    """Run experiment ``name`` and write NAME.csv, NAME.png, NAME.md into ``out``; returns their paths."""
    if name not in EXPERIMENTS:
        raise InvalidInputError(f"unknown experiment {name!r}; choose one of: {', '.join(EXPERIMENTS)}")
    trials = DEFAULT_TRIALS[name] if trials is None else trials
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidInputError(f"--trials must be an integer >= 1, got {trials!r}")
    run, rep = EXPERIMENTS[name]
    out = Path(out)
    keep = out / f".{name}.parts"  # finished tasks, kept until the outputs are written (see the module doc)
    t0 = time.perf_counter()
    res = run(seed, trials, workers=workers, dask=dask, progress=progress, keep=keep)
    resumed = kept_sweep.resumed
    csv_text, png, md = rep(res, trials, seed)
    md += f"\n_{time.perf_counter() - t0:.1f} s; `attnsvm reproduce {name} --trials {trials} --seed {seed}`_\n"
    if resumed:
        md += f"\n_{resumed} finished task(s) reloaded from an interrupted run ({keep})._\n"
    paths = {ext: out / f"{name}.{ext}" for ext in ("csv", "png", "md")}
    write_text(paths["csv"], csv_text)
    write_bytes(paths["png"], png)
    write_text(paths["md"], md)
    shutil.rmtree(keep, ignore_errors=True)
    return paths


def cmd_reproduce(args) -> int:
    t0 = time.perf_counter()
    paths = reproduce(args.name, trials=args.trials, seed=args.seed, out=args.out, workers=args.workers,
                      dask=args.dask, progress=not args.no_progress)
    print(f"reproduce {args.name}: {time.perf_counter() - t0:.1f} s; wrote "
          + ", ".join(str(p) for p in paths.values()))
    return 0

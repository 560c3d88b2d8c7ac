"""Shared helpers of the TLZO prompt-model checks (p-rp-path, p-nonlinear-head)."""

from __future__ import annotations

import numpy as np

from checks import decide, undecided
from numerics import tolerances as tol
from numerics.errors import SolverError

from ._paths import judge_path


def least_margin(keys: np.ndarray, alpha: np.ndarray, p: np.ndarray) -> float:
    """min_{i, t ≠ α_i} p^T (k_{iα_i} − k_it) for keys (n, T, dk)."""
    n, T = keys.shape[:2]
    diffs = keys[np.arange(n), alpha][:, None, :] - keys
    mask = np.ones((n, T), dtype=bool)
    mask[np.arange(n), alpha] = False
    return float((diffs @ p)[mask].min())


def require_tight(keys: np.ndarray, alpha: np.ndarray, sol) -> float:
    """The certified p-SVM solution's least margin is 1 (to the KKT tolerance): a hard-margin SVM's optimum is
    tight. A feasible, non-optimal answer (e.g. 1.05·p^mm, which has the same direction, so no directional
    check can see it) raises SolverError: the instance is an error carrying status 'not-tight'."""
    m = least_margin(keys, alpha, sol.w)
    if abs(m - 1.0) > tol.KKT_TOL:
        raise SolverError(f"p-SVM answer is not tight: least margin {m:.9g} ≠ 1", status="not-tight",
                          solver=sol.solver)
    return m


def path_unreliable(state: dict, judged_from: int, cand_rtol: float, stat_bound: float) -> tuple[str, dict]:
    """Why a prompt path's numerics failed on the judged radii ('' when they did not), with metrics: the
    excess E = L − L_∞ must fall radius by radius, no candidate (the target's ball point) may beat the path
    point by more than ``cand_rtol`` relative, and the final stationarity must be at most ``stat_bound``."""
    E, cand, stat = state["excess"], state["cand"], float(state["stat"][-1])
    dec = bool(np.all(np.diff(E[judged_from:]) < 0))
    beaten = bool(np.any((cand < E - cand_rtol * np.abs(E))[judged_from:]))
    metrics = dict(final_stationarity=stat, excess_final=float(E[-1]), excess_list=[float(x) for x in E])
    why = ("E = L − L_∞ does not decrease over the judged radii" if not dec else
           "the target's ball point has a lower loss than the path point" if beaten else
           f"the path point is not a constrained minimiser (stationarity {stat:.3g} > {stat_bound:.3g})"
           if stat > stat_bound else "")
    return why, metrics


def path_reliable(why: str, metrics: dict):
    """The path_reliable prediction: undecided (never refuted) when the path numerics failed."""
    if why:
        return undecided(f"path numerics failed: {why}", **metrics)
    return decide(not why, "", **metrics)


def judge_prompt_path(err: np.ndarray, thr: float, sep: float, state: dict, why: str, what: str,
                      judged_from: int):
    """The direction prediction of a prompt path: no progress over the starting points refutes; a path the
    numerics did not find (``why``) decides nothing; otherwise :func:`judge_path` on 1 − corr ``err``."""
    curve = dict(err_final=float(err[-1]), err_curve=[float(x) for x in err])
    E, E0 = state["excess"][judged_from:], state["start_excess"][judged_from:]
    if np.all(E >= E0):  # the optimiser never improved on its starting points: no progress refutes
        return decide(False, "no progress: at every judged radius the path point is no better than the best "
                      "starting point", **curve)
    if why:  # a path the numerics did not find cannot refute (nor confirm) the claim
        return undecided(f"path numerics failed: {why}", **curve)
    return judge_path(err, thr, what, err_threshold=thr, sep=sep, **curve)

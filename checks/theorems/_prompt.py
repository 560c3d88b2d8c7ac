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

"""Shared helpers of the TLZO prompt-model checks (p-rp-path, p-nonlinear-head)."""

from __future__ import annotations

import numpy as np

from numerics import tolerances as tol
from numerics.errors import SolverError


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

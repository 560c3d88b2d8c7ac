"""The naive per-instance Att-SVM baseline of ``attnsvm bench``: the research-code habit (one cvxpy constraint
per token pair in a Python loop, default solver settings, no certificate), for timing comparisons only; the
suite's certified solver is :func:`numerics.svm.solve_att_svm`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from numerics.data import AttentionData
from numerics.tokens import resolve_alpha


@dataclass(frozen=True)
class NaiveSolution:
    """The research-code baseline: per-pair cvxpy loop, default solve (see :func:`naive_att_svm`)."""

    status: str
    W: np.ndarray | None
    objective: float
    rank_abs: int  # the authors' rank: #σ > 1e-7 (absolute)
    seconds: float


def naive_att_svm(data: AttentionData, alpha: Any = None, norm: str = "fro") -> NaiveSolution:
    """The authors'-style solve: one cvxpy constraint per token pair in a Python loop, default solver
    settings, no certificate, rank by the absolute threshold 1e-7. Baseline for timing only."""
    import cvxpy as cp

    t0 = time.perf_counter()
    a = resolve_alpha(data, alpha)
    d = data.d
    W = cp.Variable((d, d))
    cons = []
    for i in range(data.n):
        for t in range(data.T):
            if t != a[i]:
                cons.append((data.X[i, a[i]] - data.X[i, t]) @ W @ data.Z[i] >= 1)
    obj = cp.norm(W, "fro") if norm == "fro" else cp.normNuc(W)
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve()
    if prob.status not in ("optimal", "optimal_inaccurate"):
        return NaiveSolution(prob.status, None, float("inf"), 0, time.perf_counter() - t0)
    Wv = np.asarray(W.value, dtype=float)
    rank_abs = int(np.sum(np.linalg.svd(Wv, compute_uv=False) > 1e-7))
    return NaiveSolution(prob.status, Wv, float(prob.value), rank_abs, time.perf_counter() - t0)


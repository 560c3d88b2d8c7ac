"""The rank-constrained Att-SVM⋆ in factored form, by a multi-start local method (an upper bound).

    min_{K, Q ∈ R^{d×m}} ½(‖K‖_F² + ‖Q‖_F²)   s.t.   (x_{iα_i} − x_it)^T K Q^T z_i ≥ 1   (t ≠ α_i)

equals min{‖W‖_⋆ : rank W ≤ m, W feasible for Att-SVM(α)} (nuclear-factorisation: for rank W ≤ m,
min_{KQ^T = W, m columns} ½(‖K‖² + ‖Q‖²) = ‖W‖_⋆). It is non-convex for m < rank of the convex solution; the
certified SDP of :mod:`numerics.svm.nuclear` (no rank constraint) is a lower bound, and any feasible factored
point an upper bound. This module finds the best factored point it can: SLSQP (scipy) from the rank-m
truncation of a given matrix (the SDP solution) rescaled to feasibility, and from ``starts`` random Gaussian
pairs; the lowest objective among the feasible KKT points wins. It decides nothing: callers compare the value
with the SDP bound (equal within tolerance: the relaxation is tight and both are the optimum; above it: the
relaxation is not tight, or the local method missed the optimum — the interval [SDP, best] is all that is
known).

A KKT point of the factored problem is *balanced*: stationarity gives K = M Q and Q = M^T K with
M = Σ λ_it (x_{iα} − x_it) z_i^T, so K^T K = K^T M Q = (Q^T M^T K)^T = (Q^T Q)^T = Q^T Q, and then
½(‖K‖² + ‖Q‖²) = ‖K Q^T‖_⋆ (the attained equality of nuclear-factorisation). ``balance`` reports
‖K^T K − Q^T Q‖_F / ‖K‖_F², the residual of that necessary condition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data import AttentionData

__all__ = ["RankConstrainedSolution", "solve_rank_constrained"]

#: SLSQP's stopping tolerance on the objective (relative changes; the objective is O(1–100)).
SLSQP_FTOL = 1e-12
SLSQP_MAXITER = 500


@dataclass
class RankConstrainedSolution:
    K: np.ndarray
    Q: np.ndarray
    value: float  # ½(‖K‖² + ‖Q‖²) of the best feasible point (inf when none)
    min_margin: float  # of K Q^T for α
    balance: float  # ‖K^T K − Q^T Q‖_F / ‖K‖_F²
    values: list[float] = field(default_factory=list)  # every feasible start's value, in start order
    starts: int = 0

    @property
    def W(self) -> np.ndarray:
        return self.K @ self.Q.T


def _rows(data: AttentionData, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(D, Z): the constraint j is D[j]^T K Q^T Z[j] ≥ 1."""
    D, Z = [], []
    for i in range(data.n):
        for t in range(data.T):
            if t != alpha[i]:
                D.append(data.X[i, alpha[i]] - data.X[i, t])
                Z.append(data.Z[i])
    return np.array(D), np.array(Z)


def _local(D: np.ndarray, Z: np.ndarray, d: int, m: int, x0: np.ndarray):
    from scipy.optimize import minimize

    def split(x):
        return x[: d * m].reshape(d, m), x[d * m:].reshape(d, m)

    def cons(x):
        K, Q = split(x)
        return np.einsum("jm,jm->j", D @ K, Z @ Q) - 1.0

    def cons_jac(x):
        K, Q = split(x)
        a, b = D @ K, Z @ Q  # (J, m)
        return np.hstack([(D[:, :, None] * b[:, None, :]).reshape(len(D), -1),
                          (Z[:, :, None] * a[:, None, :]).reshape(len(D), -1)])

    res = minimize(lambda x: 0.5 * float(x @ x), x0, jac=lambda x: x, method="SLSQP",
                   constraints=[{"type": "ineq", "fun": cons, "jac": cons_jac}],
                   options={"ftol": SLSQP_FTOL, "maxiter": SLSQP_MAXITER})
    return split(res.x)


def solve_rank_constrained(
    data: AttentionData, alpha, m: int, *, starts: int = 8, rng=None, init: np.ndarray | None = None
) -> RankConstrainedSolution:
    """The best feasible factored point found (see the module docstring); ``init`` (d × d, e.g. the SDP
    solution) gives the first start by its rank-m truncation, rescaled to margin 1 when it has one > 0."""
    rng = np.random.default_rng(rng)
    alpha = np.asarray(alpha)
    D, Z = _rows(data, alpha)
    # solve in units where the rows have norm ≤ 1 (data scaled by 1e±4 would put the value at 1e∓8): the
    # constraint D^T W Z ≥ 1 becomes D'^T W' Z' ≥ 1 with W' = sd·sz·W, and K = K'/√(sd·sz), Q likewise
    sd, sz = float(np.linalg.norm(D, axis=1).max()), float(np.linalg.norm(Z, axis=1).max())
    D, Z, unit = D / sd, Z / sz, 1.0 / np.sqrt(sd * sz)
    d = data.d
    x0s = []
    if init is not None:
        U, s, Vt = np.linalg.svd(np.asarray(init) / unit**2)
        K0, Q0 = U[:, :m] * np.sqrt(s[:m]), Vt[:m].T * np.sqrt(s[:m])
        mm = float(np.min(np.einsum("jm,jm->j", D @ K0, Z @ Q0)))
        if mm > 0:
            K0, Q0 = K0 / np.sqrt(mm), Q0 / np.sqrt(mm)
        x0s.append(np.concatenate([K0.ravel(), Q0.ravel()]))
    for _ in range(starts):
        x0s.append(rng.standard_normal(2 * d * m))
    best = RankConstrainedSolution(np.zeros((d, m)), np.zeros((d, m)), np.inf, -np.inf, np.inf,
                                   starts=len(x0s))
    for x0 in x0s:
        K, Q = _local(D, Z, d, m, x0)
        margin = float(np.min(np.einsum("jm,jm->j", D @ K, Z @ Q)))
        if margin < 1 - 1e-7:  # tolerances.FEAS_TOL: an infeasible end is no upper bound
            continue
        # rescale onto the margin exactly (feasible to FEAS_TOL → exactly feasible, value changes by ≤ 1e-7),
        # then back to the data's units
        K, Q = K * unit / np.sqrt(margin), Q * unit / np.sqrt(margin)
        val = 0.5 * float(np.sum(K * K) + np.sum(Q * Q))
        best.values.append(val)
        if val < best.value:
            nK = max(float(np.sum(K * K)), 1e-300)
            best = RankConstrainedSolution(K, Q, val, 1.0, float(np.linalg.norm(K.T @ K - Q.T @ Q)) / nK,
                                           best.values, len(x0s))
    return best

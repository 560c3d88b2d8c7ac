"""Sequence and causal Att-SVMs (TLTO): every position k is a query with its own optimal key; the causal
version allows keys t ≤ k only. Solved and certified through the shared attention-row solve."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from .att import _finish, _solve_rows
from .core import SVMSolution, _certify, _Rows


def seq_scores(X: Any, Y: Any, v: Any) -> np.ndarray:
    """γ_ikt = Y_ik v^T x_it: score of key t for query position k, shape (n, T, T)."""
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    return Y[:, :, None] * (X @ np.asarray(v, dtype=float))[:, None, :]


def solve_seq_svm(X: Any, gamma: Any, *, causal: bool = False, alpha: Any = None,
                  solver: str | None = None, unconstrained: Any = None) -> SVMSolution:
    """Sequence (causal) Att-SVM: every position k is a query z_ik = x_ik with its own optimal key::

        min ‖W‖_F  s.t.  (x_{iα_ik} − x_it)^T W x_ik ≥ 1   for t ≠ α_ik  (t ≤ k if causal).

    gamma (n, T, T): key scores γ_ikt (see :func:`seq_scores`); alpha (n, T) defaults to the best
    allowed key per query. Causal position k = 0 has one key and gives no constraint.
    Result arrays use [i, k, t]: lam (n, T, T), margins (n, T, T); support is row-major over (i, k).
    unconstrained (n, T) bool: queries that get no constraint (the SVM of the other queries alone; their
    margins are +inf in the result).
    """
    t0 = time.perf_counter()
    X = np.asarray(X, dtype=float)
    if X.ndim != 3:
        raise InvalidInputError(f"X must have shape (n, T, d), got {X.shape}")
    n, T, d = X.shape
    g = np.asarray(gamma, dtype=float)
    if g.shape != (n, T, T):
        raise InvalidInputError(f"gamma must have shape (n, T, T) = ({n}, {T}, {T}), got {g.shape}")
    allowed = np.tril(np.ones((T, T), dtype=bool)) if causal else np.ones((T, T), dtype=bool)  # [k, t]
    allowed = np.broadcast_to(allowed, (n, T, T))
    if alpha is None:
        a = np.argmax(np.where(allowed, g, -np.inf), axis=2)  # (n, T)
    else:
        a = np.asarray(alpha)
        if a.shape != (n, T) or a.dtype.kind not in "iu":
            raise InvalidInputError(f"alpha must be integer indices of shape ({n}, {T}), "
                                    f"got {a.shape} {a.dtype}")
        if np.any(a < 0) or np.any(a >= T) or not np.all(np.take_along_axis(allowed, a[:, :, None], 2)):
            raise InvalidInputError("alpha entries must be allowed keys (0..T-1, and t ≤ k if causal)")
    mask = allowed.copy()
    ii, kk = np.meshgrid(np.arange(n), np.arange(T), indexing="ij")
    mask[ii, kk, a] = False  # (n, T, T): constrained (i, k, t)
    if unconstrained is not None:
        free = np.asarray(unconstrained, dtype=bool)
        if free.shape != (n, T):
            raise InvalidInputError(f"unconstrained must have shape ({n}, {T}), got {free.shape}")
        mask[free] = False
    D = X[ii, a][:, :, None, :] - X[:, None, :, :]  # (n, T, T, d): x_{iα_ik} − x_it
    Zq = np.broadcast_to(X[:, :, None, :], D.shape)  # query x_ik
    msz = int(mask.sum())
    rows = _Rows(D[mask], np.ascontiguousarray(Zq[mask]), np.ones(msz), np.zeros(msz, dtype=bool))
    if msz == 0:
        raise InvalidInputError("the sequence SVM has no constraints (T = 1 or every query sees one key)")
    status, W, lam_r, _, name, attempts = _solve_rows(rows, norm="fro", solver=solver)
    lam = np.zeros(mask.shape)
    lam[mask] = lam_r
    cert = _certify(rows, W, lam_r, np.zeros(0), status, "fro")
    return _finish(rows, mask, status=status, W=W, lam=lam, cert=cert, solver=name, t0=t0, alpha=a,
                   norm="fro", attempts=attempts)

"""TLZO's vector SVMs (arXiv 2306.13596): the p-SVM, the relaxed p-SVM of the joint (v, p) limit and the head
SVM, each a hard-margin SVM ``min ‖w‖ s.t. A w ≥ b`` solved by the core and certified by the one certifier."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import tolerances as tol
from ..errors import InvalidInputError
from .core import Certificate, _certify, _Dense, _solve_certified


@dataclass(frozen=True)
class VectorSVMSolution:
    """A certified hard-margin SVM in vector form (p-SVM, relaxed p-SVM, head SVM).

    w (p,) or None; objective ‖w‖_2; lam per constraint row in the layout documented by the solver
    (p-SVM: (n, T), zero at α; head SVM: (n,)); support: rows with slack within ACTIVE_TOL.
    """

    status: str
    w: np.ndarray | None
    objective: float
    lam: np.ndarray
    support: Any
    certificate: Certificate
    solver: str
    seconds: float

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"



def _vector_solve(A, b, t0, solver, lam_shape, lam_index, support_fn) -> VectorSVMSolution:
    rows = _Dense(A, b, np.zeros(len(b), dtype=bool))
    # solved and certified in the one place (numerics.svm.core._solve_certified): a rung whose certificate
    # does not verify is retried with the next; all failing raises SolverError listing every attempt
    core, cert, _ = _solve_certified(A, b, None, None, solver=solver,
                                     certify=lambda c: _certify(rows, c.w, c.lam, c.mu, c.status, "fro"))
    lam = np.zeros(lam_shape)
    lam[lam_index] = core.lam
    obj = float(np.linalg.norm(core.w)) if core.w is not None else float("inf")
    sup = support_fn(None if core.w is None else A @ core.w - b)
    return VectorSVMSolution(core.status, core.w, obj, lam, sup, cert, core.solver, time.perf_counter() - t0)


def solve_p_svm(keys: Any, alpha: Any, *, rhs: Any = None, solver: str | None = None) -> VectorSVMSolution:
    """TLZO p-SVM: ``p^mm_α = argmin ‖p‖ s.t. p^T (k_{iα_i} − k_it) ≥ b_i  ∀ t ≠ α_i``, keys (n, T, dk).

    rhs (n,) defaults to 1 (the p-SVM); the relaxed p-SVM of the joint (v, p) result uses b_i = 1 for
    support examples of v and 0 otherwise (:func:`solve_joint_vp_svm`). lam (n, T), zero at α;
    support: per example, tokens with slack within ACTIVE_TOL.
    """
    t0 = time.perf_counter()
    K = np.asarray(keys, dtype=float)
    if K.ndim != 3 or K.shape[1] < 2:
        raise InvalidInputError(f"keys must have shape (n, T, dk) with T ≥ 2, got {K.shape}")
    n, T, _ = K.shape
    a = np.asarray(alpha)
    if a.shape != (n,) or a.dtype.kind not in "iu" or np.any(a < 0) or np.any(a >= T):
        raise InvalidInputError(f"alpha must be {n} integer token indices in 0..{T - 1}, got {a!r}")
    b_ex = np.ones(n) if rhs is None else np.asarray(rhs, dtype=float)
    if b_ex.shape != (n,):
        raise InvalidInputError(f"rhs must have shape ({n},), got {b_ex.shape}")
    mask = np.ones((n, T), dtype=bool)
    mask[np.arange(n), a] = False
    A = (K[np.arange(n), a][:, None, :] - K)[mask]  # (m, dk)
    b = np.broadcast_to(b_ex[:, None], (n, T))[mask]

    def sup(slack):
        if slack is None:
            return ()
        full = np.full((n, T), np.inf)
        full[mask] = slack
        return tuple(np.flatnonzero(np.abs(r) <= tol.ACTIVE_TOL) for r in full)

    return _vector_solve(A, b, t0, solver, (n, T), mask, sup)


def solve_head_svm(tokens: Any, Y: Any, *, solver: str | None = None) -> VectorSVMSolution:
    """Hard-margin head SVM ``v^mm = argmin ‖v‖ s.t. Y_i v^T x_i ≥ 1`` on tokens (n, d); lam (n,);
    support: examples with margin within ACTIVE_TOL of 1 (an int array)."""
    t0 = time.perf_counter()
    Xt = np.asarray(tokens, dtype=float)
    Yv = np.asarray(Y, dtype=float)
    if Xt.ndim != 2 or Yv.shape != (Xt.shape[0],):
        raise InvalidInputError(f"tokens must be (n, d) and Y (n,), got {Xt.shape} and {Yv.shape}")
    A = Yv[:, None] * Xt
    n = A.shape[0]
    return _vector_solve(A, np.ones(n), t0, solver, (n,), np.ones(n, dtype=bool),
                         lambda s: () if s is None else np.flatnonzero(np.abs(s) <= tol.ACTIVE_TOL))


def solve_joint_vp_svm(X: Any, Y: Any, alpha: Any, *, keys: Any = None
                       ) -> tuple[VectorSVMSolution, VectorSVMSolution]:
    """TLZO's joint (v, p) limit: v → head SVM on the selected tokens x_{iα_i}; p → the relaxed p-SVM
    (≥ 1 for support examples of v^mm, ≥ 0 otherwise). keys default to the tokens (W = I)."""
    X = np.asarray(X, dtype=float)
    a = np.asarray(alpha)
    n = X.shape[0]
    v = solve_head_svm(X[np.arange(n), a], Y)
    if not v.feasible:
        raise InvalidInputError("the head SVM on the selected tokens is infeasible; "
                                "the joint (v, p) limit is undefined")
    rhs = np.zeros(n)
    rhs[v.support] = 1.0
    p = solve_p_svm(X if keys is None else keys, a, rhs=rhs)
    return v, p

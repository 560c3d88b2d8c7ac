"""Att-SVM (Frobenius and nuclear norm), the attention-row solve shared with Gen-SVM and sequence SVMs, and
local optimality (THEORY.md §3).

``W^mm_α = argmin ‖W‖  s.t. (x_{iα_i} − x_it)^T W z_i ≥ 1``: the rows ⟨(x_{iα_i} − x_it) z_i^T, W⟩ are
written in orthonormal bases of span{x-differences} ⊗ span{z_i} and handed to the Frobenius core
(:func:`~numerics.svm.core._hard_margin_core`) or, for the nuclear norm, to the certified SDP ladder
(:mod:`numerics.svm.nuclear`); every answer is certified by :func:`~numerics.svm.core._certify`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from .. import tolerances as tol
from ..data import AttentionData
from ..errors import InvalidInputError, SolverError
from ..tokens import resolve_alpha, scores
from .core import (
    Certificate,
    SVMSolution,
    _bases,
    _certify,
    _hard_margin_core,
    _reduced_features,
    _Rows,
    _rows_apply,
    _solve_certified,
    rank_by_gap,
)
from .exact import _exact_att
from .nuclear import FORMULATIONS, NUC_LADDER, NUC_LADDER_FULL, NUC_SOLVERS, _solve_nuclear_ladder

# ================================================================================================
# attention-type rows (x_plus − x_minus) z^T: one solve for Att-SVM, Gen-SVM and sequence SVMs
# ================================================================================================


def _att_rows(data: AttentionData, alpha: np.ndarray) -> tuple[_Rows, np.ndarray]:
    """Att-SVM rows for all (i, t ≠ α_i); returns rows and the (n, T) boolean mask of constrained tokens."""
    n, T, _ = data.X.shape
    D = data.X[np.arange(n), alpha][:, None, :] - data.X  # (n, T, d)
    mask = np.ones((n, T), dtype=bool)
    mask[np.arange(n), alpha] = False
    Zq = np.broadcast_to(data.Z[:, None, :], D.shape)[mask]  # (m, d)
    m = int(mask.sum())
    return _Rows(D[mask], np.ascontiguousarray(Zq), np.ones(m), np.zeros(m, dtype=bool)), mask


#: Feature rows ⟨D_s z_s^T, W⟩ are rescaled by an exact power of two κ before solving when the largest row
#: norm ‖D_s‖‖z_s‖ lies outside [1/16, 16] (W = κ W', λ = κ² λ' (fro) or κ λ' (nuc)): the solvers' absolute
#: thresholds (NNLS's 1e-13 feasibility test, Clarabel's absolute gap 1e-10) assume O(1) features, and data
#: scaled by 1e4 (‖W^mm‖ ~ 1e-8) or 1e-4 (‖W^mm‖ ~ 1e8) otherwise fail. Inside the band nothing is rescaled,
#: so the suite's unit-scale instances are solved exactly as before.
FEATURE_SCALE_BAND = (1.0 / 16.0, 16.0)


def _feature_scale(rows: _Rows) -> float:
    """κ = 2^k bringing the largest feature row norm to ~1 (1.0 when already inside FEATURE_SCALE_BAND)."""
    if rows.D.shape[0] == 0:
        return 1.0
    big = float(np.max(np.linalg.norm(rows.D, axis=1) * np.linalg.norm(rows.Zq, axis=1)))
    if not np.isfinite(big) or big == 0.0 or FEATURE_SCALE_BAND[0] <= big <= FEATURE_SCALE_BAND[1]:
        return 1.0
    return float(2.0 ** (-round(np.log2(big))))


def _solve_rows(rows: _Rows, *, norm: str, solver: str | None, reduce: bool = True,
                rungs: tuple[tuple[str, str], ...] | None = None
                ) -> tuple[str, np.ndarray | None, np.ndarray, np.ndarray, str, tuple[str, ...]]:
    """Solve an attention-type SVM given by rows; returns (status, W, λ_ineq, μ_eq, solver name, attempts).

    Feasibility is decided by the Frobenius core (a Farkas certificate when infeasible) for both norms; the
    nuclear norm then climbs ``rungs`` (default :data:`NUC_LADDER`) until one answer certifies. Badly scaled
    features are first rescaled by an exact power of two (:data:`FEATURE_SCALE_BAND`) and the answer mapped
    back.
    """
    kappa = _feature_scale(rows)
    if kappa == 1.0:
        return _solve_rows_unit(rows, norm=norm, solver=solver, reduce=reduce, rungs=rungs)
    status, W, lam, mu, name, attempts = _solve_rows_unit(replace(rows, D=rows.D * kappa), norm=norm,
                                                          solver=solver, reduce=reduce, rungs=rungs)
    if status == "optimal":  # ⟨κF, W'⟩ ≥ b  ⇔  ⟨F, κW'⟩ ≥ b; multipliers: W = Σ λ F (fro), S = Σ λ F (nuc)
        lam_k = kappa**2 if norm == "fro" else kappa
        assert W is not None  # an optimal status carries its W
        W, lam, mu = W * kappa, lam * lam_k, mu * lam_k
    # infeasible: a Farkas vector of the scaled rows is one of the original rows (Σ λ κF = 0, b^T λ = 1)
    return status, W, lam, mu, name + f"+scaled(2^{round(np.log2(kappa))})", attempts


def _solve_rows_unit(rows: _Rows, *, norm: str, solver: str | None, reduce: bool = True,
                     rungs: tuple[tuple[str, str], ...] | None = None
                     ) -> tuple[str, np.ndarray | None, np.ndarray, np.ndarray, str, tuple[str, ...]]:
    """:func:`_solve_rows` on features of unit scale."""
    d = rows.D.shape[1]
    U, V = _bases(rows) if reduce else (np.eye(d), np.eye(d))
    F = _reduced_features(rows, U, V)  # (m, r1 r2)
    ineq = ~rows.eq

    def to_W(core):
        return None if core.w is None else U @ core.w.reshape(U.shape[1], V.shape[1]) @ V.T

    def certify(core):  # the one certifier on these (unreduced) rows: a rung that does not verify is retried
        return _certify(rows, to_W(core), core.lam, core.mu, core.status, "fro")

    if norm == "fro":
        core, _, attempts = _solve_certified(F[ineq], rows.b[ineq], F[rows.eq], rows.b[rows.eq],
                                             solver=solver, certify=certify)
        return core.status, to_W(core), core.lam, core.mu, core.solver, attempts
    core = _hard_margin_core(F[ineq], rows.b[ineq], F[rows.eq], rows.b[rows.eq], solver=None)
    if core.status == "infeasible":
        return core.status, None, core.lam, core.mu, core.solver, ()
    if rows.eq.any():
        raise InvalidInputError("nuclear-norm SVM with equality rows is not supported; use norm='fro'")
    if rungs is None:
        rungs = NUC_LADDER if reduce else NUC_LADDER_FULL
    cache = {"reduced" if reduce else "full": (U, V, F)}
    W, lam, name, attempts = _solve_nuclear_ladder(rows, rungs, cache)
    return "optimal", W, lam, np.zeros(0), name, attempts



# ================================================================================================
# Att-SVM
# ================================================================================================


def certify_att_svm(data: AttentionData, alpha: Any, W: np.ndarray | None, lam: np.ndarray, *,
                    norm: str = "fro", status: str = "optimal") -> Certificate:
    """Certificate of an Att-SVM answer from the raw data: margins, λ ≥ 0, complementarity and
    stationarity W = Σ λ_it (x_iα − x_it) z_i^T (fro), dual norm + duality gap (nuc), or Farkas."""
    a = resolve_alpha(data, alpha)
    rows, mask = _att_rows(data, a)
    lam = np.asarray(lam, dtype=float)
    return _certify(rows, W, lam[mask], np.zeros(0), status, norm)


def solve_att_svm(data: AttentionData, alpha: Any = None, *, norm: str = "fro", m: int | None = None,
                  solver: str | None = None, exact: bool = False, formulation: str = "reduced"
                  ) -> SVMSolution:
    """Att-SVM: ``W^mm_α = argmin ‖W‖  s.t. (x_{iα_i} − x_it)^T W z_i ≥ 1  ∀ i, t ≠ α_i``.

    norm="fro" (Frobenius; solver "nnls" (default: LDP/NNLS on the small dual, polished) or any cvxpy
    QP solver name, e.g. "clarabel", for an independent primal solve) or "nuc" (nuclear norm, Att-SVM⋆,
    an SDP). alpha=None selects the optimal tokens (needs the head v).

    Nuclear norm: with solver=None the solver ladder :data:`NUC_LADDER` is climbed until an answer passes
    the SDP certificate (tolerances never loosened); ``solution.solver`` names the rung that certified it
    (e.g. "clarabel+reduced+polish") and ``solution.attempts`` lists every rung tried. An explicit solver
    ("clarabel", "clarabel-tight", "clarabel-primal" or "scs") runs that rung only.

    formulation="reduced" (default) solves in orthonormal bases of span{key differences} ⊗ span{z_i}
    (W = U M V^T: the span structure is built in, exact because every minimiser lies there);
    formulation="full" solves the *unreduced* program over all of R^{d×d} — for norm="nuc" the full-space
    SDP ``min ‖W‖_* s.t. ⟨(x_{iα_i} − x_it) z_i^T, W⟩ ≥ 1`` (rungs :data:`NUC_LADDER_FULL`, never the reduced
    one) — so that span membership and rank of its answer are *outcomes*, an independent reference.
    m: rank cap of the (K, Q) factorisation (nuclear only); for m < n the problem is non-convex and
    the convex relaxation is solved, with a note if its rank exceeds m. exact=True (Frobenius only)
    re-proves optimality (or infeasibility) in exact rational arithmetic; see ``certificate.exact``.

    Infeasible problems return status "infeasible" with a verified Farkas certificate. A solver
    failure, or an answer whose certificate does not verify, raises :class:`SolverError`.

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [0.0, 0.0]]]); Z = np.array([[0.0, 2.0]])
    >>> sol = solve_att_svm(AttentionData(X, [1.0], Z), alpha=[0])
    >>> sol.status, round(sol.objective, 12), sol.W.round(12).tolist()
    ('optimal', 0.5, [[0.0, 0.5], [0.0, 0.0]])
    """
    t0 = time.perf_counter()
    if norm not in ("fro", "nuc"):
        raise InvalidInputError(f"norm must be 'fro' or 'nuc', got {norm!r}")
    if exact and norm != "fro":
        raise InvalidInputError("exact=True is available for norm='fro' only "
                                "(the nuclear SDP has no exact mode)")
    if formulation not in FORMULATIONS:
        raise InvalidInputError(f"formulation must be 'reduced' or 'full', got {formulation!r}")
    rungs = None
    if norm == "nuc" and solver is not None:
        key = str(solver).lower()
        if key not in NUC_SOLVERS:
            raise InvalidInputError(f"nuclear solver must be one of {', '.join(NUC_SOLVERS)}, got {solver!r}")
        rungs = ((key, formulation),)
    a = resolve_alpha(data, alpha)
    rows, mask = _att_rows(data, a)
    status, W, lam_r, _, name, attempts = _solve_rows(rows, norm=norm, solver=solver, rungs=rungs,
                                                      reduce=formulation == "reduced")
    lam = np.zeros(mask.shape)
    lam[mask] = lam_r
    cert = _certify(rows, W, lam_r, np.zeros(0), status, norm)
    if exact:
        cert = _exact_att(data, a, rows, lam_r, status, cert)
    return _finish(rows, mask, status=status, W=W, lam=lam, cert=cert, solver=name, t0=t0, alpha=a, norm=norm,
                   m=m, n=data.n, attempts=attempts)


def _finish(rows: _Rows, mask: np.ndarray, *, status: str, W: np.ndarray | None, lam: np.ndarray,
            cert: Certificate, solver: str, t0: float, alpha: np.ndarray, norm: str, m: int | None = None,
            n: int | None = None, attempts: tuple[str, ...] = ()) -> SVMSolution:
    """The :class:`SVMSolution` of a solved and certified attention-row problem (raises if not certified).

    rows / mask: the constraint rows and the boolean mask (n, T) or (n, T, T) of the constrained tokens they
    came from (margins are +inf elsewhere); lam: multipliers already laid out in the mask's shape; m, n: rank
    cap and number of examples (nuclear notes only); t0: perf_counter at the start of the solve.
    """
    if not cert.verified:
        raise SolverError(f"{solver}: the {cert.kind} certificate did not verify ({cert.summary()}); "
                          "try another solver", status="uncertified", solver=solver)
    notes = []
    marg = np.full(mask.shape, np.inf)
    if W is not None:
        marg[mask] = _rows_apply(rows, W)
    support = tuple(np.flatnonzero(np.abs(row - 1.0) <= tol.ACTIVE_TOL)
                    for row in marg.reshape(-1, mask.shape[-1]))
    rank, sv = rank_by_gap(W)
    if W is None:
        obj = float("inf")
    elif norm == "fro":
        obj = float(np.linalg.norm(W))
    else:
        obj = float(np.sum(sv)) if sv is not None else float("inf")  # sv is None only when W is None
    if m is not None:
        if norm == "fro":
            notes.append("rank cap m is ignored for the Frobenius problem")
        elif n is not None and m < n:
            notes.append(f"m={m} < n={n}: the rank-constrained problem is non-convex; "
                         "solved its convex relaxation")
        if W is not None and norm == "nuc" and rank > m:
            notes.append(f"relaxation rank {rank} exceeds the cap m={m}")
    return SVMSolution(status=status, W=W, objective=obj, lam=lam, support=support, rank=rank,
                       certificate=cert, solver=solver, seconds=time.perf_counter() - t0, alpha=alpha,
                       norm=norm, singular_values=sv, margins=marg, notes=tuple(notes),
                       attempts=tuple(attempts))


# ================================================================================================
# local optimality
# ================================================================================================


def support_tokens(data: AttentionData, alpha: Any, sol: SVMSolution | None = None) -> tuple[np.ndarray, ...]:
    """T_i(α) = {t ≠ α_i : (x_{iα_i} − x_it)^T W^mm_α z_i = 1} (within ACTIVE_TOL). Empty tuple if
    infeasible."""
    sol = solve_att_svm(data, alpha) if sol is None else sol
    return sol.support if sol.feasible else ()


def is_locally_optimal(data: AttentionData, alpha: Any, sol: SVMSolution | None = None) -> bool:
    """α is locally optimal iff Att-SVM(α) is feasible and γ_{iα_i} > γ_it (by more than TIE_TOL) for every
    support token t ∈ T_i(α). The optimal tokens always are (THEORY.md §3)."""
    a = resolve_alpha(data, alpha)
    sol = solve_att_svm(data, a) if sol is None else sol
    if not sol.feasible:
        return False
    return locally_optimal(scores(data), a, sol.support)


def locally_optimal(gamma: Any, alpha: Any, support: Any) -> bool:
    """γ_{iα_i} − γ_it > TIE_TOL for every t in support[i]: the local-optimality test for any SVM whose
    support tokens are known (Att-SVM, TLZO's p-SVM). gamma (n, T), alpha (n,), support per example."""
    g = np.asarray(gamma, dtype=float)
    a = np.asarray(alpha)
    return all(bool(np.all(g[i, a[i]] - g[i, np.asarray(T, dtype=int)] > tol.TIE_TOL))
               for i, T in enumerate(support))

"""The shared machinery of every attention SVM: results, the hard-margin core, the one certifier.

    min ½‖w‖²  s.t.  A w ≥ b,  E w = e                                       (core)

:func:`_hard_margin_core` solves (core) by the Lawson–Hanson LDP/NNLS reduction (a Farkas vector when
infeasible), polishes the active set, and falls back to an interior-point QP (Clarabel) when NNLS misjudges a
degenerate problem. :func:`_certify` checks an answer — KKT (Frobenius), SDP duality (nuclear) or Farkas —
from the raw constraint rows only: attention rows ``⟨D_s z_s^T, W⟩`` (:class:`_Rows`) or dense vector rows
``a_s^T w`` (:class:`_Dense`). See the package docstring (:mod:`numerics.svm`) for the families built on it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linprog, nnls

from .. import tolerances as tol
from ..errors import SolverError

# ================================================================================================
# results
# ================================================================================================


@dataclass(frozen=True)
class Certificate:
    """Residuals of an optimality (KKT / SDP duality) or infeasibility (Farkas) certificate.

    Computed by code that only sees the data, the returned primal W and the multipliers λ.

    kind: "kkt" (Frobenius-type QP), "sdp" (nuclear norm: dual feasibility + duality gap) or
    "farkas" (λ ≥ 0, Σ λ_s a_s = 0, b^T λ = 1). Residuals not used by a kind are NaN.
    """

    kind: str
    verified: bool
    min_margin: float = float("nan")  # min over inequality rows of (A w − b) + 1 for b = 1 (≥ 1 − FEAS_TOL)
    primal_residual: float = float("nan")  # worst violation, relative to max(1, |b|)
    dual_min: float = float("nan")  # min λ (≥ 0), relative to max λ
    complementarity: float = float("nan")  # max λ_s |slack_s| / max λ (slack relative to b = 1): scale-free
    stationarity: float = float("nan")  # ‖W − Σ λ F‖ / ‖W‖ (kkt); ‖Σ λ F‖ / Σ λ ‖F‖ (farkas)
    dual_norm: float = float("nan")  # ‖Σ λ F‖_2 (sdp, must be ≤ 1 + tol)
    gap: float = float("nan")  # |primal − dual| / primal (kkt: ‖W‖² vs b^T λ; sdp: ‖W‖_* vs b^T λ)
    norm_lower_bound: float = float("nan")  # farkas: any feasible W has ‖W‖_F ≥ this (inf if exact)
    exact: bool | None = None  # exact rational proof: True proved, False attempted and failed, None not tried
    message: str = ""

    def summary(self) -> str:
        parts = [f"{self.kind} {'verified' if self.verified else 'NOT verified'}"]
        for name in ("min_margin", "primal_residual", "dual_min", "complementarity", "stationarity",
                     "dual_norm", "gap", "norm_lower_bound"):
            val = getattr(self, name)
            if not np.isnan(val):
                parts.append(f"{name}={val:.3g}")
        if self.exact is not None:
            parts.append(f"exact={'proved' if self.exact else 'not proved'}")
        if self.message:
            parts.append(self.message)
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self.__dataclass_fields__:
            val = getattr(self, k)
            if isinstance(val, float) and not np.isfinite(val):
                val = None if np.isnan(val) else ("inf" if val > 0 else "-inf")
            out[k] = val
        return out


@dataclass(frozen=True)
class SVMSolution:
    """A certified attention SVM answer (Att-SVM, Att-SVM⋆, sequence/causal SVM, Gen-SVM parts).

    status: "optimal" or "infeasible" (with a Farkas certificate; W is then None).
    W (d, d): the solution. objective: ‖W‖_F (norm="fro") or ‖W‖_* (norm="nuc") — the norm itself,
    not its square. lam: multipliers, zero at α and at masked keys: (n, T) for Att-SVM,
    (n, T, T) [i, k, t] for sequence SVMs; on "infeasible", the normalised Farkas vector (Σλ = 1).
    support: per example (per (i, k) for sequence SVMs, row-major) the token indices whose margin is
    within ACTIVE_TOL of 1 — THEORY.md's T_i(α). rank: #σ_j > RANK_RTOL σ_1 of W (0 if infeasible).
    """

    status: str
    W: np.ndarray | None
    objective: float
    lam: np.ndarray
    support: tuple[np.ndarray, ...]
    rank: int
    certificate: Certificate
    solver: str
    seconds: float
    alpha: np.ndarray
    norm: str = "fro"
    singular_values: np.ndarray | None = None
    margins: np.ndarray | None = None  # (n, T) / (n, T, T): +inf at α and masked keys
    notes: tuple[str, ...] = ()
    attempts: tuple[str, ...] = ()  # nuclear norm: every rung of the ladder tried, the last one certified

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"

    @property
    def positive_support(self) -> tuple[np.ndarray, ...]:
        """Tokens with λ > 0 (relative to max λ, above KKT_TOL)."""
        lam = self.lam.reshape(-1, self.lam.shape[-1])
        cut = tol.KKT_TOL * max(float(np.max(self.lam)), 0.0)
        return tuple(np.flatnonzero(row > cut) for row in lam)



# ================================================================================================
# the homogeneous hard-margin core:  min ½‖w‖²  s.t.  A w ≥ b,  E w = e
# ================================================================================================


@dataclass(frozen=True)
class _Core:
    status: str  # "optimal" | "infeasible"
    w: np.ndarray | None
    lam: np.ndarray  # (m,) ≥ 0: KKT multipliers, or the Farkas vector normalised to b'^T λ = 1
    mu: np.ndarray  # (k,) free multipliers of the equality rows
    solver: str


def _nullspace(E: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases (range(E^T), null(E)) in R^p."""
    if E.shape[0] == 0:
        return np.zeros((p, 0)), np.eye(p)
    _, s, Vt = np.linalg.svd(E, full_matrices=True)
    r = int(np.sum(s > max(E.shape) * np.finfo(float).eps * (s[0] if s.size else 0.0)))
    return Vt[:r].T, Vt[r:].T


def _ldp_nnls(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray | None, np.ndarray, bool]:
    """Lawson–Hanson LDP: returns (w, λ, feasible). If infeasible, λ is a Farkas vector (b^T λ = 1)."""
    m, p = A.shape
    Ebig = np.vstack([A.T, b[None, :]])  # (p+1, m)
    f = np.zeros(p + 1)
    f[-1] = 1.0
    u, _ = nnls(Ebig, f, maxiter=50 * max(m, 10))
    r = Ebig @ u - f
    den = -r[-1]  # = 1 − b^T u  (> 0 iff feasible)
    if den > 1e-13:
        w = (A.T @ u) / den
        if m == 0 or np.min(A @ w - b) >= -tol.FEAS_TOL * max(1.0, float(np.max(np.abs(b)))):
            return w, u / den, True
    s = float(b @ u)
    return None, (u / s if s > 0 else u), False


def _polish(A: np.ndarray, b: np.ndarray, lam: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Re-solve the equality system on the positive-multiplier set: w ∈ rowspace(A_S), A_S w = b_S."""
    S = np.flatnonzero(lam > 1e-12 * max(scale, 1.0))
    if S.size == 0:
        return np.zeros(A.shape[1]), np.zeros_like(lam)
    AS = A[S]
    w, *_ = np.linalg.lstsq(AS, b[S], rcond=None)  # minimum-norm solution of A_S w = b_S
    lS, *_ = np.linalg.lstsq(AS.T, w, rcond=None)
    if np.min(lS) < 0:  # degenerate support: pick a nonnegative representation
        lS, _ = nnls(AS.T, w)
    out = np.zeros_like(lam)
    out[S] = lS
    return w, out


def _farkas_polish(A: np.ndarray, b: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Sharpen a Farkas vector: on its support, replace it by an exact SVD null vector of A_S^T if
    positive."""
    S = np.flatnonzero(lam > 1e-12 * max(float(np.max(lam)), 1e-300))
    if S.size == 0:
        return lam
    _, s, Vt = np.linalg.svd(A[S].T, full_matrices=True)  # (p, |S|)
    nulls = Vt[np.sum(s > max(A.shape) * np.finfo(float).eps * (s[0] if s.size else 1.0)):]
    if nulls.shape[0] != 1:
        return lam
    v = nulls[0] * np.sign(nulls[0].sum())
    if np.min(v) <= 0 or float(b[S] @ v) <= 0:
        return lam
    out = np.zeros_like(lam)
    out[S] = v / float(b[S] @ v)
    return out


def _farkas_lp(A: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """LP: find λ ≥ 0 with A^T λ = 0, b^T λ = 1 (HiGHS). None if there is none (A w ≥ b feasible)."""
    m, p = A.shape
    Aeq = np.vstack([A.T, b[None, :]])
    beq = np.zeros(p + 1)
    beq[-1] = 1.0
    res = linprog(np.zeros(m), A_eq=Aeq, b_eq=beq, bounds=(0, None), method="highs")
    return res.x if res.status == 0 else None


def _qp_cvxpy(A: np.ndarray, b: np.ndarray, solver: str) -> tuple[str, np.ndarray | None, np.ndarray]:
    """Primal QP min ½‖w‖² s.t. A w ≥ b through cvxpy (the independent second solve)."""
    import cvxpy as cp

    w = cp.Variable(A.shape[1])
    con = A @ w >= b
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w)), [con])
    kw = _tight_settings(solver)
    try:
        with warnings.catch_warnings():  # "may be inaccurate": the status is checked and the answer certified
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=solver, **kw)
    except cp.error.SolverError as exc:
        raise SolverError(f"{solver} failed on the Frobenius QP: {exc}", status="error",
                          solver=solver) from None
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        return "infeasible", None, np.zeros(A.shape[0])
    if prob.status != "optimal":
        raise SolverError(f"{solver} returned status {prob.status!r} on the Frobenius QP; expected 'optimal'",
                          status=prob.status, solver=solver)
    return "optimal", np.asarray(w.value, dtype=float), np.maximum(np.asarray(con.dual_value, dtype=float), 0)


def _hard_margin_core(A: np.ndarray, b: np.ndarray, E: np.ndarray | None = None, e: np.ndarray | None = None,
                      *, solver: str | None = None) -> _Core:
    """min ½‖w‖² s.t. A w ≥ b, E w = e. Equalities are eliminated (w = w0 + N y, N ⟂ rowspace(E))."""
    m, p = A.shape
    E = np.zeros((0, p)) if E is None else np.asarray(E, dtype=float)
    e = np.zeros(0) if e is None else np.asarray(e, dtype=float)
    R, N = _nullspace(E, p)
    if E.shape[0]:
        w0, *_ = np.linalg.lstsq(E, e, rcond=None)
        res = e - E @ w0
        if np.linalg.norm(res) > 1e-9 * max(1.0, float(np.linalg.norm(e))):
            # inconsistent equalities: y = res satisfies E^T y = 0, e^T y > 0
            return _Core("infeasible", None, np.zeros(m), res / float(res @ e), "lstsq")
        w0 = R @ (R.T @ w0)
    else:
        w0 = np.zeros(p)
    Ar = A @ N  # (m, p − rank E)
    br = b - A @ w0
    name = (solver or "nnls").lower()
    y: np.ndarray | None
    if m == 0:
        status, y, lam = "optimal", np.zeros(N.shape[1]), np.zeros(0)
    elif name == "nnls":
        try:
            y, lam, ok = _ldp_nnls(Ar, br)
        except RuntimeError as exc:  # NNLS iteration cap: fall back to the interior-point QP
            y, lam, ok = None, np.zeros(m), False
            name = "clarabel"
            st, y, lam = _qp_cvxpy(Ar, br, "CLARABEL")
            ok = st == "optimal"
            if not ok:
                lam = np.zeros(m)
            del exc
        status = "optimal" if ok else "infeasible"
        if ok:
            y, lam = _polish(Ar, br, lam, float(np.max(lam, initial=0.0)))
            name = "nnls+polish" if name == "nnls" else name
    else:
        st, y, lam = _qp_cvxpy(Ar, br, name.upper())
        status = st
    if status == "infeasible":
        if np.linalg.norm(Ar.T @ lam) > 1e-9 * max(1.0, float(np.abs(lam).sum())) or not np.all(lam >= 0):
            lp = _farkas_lp(Ar, br)
            if lp is None and name.startswith("nnls"):
                # NNLS misjudged a nearly degenerate problem: the LP says it is feasible, so solve the
                # primal QP with the interior-point solver (still certified afterwards).
                st, y, lam = _qp_cvxpy(Ar, br, "CLARABEL")
                if st == "optimal":
                    w = w0 + N @ y
                    mu = np.linalg.lstsq(E.T, w - A.T @ lam, rcond=None)[0] if E.shape[0] else np.zeros(0)
                    return _Core("optimal", w, lam, mu, "nnls->clarabel")
            if lp is None:
                raise SolverError(f"{name} reported infeasible but no Farkas vector exists (LP feasible)",
                                  status="infeasible?", solver=name)
            lam = lp
        lam = _farkas_polish(Ar, br, lam)
        # equality multipliers of the Farkas system: E^T μ = −A^T λ
        mu = np.linalg.lstsq(E.T, -(A.T @ lam), rcond=None)[0] if E.shape[0] else np.zeros(0)
        return _Core("infeasible", None, lam, mu, name)
    w = w0 + N @ y
    # equality multipliers: w = A^T λ + E^T μ
    mu = np.linalg.lstsq(E.T, w - A.T @ lam, rcond=None)[0] if E.shape[0] else np.zeros(0)
    return _Core("optimal", w, lam, mu, name)


#: The Frobenius attempts of :func:`_solve_certified`, in order, each certified by the one certifier with the
#: same tolerances (never loosened): the LDP/NNLS core with its active-set polish (exact on the active set,
#: fast); Clarabel's interior-point primal QP at the tight settings of :func:`_tight_settings` (feasibility
#: and gap 1e-10: an independent solver whose iterates approach the active set from the interior, so a
#: violation left by a misjudged active set is not reproduced); that Clarabel answer re-solved on its own
#: positive-multiplier set (:func:`_polish`: stationarity and margins to rounding where the interior answer is
#: only 1e-8 close); SCS at eps 1e-9 (a first-order method: a third, unrelated algorithm, tried last because
#: it is the slowest).
FRO_ATTEMPTS = ("nnls", "clarabel", "clarabel+polish", "scs")


def _core_attempt(
    A: np.ndarray, b: np.ndarray, E: np.ndarray | None, e: np.ndarray | None, key: str
) -> _Core:
    """One rung of :data:`FRO_ATTEMPTS` (or an explicit solver name): the core solved that way."""
    if key != "clarabel+polish":
        return _hard_margin_core(A, b, E, e, solver=None if key == "nnls" else key)
    core = _hard_margin_core(A, b, E, e, solver="clarabel")
    if core.status != "optimal":
        return core
    # the active set read off the interior answer's *margins* (slack within ACTIVE_TOL, the suite's definition
    # of a support row), not off its multipliers: on a nearly infeasible problem (‖w‖ ~ 6e4, multipliers
    # spanning 1e-8 … 1e9, quick seed 7 of overparam-global) the multipliers of active rows can be tiny while
    # their margins are exact to 1e-7; the min-norm solution of the active equalities then violates nothing
    # (5e-12 there, against 2.9e-7 for the interior answer)
    Eq = np.zeros((0, A.shape[1])) if E is None else np.asarray(E, dtype=float)
    eq = np.zeros(0) if e is None else np.asarray(e, dtype=float)
    assert core.w is not None  # an optimal core carries its w
    slack = (A @ core.w - b) / np.maximum(1.0, np.abs(b))
    S = np.flatnonzero(slack <= tol.ACTIVE_TOL)
    M = np.vstack([A[S], Eq])
    w, *_ = np.linalg.lstsq(M, np.concatenate([b[S], eq]), rcond=None)  # min-norm solution on the active set
    mult, *_ = np.linalg.lstsq(M.T, w, rcond=None)
    lam = np.zeros(A.shape[0])
    lam[S] = mult[:S.size]
    mu = mult[S.size:]
    if S.size and np.min(lam[S]) < 0 and Eq.shape[0] == 0:
        # degenerate active set: a nonnegative representation
        lS, _ = nnls(A[S].T, w)
        lam[S], mu = lS, np.zeros(0)
    return _Core("optimal", w, lam, mu, "clarabel+polish")


def _solve_certified(A: np.ndarray, b: np.ndarray, E: np.ndarray | None, e: np.ndarray | None, *,
                     solver: str | None, certify) -> tuple[_Core, Certificate, tuple[str, ...]]:
    """Solve (core) and certify, retrying with the next rung of :data:`FRO_ATTEMPTS` while the certificate
    does not verify (or the solver fails). The one place a Frobenius-type SVM is solved and certified.

    certify(core) -> Certificate: the one certifier (:func:`_certify`) on the raw rows of the caller. An
    explicit ``solver`` runs that solver only (an independent solve must stay that solver's). Returns the
    certified core, its certificate and every attempt made ("name: certified" last); raises
    :class:`SolverError` listing every attempt with its status and certificate when none verifies (status
    "uncertified" when every attempt returned an answer, else the last solver status seen).
    """
    keys = FRO_ATTEMPTS if solver is None or str(solver).lower() == "nnls" else (str(solver).lower(),)
    attempts: list[str] = []
    status = "uncertified"
    for key in keys:
        try:
            core = _core_attempt(A, b, E, e, key)
        except SolverError as exc:
            attempts.append(f"{key}: solver failed, status {exc.status!r} ({exc})")
            status = str(exc.status)
            continue
        cert = certify(core)
        if cert.verified:
            attempts.append(f"{core.solver}: certified")
            return core, cert, tuple(attempts)
        attempts.append(f"{core.solver}: status {core.status!r}, {cert.summary()}")
        status = "uncertified"
    raise SolverError("Frobenius SVM: no attempt certified an answer (" + " | ".join(attempts) + ")",
                      status=status, solver="attempts[" + ", ".join(keys) + "]")


def _tight_settings(solver: str) -> dict[str, Any]:
    s = solver.upper()
    if s == "CLARABEL":
        return {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "tol_ktratio": 1e-8,
                "max_iter": 500}
    if s == "SCS":
        return {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200000}
    if s == "OSQP":
        return {"eps_abs": 1e-10, "eps_rel": 1e-10, "max_iter": 200000, "polish": True}
    return {}



# ================================================================================================
# constraint rows: attention rows (x_plus − x_minus) z^T and dense vector rows
# ================================================================================================


@dataclass(frozen=True)
class _Rows:
    """Constraint rows ⟨Dq_s z_s^T, W⟩ (≥ or =) b_s, in d-space. idx maps each row to (example, token)."""

    D: np.ndarray  # (m, d) key differences
    Zq: np.ndarray  # (m, d) queries
    b: np.ndarray  # (m,)
    eq: np.ndarray  # (m,) bool: equality row

    def apply(self, W: np.ndarray) -> np.ndarray:
        return _rows_apply(self, W)  # (m,)

    def adjoint(self, lam: np.ndarray) -> np.ndarray:
        return _rows_adjoint(self, lam)  # (d, d)

    def row_norms(self) -> np.ndarray:
        return np.linalg.norm(self.D, axis=1) * np.linalg.norm(self.Zq, axis=1)  # (m,)  ‖D_s z_s^T‖_F


def _bases(rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal U (d, r1) ⊇ span{D_s}, V (d, r2) ⊇ span{z_s}: the optimum is U M V^T (both norms)."""
    def basis(M):
        if M.shape[0] == 0:
            return np.zeros((M.shape[1], 0))
        _, s, Vt = np.linalg.svd(M, full_matrices=False)
        r = int(np.sum(s > max(M.shape) * np.finfo(float).eps * s[0])) if s.size and s[0] > 0 else 0
        return Vt[:r].T

    return basis(rows.D), basis(rows.Zq)


def _reduced_features(rows: _Rows, U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Row s = vec_C((U^T D_s)(V^T z_s)^T), so that ⟨D_s z_s^T, U M V^T⟩ = row_s · vec_C(M)."""
    a = rows.D @ U  # (m, r1)
    c = rows.Zq @ V  # (m, r2)
    return (a[:, :, None] * c[:, None, :]).reshape(len(rows.b), -1)


def _rows_apply(rows: _Rows, W: np.ndarray) -> np.ndarray:
    return np.einsum("md,de,me->m", rows.D, W, rows.Zq)  # (m,)  D_s^T W z_s


def _rows_adjoint(rows: _Rows, lam: np.ndarray) -> np.ndarray:
    return (rows.D * lam[:, None]).T @ rows.Zq  # (d, d)  Σ λ_s D_s z_s^T



@dataclass(frozen=True)
class _Dense:
    """Dense constraint rows a_s^T w (≥ or =) b_s of a vector problem (p-SVM, head SVM): A (m, p)."""

    A: np.ndarray  # (m, p)
    b: np.ndarray  # (m,)
    eq: np.ndarray  # (m,) bool: equality row

    def apply(self, w: np.ndarray) -> np.ndarray:
        return self.A @ w  # (m,)

    def adjoint(self, lam: np.ndarray) -> np.ndarray:
        return self.A.T @ lam  # (p,)  Σ λ_s a_s

    def row_norms(self) -> np.ndarray:
        return np.linalg.norm(self.A, axis=1)  # (m,)


# ================================================================================================
# the certificate: recomputed from the rows only
# ================================================================================================


def _certify(rows: _Rows | _Dense, W: np.ndarray | None, lam: np.ndarray, mu: np.ndarray, status: str,
             norm: str = "fro") -> Certificate:
    """The one certifier of every family: KKT (fro), SDP duality (nuc) or Farkas, from the raw rows only.

    rows: ``⟨F_s, W⟩ (≥ or =) b_s`` seen through ``apply`` / ``adjoint`` / ``row_norms`` (attention rows
    ``F_s = D_s z_s^T`` (:class:`_Rows`) or dense vector rows ``F_s = a_s`` (:class:`_Dense`)); lam: the
    multipliers of the inequality rows, mu: those of the equality rows. It never looks at solver internals.

    * infeasible: Farkas (:func:`_farkas_certificate`) with ``Σ λ_s F_s`` over all rows, ``b^T λ``, and the
      scale ``Σ |λ_s| ‖F_s‖``;
    * fro: primal violation ≤ FEAS_TOL (relative to max(1, |b_s|)), λ ≥ −KKT_TOL max λ, complementarity
      ``max λ_s |slack_s| / max λ`` ≤ KKT_TOL, stationarity ``‖W − Σ λ F‖ / ‖W‖`` ≤ KKT_TOL; the duality gap
      ``|‖W‖² − b^T λ| / ‖W‖²`` is reported, not tested. W = 0 is certified iff feasible and every b_s ≤ 0;
    * nuc: violation ≤ FEAS_TOL, λ ≥ −KKT_TOL max λ, dual norm ``‖Σ λ F‖_2 ≤ 1 + GAP_TOL`` and the gap
      ``|‖W‖_* − b^T λ| / ‖W‖_*`` ≤ GAP_TOL (weak duality: ‖W‖_* ≥ b^T λ / ‖Σ λ F‖_2 for every feasible W).

    (It unifies the former attention-row and vector certifiers, which checked the same conditions with the
    same tolerances; the only difference was the *reported* gap at W = 0, now 0 for both, as it was for
    rows.)
    """
    ineq, eqr = ~rows.eq, rows.eq
    l_full = np.zeros(len(rows.b))
    l_full[ineq] = lam
    l_full[eqr] = mu
    if status == "infeasible":
        return _farkas_certificate(rows.adjoint(l_full), float(rows.b @ l_full), lam,
                                   float(np.abs(l_full) @ rows.row_norms()))
    assert W is not None, "a feasible status carries its W"
    marg = rows.apply(W)
    slack = marg - rows.b
    bs = np.maximum(1.0, np.abs(rows.b))
    viol = max(float(np.max(-slack[ineq] / bs[ineq], initial=-np.inf)),
               float(np.max(np.abs(slack[eqr]) / bs[eqr], initial=0.0)), 0.0)
    lmax = float(np.max(lam, initial=0.0))
    dual_min = float(np.min(lam, initial=0.0)) / max(lmax, 1e-300)
    # relative to max λ (not max(1, max λ)): λ scales like 1/‖F‖² with the data, and an absolute measure let
    # (1.05 W, 1.05 λ) pass on data where ‖W‖ ~ 1e-8 (λ ~ 1e-16): slack 0.05 on the support went unnoticed
    comp = float(np.max(lam * np.abs(slack[ineq]), initial=0.0)) / max(lmax, 1e-300)
    S = rows.adjoint(l_full)
    min_margin = float(np.min(marg[ineq] - rows.b[ineq] + 1.0, initial=np.inf))
    if norm == "fro":
        nW = float(np.linalg.norm(W))
        stat = float(np.linalg.norm(W - S)) / max(nW, 1e-300)
        gap = abs(nW**2 - float(rows.b @ l_full)) / max(nW**2, 1e-300)
        ok = viol <= tol.FEAS_TOL and dual_min >= -tol.KKT_TOL and comp <= tol.KKT_TOL and stat <= tol.KKT_TOL
        if nW == 0.0:
            stat, gap = 0.0, 0.0
            ok = viol <= tol.FEAS_TOL and bool(np.all(rows.b[ineq] <= 0))
        return Certificate("kkt", bool(ok), min_margin=min_margin, primal_residual=viol, dual_min=dual_min,
                           complementarity=comp, stationarity=stat, gap=gap)
    # nuclear: weak duality ‖W‖_* ≥ b^T λ / ‖Σ λ F‖_2 for every feasible W
    nuc = float(np.sum(np.linalg.svd(W, compute_uv=False)))
    dual_norm = float(np.linalg.norm(S, 2))
    dual_obj = float(rows.b @ l_full)
    gap = abs(nuc - dual_obj) / max(nuc, 1e-300)
    ok = (viol <= tol.FEAS_TOL and dual_min >= -tol.KKT_TOL and dual_norm <= 1 + tol.GAP_TOL
          and gap <= tol.GAP_TOL)
    return Certificate("sdp", bool(ok), min_margin=min_margin, primal_residual=viol, dual_min=dual_min,
                       complementarity=comp, dual_norm=dual_norm, gap=gap)


def _farkas_certificate(residual_vec: np.ndarray, btl: float, lam: np.ndarray, scale: float) -> Certificate:
    """λ ≥ 0, b^T λ > 0, ‖Σ λ_s a_s‖ tiny  ⇒  any feasible w has ‖w‖ ≥ b^T λ / ‖Σ λ_s a_s‖."""
    r = float(np.linalg.norm(residual_vec))
    rel = r / max(scale, 1e-300)
    lmax = float(np.max(lam, initial=0.0))
    dual_min = float(np.min(lam, initial=0.0)) / max(lmax, 1e-300)
    bound = np.inf if r == 0 else btl / r
    ok = lmax > 0 and dual_min >= 0 and btl > 0 and rel <= tol.FARKAS_TOL
    return Certificate("farkas", bool(ok), dual_min=dual_min, stationarity=rel, gap=btl,
                       norm_lower_bound=float(bound))


def rank_by_gap(W: np.ndarray | None, rtol: float = tol.RANK_RTOL) -> tuple[int, np.ndarray | None]:
    """rank = #{σ_j > rtol σ_1} (THEORY.md §5), with the singular values."""
    if W is None:
        return 0, None
    s = np.linalg.svd(W, compute_uv=False)
    if s.size == 0 or s[0] == 0:
        return 0, s
    return int(np.sum(s > rtol * s[0])), s


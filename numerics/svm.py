"""Attention SVMs with certificates: the suite's ground truth (THEORY.md §3).

Every program here is a *homogeneous hard-margin SVM*::

    min ½‖w‖²  s.t.  A w ≥ b,  E w = e                                       (core)

solved once, by :func:`_hard_margin_core`, for all of them:

* Att-SVM, Frobenius — ``solve_att_svm(data, alpha, norm="fro")``:
  ``W^mm_α = argmin ‖W‖_F  s.t. (x_{iα_i} − x_it)^T W z_i ≥ 1``;
* Att-SVM⋆, nuclear — ``solve_att_svm(data, alpha, norm="nuc")`` (an SDP, not the core);
* sequence / causal SVM — :func:`solve_seq_svm`;
* Gen-SVM directional and finite parts — :func:`gen_svm`;
* TLZO's p-SVM, relaxed p-SVM and the head SVM — :func:`solve_p_svm`, :func:`solve_head_svm`.

How the core solves (Frobenius): the Lawson–Hanson *least-distance programming* reduction
(Lawson & Hanson, "Solving Least Squares Problems", ch. 23) turns the SVM into one NNLS of size
(p+1) × m: ``min_{u ≥ 0} ‖[A^T; b^T] u − e_{p+1}‖``. The residual r gives ``w = −r_{1:p} / r_{p+1}``
and the dual multipliers ``λ = u / (1 − b^T u)``; a zero residual is exactly a Farkas vector
(``A^T u = 0, b^T u = 1, u ≥ 0``), so infeasibility falls out of the same solve. Att-SVM features
``(x_{iα}−x_it) z_i^T`` are first written in orthonormal bases of span{x-differences} ⊗ span{z_i}
(exact: the optimum lies in the span of the features), then the active set is re-solved by least
squares (polish) and the answer is certified by :func:`certify_att_svm`, which recomputes margins
and stationarity from the raw data and never looks at solver internals.

Support tokens (``SVMSolution.support``) follow THEORY.md's definition T_i(α): tokens whose margin
is within ``ACTIVE_TOL`` of 1 on the certified solution. Multipliers ``lam`` are reported separately;
under degeneracy an active token can carry λ = 0 (``positive_support`` gives the λ > 0 view).

References: TLTO = arXiv 2308.16898 (Att-SVM eq. (Att-SVM), (Att-SVM⋆), Gen-SVM, seq/causal);
TLZO = arXiv 2306.13596 (p-SVM, joint (v, p)).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.optimize import linprog, nnls

from . import tolerances as tol
from .data import AttentionData
from .errors import InvalidInputError, SolverError
from .tokens import resolve_alpha, scores, softmax_probs

__all__ = [
    "Certificate",
    "SVMSolution",
    "VectorSVMSolution",
    "GenSVMResult",
    "NaiveSolution",
    "NUC_LADDER",
    "NUC_LADDER_FULL",
    "solve_att_svm",
    "certify_att_svm",
    "support_tokens",
    "is_locally_optimal",
    "locally_optimal",
    "gen_svm",
    "fit_svmeq",
    "seq_scores",
    "solve_seq_svm",
    "solve_p_svm",
    "solve_head_svm",
    "solve_joint_vp_svm",
    "naive_att_svm",
    "rank_by_gap",
]


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
    attempts: tuple[str, ...] = ()  # nuclear norm: every rung of the solver ladder tried, the last one certified

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"

    @property
    def positive_support(self) -> tuple[np.ndarray, ...]:
        """Tokens with λ > 0 (relative to max λ, above KKT_TOL)."""
        lam = self.lam.reshape(-1, self.lam.shape[-1])
        cut = tol.KKT_TOL * max(float(np.max(self.lam)), 0.0)
        return tuple(np.flatnonzero(row > cut) for row in lam)


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


@dataclass(frozen=True)
class GenSVMResult:
    """Gen-SVM of a trained attention (THEORY.md §3): token sets, directional and finite parts."""

    probs: np.ndarray  # (n, T)
    selected: tuple[np.ndarray, ...]  # O_i = {t : s_it > tau_h}
    masked: tuple[np.ndarray, ...]  # Ō_i = {t : s_it ≤ tau_l}
    ambiguous: bool  # some probability strictly between tau_l and tau_h
    ambiguous_examples: tuple[int, ...]
    directional: SVMSolution  # W^dir (status "infeasible" possible)
    W_dir: np.ndarray | None
    W_fin: np.ndarray
    fin_residual: float  # max |equation residual| of the finite part (0 if consistent)
    tau_h: float
    tau_l: float


@dataclass(frozen=True)
class NaiveSolution:
    """The research-code baseline: per-pair cvxpy loop, default solve (see :func:`naive_att_svm`)."""

    status: str
    W: np.ndarray | None
    objective: float
    rank_abs: int  # the authors' rank: #σ > 1e-7 (absolute)
    seconds: float


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
    """Sharpen a Farkas vector: on its support, replace it by an exact SVD null vector of A_S^T if positive."""
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
        raise SolverError(f"{solver} failed on the Frobenius QP: {exc}", status="error", solver=solver) from None
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
# generic certificate (vector problems): recomputed from A, b, E, e only
# ================================================================================================


def _certify_vector(A, b, E, e, w, lam, mu, status) -> Certificate:
    A = np.asarray(A, float)
    b = np.asarray(b, float)
    E = np.zeros((0, A.shape[1])) if E is None else np.asarray(E, float)
    e = np.zeros(0) if e is None else np.asarray(e, float)
    if status == "infeasible":
        return _farkas_certificate(A.T @ lam + E.T @ mu, float(b @ lam + e @ mu), lam,
                                   float(np.abs(lam) @ np.linalg.norm(A, axis=1)
                                         + np.abs(mu) @ np.linalg.norm(E, axis=1)))
    slack = A @ w - b
    bs = np.maximum(1.0, np.abs(b))
    viol = max(float(np.max(-slack / bs, initial=-np.inf)),
               float(np.max(np.abs(E @ w - e) / np.maximum(1.0, np.abs(e)), initial=0.0)), 0.0)
    nw = float(np.linalg.norm(w))
    stat = float(np.linalg.norm(w - A.T @ lam - E.T @ mu)) / max(nw, 1e-300)
    lmax = float(np.max(lam, initial=0.0))
    dual_min = float(np.min(lam, initial=0.0)) / max(lmax, 1e-300)
    comp = float(np.max(lam * np.abs(slack), initial=0.0)) / max(lmax, 1e-300)  # scale-free (see _certify_rows)
    gap = abs(nw**2 - float(b @ lam + e @ mu)) / max(nw**2, 1e-300)
    ok = viol <= tol.FEAS_TOL and dual_min >= -tol.KKT_TOL and comp <= tol.KKT_TOL and stat <= tol.KKT_TOL
    if nw == 0.0:
        ok = viol <= tol.FEAS_TOL and bool(np.all(b <= 0))
        stat = 0.0
    return Certificate("kkt", bool(ok), min_margin=float(np.min(slack + 1.0, initial=np.inf)),
                       primal_residual=viol, dual_min=dual_min, complementarity=comp, stationarity=stat,
                       gap=gap)


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


# ================================================================================================
# attention-type problems: rows (x_plus − x_minus) z^T
# ================================================================================================


@dataclass(frozen=True)
class _Rows:
    """Constraint rows ⟨Dq_s z_s^T, W⟩ (≥ or =) b_s, in d-space. idx maps each row to (example, token)."""

    D: np.ndarray  # (m, d) key differences
    Zq: np.ndarray  # (m, d) queries
    b: np.ndarray  # (m,)
    eq: np.ndarray  # (m,) bool: equality row


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


def _certify_rows(rows: _Rows, W: np.ndarray | None, lam: np.ndarray, mu: np.ndarray, status: str,
                  norm: str = "fro") -> Certificate:
    """Certificate from the raw rows only (does not trust the solver)."""
    ineq, eqr = ~rows.eq, rows.eq
    l_full = np.zeros(len(rows.b))
    l_full[ineq] = lam
    l_full[eqr] = mu
    rownorm = np.linalg.norm(rows.D, axis=1) * np.linalg.norm(rows.Zq, axis=1)
    if status == "infeasible":
        return _farkas_certificate(_rows_adjoint(rows, l_full), float(rows.b @ l_full), lam,
                                   float(np.abs(l_full) @ rownorm))
    marg = _rows_apply(rows, W)
    slack = marg - rows.b
    bs = np.maximum(1.0, np.abs(rows.b))
    viol = max(float(np.max(-slack[ineq] / bs[ineq], initial=-np.inf)),
               float(np.max(np.abs(slack[eqr]) / bs[eqr], initial=0.0)), 0.0)
    lmax = float(np.max(lam, initial=0.0))
    dual_min = float(np.min(lam, initial=0.0)) / max(lmax, 1e-300)
    # relative to max λ (not max(1, max λ)): λ scales like 1/‖F‖² with the data, and an absolute measure let
    # (1.05 W, 1.05 λ) pass on data where ‖W‖ ~ 1e-8 (λ ~ 1e-16): slack 0.05 on the support went unnoticed
    comp = float(np.max(lam * np.abs(slack[ineq]), initial=0.0)) / max(lmax, 1e-300)
    S = _rows_adjoint(rows, l_full)
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


def rank_by_gap(W: np.ndarray | None, rtol: float = tol.RANK_RTOL) -> tuple[int, np.ndarray | None]:
    """rank = #{σ_j > rtol σ_1} (THEORY.md §5), with the singular values."""
    if W is None:
        return 0, None
    s = np.linalg.svd(W, compute_uv=False)
    if s.size == 0 or s[0] == 0:
        return 0, s
    return int(np.sum(s > rtol * s[0])), s


def _att_rows(data: AttentionData, alpha: np.ndarray) -> tuple[_Rows, np.ndarray]:
    """Att-SVM rows for all (i, t ≠ α_i); returns rows and the (n, T) boolean mask of constrained tokens."""
    n, T, _ = data.X.shape
    D = data.X[np.arange(n), alpha][:, None, :] - data.X  # (n, T, d)
    mask = np.ones((n, T), dtype=bool)
    mask[np.arange(n), alpha] = False
    Zq = np.broadcast_to(data.Z[:, None, :], D.shape)[mask]  # (m, d)
    m = int(mask.sum())
    return _Rows(D[mask], np.ascontiguousarray(Zq), np.ones(m), np.zeros(m, dtype=bool)), mask


#: The nuclear-norm ladder (Att-SVM⋆): rungs tried in order until an answer passes the independent SDP
#: certificate (:func:`_certify_rows`; its tolerances are never loosened). A rung is (solver, formulation):
#:
#: * "clarabel" — the dual SDP ``max b^T λ s.t. λ ≥ 0, ‖Σ λ_s F_s‖_2 ≤ 1`` at tight settings (fast; the default);
#: * "clarabel-tight" — the same dual at tighter tolerances and a larger iteration cap;
#: * "clarabel-primal" — the primal ``min ‖M‖_* s.t. ⟨F_s, M⟩ ≥ b_s`` (cvxpy normNuc);
#: * "scs" — the primal by SCS (first order) at eps 1e-9, then polished;
#:
#: formulation "reduced": W = U M V^T in orthonormal bases of span{key differences} ⊗ span{z_i} (exact:
#: every minimiser lies there, THEORY.md §3); "full": the unreduced SDP over all of R^{d×d} (U = V = I), which
#: does not build the span structure in and so serves as an independent reference
#: (``solve_att_svm(..., norm="nuc", formulation="full")``). Every rung's answer is Newton-polished on its
#: numerical rank and active set (:func:`_nuclear_polish`); if the polished answer does not certify, the rung's
#: raw interior-point answer is certified instead (its name then lacks "+polish"). The rung that certified is
#: recorded in ``SVMSolution.solver`` and every attempt in ``SVMSolution.attempts``.
NUC_LADDER: tuple[tuple[str, str], ...] = (
    ("clarabel", "reduced"),
    ("clarabel-tight", "reduced"),
    ("clarabel-primal", "reduced"),
    ("scs", "reduced"),
    ("clarabel-primal", "full"),
    ("clarabel", "full"),
    ("scs", "full"),
)
#: The rungs of ``formulation="full"``: unreduced only, so the reference never falls back to the reduced SDP.
NUC_LADDER_FULL: tuple[tuple[str, str], ...] = tuple(r for r in NUC_LADDER if r[1] == "full")
NUC_SOLVERS = ("clarabel", "clarabel-tight", "clarabel-primal", "scs")
FORMULATIONS = ("reduced", "full")

#: The polish is kept only if its residual (optimality system of the factored problem) falls below this,
#: relative to max(1, ‖M‖_F): a converged Gauss–Newton solve reaches ~1e-15; 1e-10 rejects a stalled one
#: (which can sit at a slightly scaled, non-optimal point that fails the duality-gap certificate).
POLISH_RTOL = 1e-10


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
    features are first rescaled by an exact power of two (:data:`FEATURE_SCALE_BAND`) and the answer mapped back.
    """
    kappa = _feature_scale(rows)
    if kappa == 1.0:
        return _solve_rows_unit(rows, norm=norm, solver=solver, reduce=reduce, rungs=rungs)
    status, W, lam, mu, name, attempts = _solve_rows_unit(replace(rows, D=rows.D * kappa), norm=norm,
                                                          solver=solver, reduce=reduce, rungs=rungs)
    if status == "optimal":  # ⟨κF, W'⟩ ≥ b  ⇔  ⟨F, κW'⟩ ≥ b; multipliers: W = Σ λ F (fro), S = Σ λ F (nuc)
        lam_k = kappa**2 if norm == "fro" else kappa
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
    core = _hard_margin_core(F[ineq], rows.b[ineq], F[rows.eq], rows.b[rows.eq],
                             solver=None if norm == "nuc" else solver)
    if core.status == "infeasible" or norm == "fro":
        W = None if core.w is None else U @ core.w.reshape(U.shape[1], V.shape[1]) @ V.T
        return core.status, W, core.lam, core.mu, core.solver, ()
    if rows.eq.any():
        raise InvalidInputError("nuclear-norm SVM with equality rows is not supported; use norm='fro'")
    if rungs is None:
        rungs = NUC_LADDER if reduce else NUC_LADDER_FULL
    cache = {"reduced" if reduce else "full": (U, V, F)}
    W, lam, name, attempts = _solve_nuclear_ladder(rows, rungs, cache)
    return "optimal", W, lam, np.zeros(0), name, attempts


def _solve_nuclear_ladder(rows: _Rows, rungs, cache: dict) -> tuple[np.ndarray, np.ndarray, str, tuple[str, ...]]:
    """Climb the ladder: the first rung whose (polished, else raw) answer certifies wins.

    Raises :class:`SolverError` listing every attempt if none certifies; its ``status`` is "uncertified"
    when every rung returned an answer, else the last solver status seen.
    """
    d = rows.D.shape[1]
    attempts: list[str] = []
    status = "uncertified"
    for key, form in rungs:
        label = f"{key}+{form}"
        if form not in cache:
            U, V = _bases(rows) if form == "reduced" else (np.eye(d), np.eye(d))
            cache[form] = (U, V, _reduced_features(rows, U, V))
        U, V, F = cache[form]
        try:
            M_raw, lam_raw, st = _nuclear_sdp(F, rows.b, U.shape[1], V.shape[1], key)
        except SolverError as exc:
            attempts.append(f"{label}: solver failed, status {exc.status!r}")
            status = str(exc.status)
            continue
        cands = []
        try:
            M_p, lam_p, polished = _nuclear_polish(F, rows.b, M_raw, lam_raw, U.shape[1], V.shape[1])
            if polished:
                cands.append((M_p, lam_p, label + "+polish"))
        except np.linalg.LinAlgError:  # SVD/lstsq did not converge: the raw answer may still certify
            pass
        cands.append((M_raw, lam_raw, label))
        fails = []
        for M, lam, name in cands:
            W = U @ M @ V.T
            cert = _certify_rows(rows, W, lam, np.zeros(0), "optimal", "nuc")
            if cert.verified:
                attempts.append(f"{name}: certified")
                return W, lam, name, tuple(attempts)
            fails.append(f"{name}: solver status {st!r}, {cert.summary()}")
        attempts.append("; ".join(fails))
        status = "uncertified"
    raise SolverError("nuclear-norm SVM: no rung of the solver ladder certified an answer ("
                      + " | ".join(attempts) + ")", status=status,
                      solver="ladder[" + ", ".join(f"{k}+{f}" for k, f in rungs) + "]")


def _nuclear_sdp(F, b, r1, r2, key):
    """One SDP solve of the nuclear-norm SVM in coordinates M (r1 × r2); returns (M, λ, solver status).

    key "clarabel" / "clarabel-tight": the *dual* SDP ``max b^T λ s.t. λ ≥ 0, [[I, S(λ)], [S(λ)^T, I]] ⪰ 0``
    with S(λ) = Σ λ_s F_s (n(T−1) variables: ~4× faster than the primal), M = −2 × (the off-diagonal block of
    the PSD multiplier). "clarabel-primal" / "scs": the primal ``min ‖M‖_* s.t. F vec(M) ≥ b`` (cvxpy
    normNuc), λ from the constraint multipliers. Raises :class:`SolverError` on a solver failure or a status
    other than optimal / optimal_inaccurate (the answer is certified by the caller either way).
    """
    import cvxpy as cp

    if key not in NUC_SOLVERS:
        raise InvalidInputError(f"nuclear solver must be one of {', '.join(NUC_SOLVERS)}, got {key!r}")
    name = "SCS" if key == "scs" else "CLARABEL"
    if key in ("clarabel", "clarabel-tight"):
        lam_v = cp.Variable(F.shape[0], nonneg=True)
        S = cp.reshape(F.T @ lam_v, (r1, r2), order="C")
        con = cp.bmat([[np.eye(r1), S], [S.T, np.eye(r2)]]) >> 0
        prob = cp.Problem(cp.Maximize(b @ lam_v), [con])
    else:
        M = cp.Variable((r1, r2))
        con = F @ cp.vec(M, order="C") >= b
        prob = cp.Problem(cp.Minimize(cp.normNuc(M)), [con])
    settings = _tight_settings(name)
    if key == "clarabel-tight":
        settings.update(tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, tol_ktratio=1e-10, max_iter=2000)
    try:
        with warnings.catch_warnings():  # "may be inaccurate": the status is checked and the answer certified
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=name, **settings)
    except cp.error.SolverError as exc:
        raise SolverError(f"{name} failed on the nuclear-norm SDP: {exc}", status="error", solver=key) from None
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"{name} returned status {prob.status!r} on the nuclear-norm SDP; expected 'optimal'",
                          status=prob.status, solver=key)
    if key in ("clarabel", "clarabel-tight"):
        lam = np.maximum(np.asarray(lam_v.value, dtype=float), 0.0)
        Zd = np.asarray(con.dual_value, dtype=float)
        Mv = -(Zd[:r1, r1:] + Zd[r1:, :r1].T)  # −2 × symmetrised off-diagonal block
    else:
        Mv = np.asarray(M.value, dtype=float)
        lam = np.maximum(np.asarray(con.dual_value, dtype=float).ravel(), 0.0)
    return Mv, lam, str(prob.status)


def _nuclear_polish(F, b, M, lam, r1, r2):
    """Newton-polish the SDP answer on its numerical rank k and active set A (λ_s > 1e-7 max λ).

    With M = K L^T (K, L of k columns) and S(λ) = Σ_{s∈A} λ_s F_s, the optimality conditions of the
    factored problem min ½(‖K‖² + ‖L‖²) s.t. ⟨F_s, K L^T⟩ = b_s (s ∈ A) are the square system
    K = S L, L = S^T K, ⟨F_s, K L^T⟩ = b_s. It is invariant under K, L → K R, L R for orthogonal R, so
    its Jacobian is singular along (K A, L A), A skew; the Gauss–Newton steps are taken orthogonal to
    those gauge directions (extra rows), else a near-singular Jacobian sends the step far along them and
    the iteration stalls. From the interior-point answer it converges in a few steps; the result has
    exact rank ≤ k, so the rank no longer depends on how small the solver drove the tail.

    Returns (M, λ, polished): the polished answer if it converged (residual ≤ POLISH_RTOL), is feasible,
    λ ≥ 0 and ‖S‖_2 ≤ 1 to 1e-12 — else the input and False. The certificate is computed afterwards anyway.
    """
    P, sv, Qt = np.linalg.svd(M, full_matrices=False)
    if sv.size == 0 or sv[0] == 0:
        return M, lam, False
    k = int(np.sum(sv > tol.RANK_RTOL * sv[0]))
    act = np.flatnonzero(lam > 1e-7 * max(float(lam.max()), 1e-300))
    if act.size == 0:
        return M, lam, False
    Fa = F[act].reshape(-1, r1, r2)  # (a, r1, r2)
    ba = b[act]
    K = P[:, :k] * np.sqrt(sv[:k])
    L = Qt[:k].T * np.sqrt(sv[:k])
    la = lam[act].copy()
    nK, nL, na = r1 * k, r2 * k, act.size
    N = nK + nL + na
    skew = [(p, q) for p in range(k) for q in range(p + 1, k)]

    def residual(K, L, la):
        S = np.einsum("s,sij->ij", la, Fa)
        return np.concatenate([(K - S @ L).ravel(), (L - S.T @ K).ravel(),
                               np.einsum("sij,ij->s", Fa, K @ L.T) - ba]), S

    r, S = residual(K, L, la)
    for _ in range(20):
        FL = np.einsum("sij,ja->sia", Fa, L).reshape(na, -1)  # (a, r1 k): vec(F_s L)
        FK = np.einsum("sij,ia->sja", Fa, K).reshape(na, -1)  # (a, r2 k): vec(F_s^T K)
        J = np.zeros((N + len(skew), N))
        J[:nK, :nK] = np.eye(nK)
        J[:nK, nK:nK + nL] = -np.kron(S, np.eye(k))
        J[:nK, nK + nL:] = -FL.T
        J[nK:nK + nL, :nK] = -np.kron(S.T, np.eye(k))
        J[nK:nK + nL, nK:nK + nL] = np.eye(nL)
        J[nK:nK + nL, nK + nL:] = -FK.T
        J[nK + nL:N, :nK] = FL
        J[nK + nL:N, nK:nK + nL] = FK
        for g, (p, q) in enumerate(skew):  # gauge rows: the step is orthogonal to (K A_pq, L A_pq)
            KA = np.zeros_like(K)
            LA = np.zeros_like(L)
            KA[:, p], KA[:, q] = K[:, q], -K[:, p]
            LA[:, p], LA[:, q] = L[:, q], -L[:, p]
            row = np.concatenate([KA.ravel(), LA.ravel()])
            J[N + g, :nK + nL] = row / max(float(np.linalg.norm(row)), 1e-300)
        step = np.linalg.lstsq(J, -np.concatenate([r, np.zeros(len(skew))]), rcond=None)[0]
        for t in (1.0, 0.5, 0.25, 0.125):  # backtracking on ‖residual‖
            K2 = K + t * step[:nK].reshape(r1, k)
            L2 = L + t * step[nK:nK + nL].reshape(r2, k)
            la2 = la + t * step[nK + nL:]
            r2_, S2 = residual(K2, L2, la2)
            if np.linalg.norm(r2_) < np.linalg.norm(r):
                break
        else:
            break
        K, L, la, r, S = K2, L2, la2, r2_, S2
        if np.linalg.norm(r) <= 1e-15 * max(1.0, float(np.linalg.norm(K @ L.T))):
            break
    Mp = K @ L.T
    lam_p = np.zeros_like(lam)
    lam_p[act] = la
    ok = (np.linalg.norm(r) <= POLISH_RTOL * max(1.0, float(np.linalg.norm(Mp)))
          and np.min(la) >= 0 and float(np.min(F @ Mp.ravel() - b)) >= -1e-12
          and np.linalg.norm(S, 2) <= 1 + 1e-12)
    return (Mp, lam_p, True) if ok else (M, lam, False)


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
    return _certify_rows(rows, W, lam[mask], np.zeros(0), status, norm)


def solve_att_svm(data: AttentionData, alpha: Any = None, *, norm: str = "fro", m: int | None = None,
                  solver: str | None = None, exact: bool = False, formulation: str = "reduced") -> SVMSolution:
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
        raise InvalidInputError("exact=True is available for norm='fro' only (the nuclear SDP has no exact mode)")
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
    cert = _certify_rows(rows, W, lam_r, np.zeros(0), status, norm)
    if exact:
        cert = _exact_att(data, a, rows, lam_r, status, cert)
    return _finish(status, W, lam, mask, rows, cert, name, t0, a, norm, m, data.n, attempts)


def _finish(status, W, lam, mask, rows, cert, name, t0, a, norm, m, n, attempts=()) -> SVMSolution:
    if not cert.verified:
        raise SolverError(f"{name}: the {cert.kind} certificate did not verify ({cert.summary()}); "
                          "try another solver", status="uncertified", solver=name)
    notes = []
    marg = np.full(mask.shape, np.inf)
    if W is not None:
        marg[mask] = _rows_apply(rows, W)
    support = tuple(np.flatnonzero(np.abs(row - 1.0) <= tol.ACTIVE_TOL) for row in marg.reshape(-1, mask.shape[-1]))
    rank, sv = rank_by_gap(W)
    if W is None:
        obj = float("inf")
    elif norm == "fro":
        obj = float(np.linalg.norm(W))
    else:
        obj = float(np.sum(sv))
    if m is not None:
        if norm == "fro":
            notes.append("rank cap m is ignored for the Frobenius problem")
        elif m < n:
            notes.append(f"m={m} < n={n}: the rank-constrained problem is non-convex; solved its convex relaxation")
        if W is not None and norm == "nuc" and rank > m:
            notes.append(f"relaxation rank {rank} exceeds the cap m={m}")
    return SVMSolution(status=status, W=W, objective=obj, lam=lam, support=support, rank=rank, certificate=cert,
                       solver=name, seconds=time.perf_counter() - t0, alpha=a, norm=norm, singular_values=sv,
                       margins=marg, notes=tuple(notes), attempts=tuple(attempts))


# ---- exact rational proof -----------------------------------------------------------------------


def _dyadic(a: np.ndarray) -> tuple[list, int]:
    """Floats → Python ints times 2^-K exactly (every float64 is a dyadic rational)."""
    fr = [Fraction(float(x)) for x in np.asarray(a, dtype=float).ravel()]
    K = max((f.denominator.bit_length() - 1 for f in fr), default=0)
    return [int(f * (1 << K)) for f in fr], K


def _rref(M: list[list[Fraction]], ncols: int) -> tuple[list[list[Fraction]], list[int]]:
    """Reduced row echelon form over Q of an augmented matrix (pivots searched in the first ncols)."""
    M = [row[:] for row in M]
    piv, r = [], 0
    for c in range(ncols):
        p = next((i for i in range(r, len(M)) if M[i][c] != 0), None)
        if p is None:
            continue
        M[r], M[p] = M[p], M[r]
        inv = 1 / M[r][c]
        M[r] = [x * inv for x in M[r]]
        for i in range(len(M)):
            if i != r and M[i][c] != 0:
                f = M[i][c]
                M[i] = [x - f * y for x, y in zip(M[i], M[r], strict=True)]
        piv.append(c)
        r += 1
    return M, piv


def _solve_exact(G: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """Solve G x = rhs over Q (free variables 0). None if inconsistent."""
    k = len(rhs)
    R, piv = _rref([row[:] + [rhs[i]] for i, row in enumerate(G)], k)
    if any(R[i][k] != 0 for i in range(len(piv), k)):
        return None
    x = [Fraction(0)] * k
    for i, c in enumerate(piv):
        x[c] = R[i][k]
    return x


def _exact_att(data, a, rows: _Rows, lam: np.ndarray, status: str, cert: Certificate) -> Certificate:
    """Prove optimality (or infeasibility) in exact arithmetic on the float data converted exactly.

    Optimal: with S = {λ_s > 0}, solve G_SS λ_S = 1 over Q (G = Gram of features), set
    W = Σ_S λ_s F_s; proved iff λ_S ≥ 0 and every margin G_{s,S} λ_S ≥ 1 (KKT, exactly).
    Infeasible: proved iff the Farkas support has an exact null vector λ_S > 0 of G_SS (Σλ F = 0).
    """
    Dint, K1 = _dyadic(rows.D)
    Zint, K2 = _dyadic(rows.Zq)
    m, d = rows.D.shape
    Dr = [Dint[s * d:(s + 1) * d] for s in range(m)]
    Zr = [Zint[s * d:(s + 1) * d] for s in range(m)]
    scale = 1 << (2 * (K1 + K2))  # features F_s = (D_int z_int^T) / 2^(K1+K2); Gram scaled by scale

    def gram(s, t):
        return sum(x * y for x, y in zip(Dr[s], Dr[t], strict=True)) * sum(
            x * y for x, y in zip(Zr[s], Zr[t], strict=True))

    S = [int(s) for s in np.flatnonzero(lam > 1e-9 * max(float(np.max(lam, initial=0.0)), 1e-300))]
    if not S:
        return _replace(cert, exact=False, message="exact: empty support")
    GSS = [[Fraction(gram(s, t)) for t in S] for s in S]
    if status == "optimal":
        x = _solve_exact(GSS, [Fraction(scale)] * len(S))  # λ scaled: G/scale λ = 1
        if x is None:
            return _replace(cert, exact=False, message="exact: active-set system inconsistent")
        if any(v < 0 for v in x):
            return _replace(cert, exact=False, message="exact: a multiplier is negative")
        for t in range(m):
            if sum(gram(t, s) * v for s, v in zip(S, x, strict=True)) < scale:
                return _replace(cert, exact=False, message=f"exact: constraint row {t} has margin < 1")
        return _replace(cert, exact=True, message="exact: KKT proved over Q")
    # infeasible: G_SS λ = 0 with λ ≥ 0, λ ≠ 0 means ‖Σ λ_s F_s‖² = λ^T G λ = 0, i.e. Σ λ_s F_s = 0
    k = len(S)
    R, piv = _rref(GSS, k)
    free = [c for c in range(k) if c not in piv]
    if len(free) == 1:
        v = [Fraction(0)] * k
        v[free[0]] = Fraction(1)
        for i, c in enumerate(piv):
            v[c] = -R[i][free[0]]
        if all(x >= 0 for x in v) or all(x <= 0 for x in v):
            return _replace(cert, exact=True, message="exact: Farkas vector proved over Q")
    return _replace(cert, exact=False, message=f"exact: support null space has dimension {len(free)}, "
                    "no nonnegative exact Farkas vector found")


def _replace(cert: Certificate, **kw) -> Certificate:
    return replace(cert, **kw)


# ================================================================================================
# local optimality
# ================================================================================================


def support_tokens(data: AttentionData, alpha: Any, sol: SVMSolution | None = None) -> tuple[np.ndarray, ...]:
    """T_i(α) = {t ≠ α_i : (x_{iα_i} − x_it)^T W^mm_α z_i = 1} (within ACTIVE_TOL). Empty tuple if infeasible."""
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
    return all(bool(np.all(g[i, a[i]] - g[i, np.asarray(T, dtype=int)] > tol.TIE_TOL)) for i, T in enumerate(support))


# ================================================================================================
# Gen-SVM
# ================================================================================================


def gen_svm(data: AttentionData, W_or_probs: Any, *, kind: str = "auto", tau_h: float = tol.TAU_H,
            tau_l: float = tol.TAU_L) -> GenSVMResult:
    """Gen-SVM of a trained attention (THEORY.md §3, TLTO's general SVM equivalence).

    W_or_probs: the trained W (d, d) or the softmax probabilities (n, T); kind="W"|"probs" decides
    when the shape is ambiguous (n = T = d). Selected O_i = {s_it > tau_h}, masked Ō_i = {s_it ≤ tau_l};
    probabilities strictly between make the instance ``ambiguous`` (such tokens enter no constraint).

    W_dir = argmin ‖W‖_F s.t. (x_it − x_iτ)^T W z_i = 0 (t, τ ∈ O_i), ≥ 1 (t ∈ O_i, τ ∈ Ō_i);
    W_fin = argmin ‖W‖_F s.t. (x_iτ − x_it)^T W z_i = log(s_iτ / s_it) (t, τ ∈ O_i) (least squares).
    """
    arr = np.asarray(W_or_probs, dtype=float)
    n, T, d = data.n, data.T, data.d
    if kind == "auto":
        if arr.shape == (d, d) and arr.shape == (n, T):
            raise InvalidInputError("W_or_probs has shape (d, d) = (n, T); pass kind='W' or kind='probs'")
        kind = "W" if arr.shape == (d, d) else "probs"
    if kind == "W":
        if arr.shape != (d, d):
            raise InvalidInputError(f"W must have shape ({d}, {d}), got {arr.shape}")
        probs = softmax_probs(data, arr)
    elif kind == "probs":
        if arr.shape != (n, T):
            raise InvalidInputError(f"probs must have shape ({n}, {T}), got {arr.shape}")
        probs = arr
    else:
        raise InvalidInputError(f"kind must be 'auto', 'W' or 'probs', got {kind!r}")
    sel = tuple(np.flatnonzero(p > tau_h) for p in probs)
    msk = tuple(np.flatnonzero(p <= tau_l) for p in probs)
    amb = tuple(i for i, p in enumerate(probs) if np.any((p > tau_l) & (p <= tau_h)))
    Zq = data.Z
    Dl, Zl, bl, eql, fin_D, fin_Z, fin_b = [], [], [], [], [], [], []
    for i in range(n):
        O, Ob = sel[i], msk[i]
        t0 = O[0]
        for t in O[1:]:
            Dl.append(data.X[i, t0] - data.X[i, t])
            Zl.append(Zq[i])
            bl.append(0.0)
            eql.append(True)
            fin_D.append(data.X[i, t0] - data.X[i, t])
            fin_Z.append(Zq[i])
            fin_b.append(float(np.log(probs[i, t0] / probs[i, t])))
        for t in O:
            for tau in Ob:
                Dl.append(data.X[i, t] - data.X[i, tau])
                Zl.append(Zq[i])
                bl.append(1.0)
                eql.append(False)
    t_start = time.perf_counter()
    if Dl:
        rows = _Rows(np.array(Dl), np.array(Zl), np.array(bl), np.array(eql, dtype=bool))
        status, W, lam_r, mu, name, _ = _solve_rows(rows, norm="fro", solver=None)
        cert = _certify_rows(rows, W, lam_r, mu, status, "fro")
    else:
        rows = _Rows(np.zeros((0, d)), np.zeros((0, d)), np.zeros(0), np.zeros(0, dtype=bool))
        status, W, lam_r, name = "optimal", np.zeros((d, d)), np.zeros(0), "trivial"
        cert = Certificate("kkt", True, message="no constraints")
    if not cert.verified:
        raise SolverError(f"Gen-SVM directional part: certificate did not verify ({cert.summary()})",
                          status="uncertified", solver=name)
    rank, sv = rank_by_gap(W)
    directional = SVMSolution(status=status, W=W, objective=float(np.linalg.norm(W)) if W is not None else np.inf,
                              lam=lam_r, support=(), rank=rank, certificate=cert, solver=name,
                              seconds=time.perf_counter() - t_start, alpha=np.array([s[0] for s in sel]),
                              singular_values=sv)
    if fin_D:
        Ff = np.einsum("md,me->mde", np.array(fin_D), np.array(fin_Z)).reshape(len(fin_b), -1)
        wf, *_ = np.linalg.lstsq(Ff, np.array(fin_b), rcond=None)  # minimum-norm solution
        W_fin = wf.reshape(d, d)
        fin_res = float(np.max(np.abs(Ff @ wf - np.array(fin_b))))
    else:
        W_fin, fin_res = np.zeros((d, d)), 0.0
    return GenSVMResult(probs=probs, selected=sel, masked=msk, ambiguous=bool(amb), ambiguous_examples=amb,
                        directional=directional, W_dir=W, W_fin=W_fin, fin_residual=fin_res, tau_h=tau_h,
                        tau_l=tau_l)


def fit_svmeq(W_fin: Any, W_dir: Any, W_gd: Any) -> tuple[float, np.ndarray]:
    """W^svmeq = W_fin + R W_dir with R = argmin_R ‖W_fin + R W_dir − W_gd‖_F; returns (R, W^svmeq)."""
    W_fin, W_dir, W_gd = (np.asarray(x, dtype=float) for x in (W_fin, W_dir, W_gd))
    nd = float(np.sum(W_dir * W_dir))
    R = 0.0 if nd == 0 else float(np.sum(W_dir * (W_gd - W_fin)) / nd)
    return R, W_fin + R * W_dir


# ================================================================================================
# sequence and causal SVMs
# ================================================================================================


def seq_scores(X: Any, Y: Any, v: Any) -> np.ndarray:
    """γ_ikt = Y_ik v^T x_it: score of key t for query position k, shape (n, T, T)."""
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    return Y[:, :, None] * (X @ np.asarray(v, dtype=float))[:, None, :]


def solve_seq_svm(X: Any, gamma: Any, *, causal: bool = False, alpha: Any = None,
                  solver: str | None = None) -> SVMSolution:
    """Sequence (causal) Att-SVM: every position k is a query z_ik = x_ik with its own optimal key::

        min ‖W‖_F  s.t.  (x_{iα_ik} − x_it)^T W x_ik ≥ 1   for t ≠ α_ik  (t ≤ k if causal).

    gamma (n, T, T): key scores γ_ikt (see :func:`seq_scores`); alpha (n, T) defaults to the best
    allowed key per query. Causal position k = 0 has one key and gives no constraint.
    Result arrays use [i, k, t]: lam (n, T, T), margins (n, T, T); support is row-major over (i, k).
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
            raise InvalidInputError(f"alpha must be integer indices of shape ({n}, {T}), got {a.shape} {a.dtype}")
        if np.any(a < 0) or np.any(a >= T) or not np.all(np.take_along_axis(allowed, a[:, :, None], 2)):
            raise InvalidInputError("alpha entries must be allowed keys (0..T-1, and t ≤ k if causal)")
    mask = allowed.copy()
    ii, kk = np.meshgrid(np.arange(n), np.arange(T), indexing="ij")
    mask[ii, kk, a] = False  # (n, T, T): constrained (i, k, t)
    D = X[ii, a][:, :, None, :] - X[:, None, :, :]  # (n, T, T, d): x_{iα_ik} − x_it
    Zq = np.broadcast_to(X[:, :, None, :], D.shape)  # query x_ik
    msz = int(mask.sum())
    rows = _Rows(D[mask], np.ascontiguousarray(Zq[mask]), np.ones(msz), np.zeros(msz, dtype=bool))
    if msz == 0:
        raise InvalidInputError("the sequence SVM has no constraints (T = 1 or every query sees one key)")
    status, W, lam_r, _, name, _ = _solve_rows(rows, norm="fro", solver=solver)
    lam = np.zeros(mask.shape)
    lam[mask] = lam_r
    cert = _certify_rows(rows, W, lam_r, np.zeros(0), status, "fro")
    return _finish(status, W, lam, mask, rows, cert, name, t0, a, "fro", None, n)


# ================================================================================================
# TLZO: p-SVM, head SVM, joint (v, p)
# ================================================================================================


def _vector_solve(A, b, t0, solver, lam_shape, lam_index, support_fn) -> VectorSVMSolution:
    core = _hard_margin_core(A, b, solver=solver)
    cert = _certify_vector(A, b, None, None, core.w, core.lam, core.mu, core.status)
    if not cert.verified:
        raise SolverError(f"{core.solver}: certificate did not verify ({cert.summary()})", status="uncertified",
                          solver=core.solver)
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
        raise InvalidInputError("the head SVM on the selected tokens is infeasible; the joint (v, p) limit is undefined")
    rhs = np.zeros(n)
    rhs[v.support] = 1.0
    p = solve_p_svm(X if keys is None else keys, a, rhs=rhs)
    return v, p


# ================================================================================================
# naive baseline (the research-code habit; for benchmarks and cross-checks only)
# ================================================================================================


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


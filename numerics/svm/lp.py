"""ℓp-AttSVM: the attention SVM under the entrywise ℓp norm, the limit of ℓp mirror descent.

``W^mm_{α,p} = argmin ‖W‖_p  s.t. (x_{iα_i} − x_it)^T W z_i ≥ 1  ∀ i, t ≠ α_i``, with
``‖W‖_p = (Σ_ab |W_ab|^p)^{1/p}`` (Julistiono, Tarzanagh, Azizan, arXiv 2410.14581: ℓp-AttGD, the mirror
descent with potential ψ(W) = (1/p) Σ |W_ab|^p, converges in direction to this solution). p = 2 is the
Frobenius Att-SVM.

The entrywise ℓp norm is not invariant under rotations, so unlike the Frobenius and nuclear problems the
solution need not lie in span{key differences} ⊗ span{z_i}: the program is solved over all of R^{d×d}
(cvxpy ``pnorm``, a power-cone program; Clarabel with tight settings, then SCS). Feasibility does not depend
on the norm and is decided by the certified Frobenius core, so an infeasible instance gets the same Farkas
certificate as :func:`~numerics.svm.solve_att_svm`.

Certificate (kind ``"lp"``, from the raw rows only, never the solver's internals): with F_s = D_s z_s^T the
rows and λ ≥ 0 their multipliers, weak duality gives for every feasible W

    ‖W‖_p ≥ Σ_s λ_s ⟨F_s, W⟩ / ‖Σ_s λ_s F_s‖_q ≥ Σ_s λ_s / ‖Σ_s λ_s F_s‖_q,   1/p + 1/q = 1

(Hölder), so the answer is optimal to relative accuracy GAP_TOL when its margins are ≥ 1 − FEAS_TOL, λ ≥ 0,
the dual norm ``‖Σ λ F‖_q ≤ 1 + GAP_TOL`` and the gap ``|‖W‖_p − Σ λ| / ‖W‖_p ≤ GAP_TOL``. The primal answer
is first scaled by 1 / min(1, min margin) (exactly feasible again; the objective rises by the violation, which
the gap then has to absorb).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from .. import tolerances as tol
from ..data import AttentionData
from ..errors import InvalidInputError, SolverError
from ..tokens import resolve_alpha
from .att import _att_rows, _finish, _solve_rows
from .core import Certificate, SVMSolution, _certify, _Rows, _tight_settings

#: Solvers tried in order until one answer certifies (tolerances are never loosened).
LP_SOLVERS = ("CLARABEL", "SCS")


def dual_exponent(p: float) -> float:
    """q with 1/p + 1/q = 1."""
    return p / (p - 1.0)


def lp_norm(W: np.ndarray, p: float) -> float:
    """The entrywise ℓp norm (Σ |W_ab|^p)^{1/p}, computed scaled by max |W_ab| (no overflow for large p)."""
    a = np.abs(np.asarray(W, dtype=float)).ravel()
    top = float(np.max(a, initial=0.0))
    if top == 0.0:
        return 0.0
    return top * float(np.sum((a / top) ** p)) ** (1.0 / p)


def check_p(p: Any) -> float:
    """p as a float > 1 (the mirror map is strictly convex and the norm smooth only for p > 1)."""
    try:
        val = float(p)
    except (TypeError, ValueError):
        raise InvalidInputError(f"p must be a number > 1, got {p!r}") from None
    if not np.isfinite(val) or val <= 1.0:
        raise InvalidInputError(f"p must be a finite number > 1, got {p!r}")
    return val


def certify_lp(rows: _Rows, W: np.ndarray, lam: np.ndarray, p: float) -> Certificate:
    """The ℓp certificate of the module docstring, from the rows, W and the multipliers λ (one per row)."""
    marg = rows.apply(W)
    viol = max(float(np.max(1.0 - marg, initial=-np.inf)), 0.0)
    lmax = float(np.max(lam, initial=0.0))
    dual_min = float(np.min(lam, initial=0.0)) / max(lmax, 1e-300)
    comp = float(np.max(lam * np.abs(marg - 1.0), initial=0.0)) / max(lmax, 1e-300)
    S = rows.adjoint(lam)
    dual_norm = lp_norm(S, dual_exponent(p))
    primal = lp_norm(W, p)
    gap = abs(primal - float(np.sum(lam))) / max(primal, 1e-300)
    ok = (viol <= tol.FEAS_TOL and dual_min >= -tol.KKT_TOL and dual_norm <= 1 + tol.GAP_TOL
          and gap <= tol.GAP_TOL)
    return Certificate("lp", bool(ok), min_margin=float(np.min(marg, initial=np.inf)), primal_residual=viol,
                       dual_min=dual_min, complementarity=comp, dual_norm=dual_norm, gap=gap,
                       message=f"p={p:g}")


def _solve_cvxpy(rows: _Rows, p: float, solver: str) -> tuple[str, np.ndarray | None, np.ndarray]:
    import cvxpy as cp

    d = rows.D.shape[1]
    A = (rows.D[:, :, None] * rows.Zq[:, None, :]).reshape(len(rows.b), d * d)  # row s = vec(D_s z_s^T)
    w = cp.Variable(d * d)
    cons = [A @ w >= 1.0]
    prob = cp.Problem(cp.Minimize(cp.pnorm(w, p)), cons)  # type: ignore[arg-type]  # cvxpy takes any p >= 1
    try:
        with warnings.catch_warnings():  # "may be inaccurate": the certificate decides, not the warning
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=solver, **_tight_settings(solver))
    except cp.error.SolverError as exc:
        return f"solver error: {exc}", None, np.zeros(len(rows.b))
    if prob.status not in ("optimal", "optimal_inaccurate") or w.value is None:
        return str(prob.status), None, np.zeros(len(rows.b))
    lam = np.maximum(np.asarray(cons[0].dual_value, dtype=float).ravel(), 0.0)
    return str(prob.status), np.asarray(w.value, dtype=float).reshape(d, d), lam


def solve_lp_att_svm(data: AttentionData, alpha: Any = None, *, p: float, solver: str | None = None
                     ) -> SVMSolution:
    """ℓp-AttSVM ``argmin ‖W‖_p s.t. (x_{iα_i} − x_it)^T W z_i ≥ 1`` (entrywise ℓp, p > 1), certified.

    alpha=None selects the optimal tokens (needs the head v). solver: "clarabel" or "scs" (default: Clarabel,
    then SCS, until an answer certifies). Returns an :class:`SVMSolution` with ``norm="lp"`` and
    ``objective = ‖W‖_p``; infeasible instances return the Frobenius core's Farkas answer. An answer that does
    not certify raises :class:`SolverError` with every solver's status.

    >>> X = np.array([[[1.0, 0.0], [0.0, 0.0]]]); Z = np.array([[0.0, 2.0]])
    >>> sol = solve_lp_att_svm(AttentionData(X, [1.0], Z), alpha=[0], p=3.0)
    >>> sol.status, round(sol.objective, 6), sol.W.round(6).tolist()
    ('optimal', 0.5, [[0.0, 0.5], [0.0, 0.0]])
    """
    t0 = time.perf_counter()
    p = check_p(p)
    solvers = LP_SOLVERS if solver is None else (str(solver).upper(),)
    if any(s not in LP_SOLVERS for s in solvers):
        raise InvalidInputError(f"lp solver must be one of {', '.join(s.lower() for s in LP_SOLVERS)}, "
                                f"got {solver!r}")
    a = resolve_alpha(data, alpha)
    rows, mask = _att_rows(data, a)
    status, W, lam_r, _, name, _ = _solve_rows(rows, norm="fro", solver=None)
    if status == "infeasible":
        lam = np.zeros(mask.shape)
        lam[mask] = lam_r
        sol = _finish(rows, mask, status=status, W=None, lam=lam,
                      cert=_certify_farkas(rows, lam_r), solver=name, t0=t0, alpha=a, norm="fro")
        return _as_lp(sol, p)
    tried = []
    for s in solvers:
        st, W, lam_r = _solve_cvxpy(rows, p, s)
        tried.append(f"{s.lower()}: {st}")
        if W is None:
            continue
        W = W / min(1.0, float(np.min(rows.apply(W), initial=1.0)))  # exactly feasible again
        cert = certify_lp(rows, W, lam_r, p)
        tried[-1] += f" ({cert.summary()})"
        if cert.verified:
            lam = np.zeros(mask.shape)
            lam[mask] = lam_r
            sol = _finish(rows, mask, status="optimal", W=W, lam=lam, cert=cert, solver=s.lower(), t0=t0,
                          alpha=a, norm="fro")
            return _as_lp(sol, p, attempts=tuple(tried))
    raise SolverError("no solver certified the lp-AttSVM answer: " + "; ".join(tried),
                      status="uncertified", solver="/".join(s.lower() for s in solvers))


def _certify_farkas(rows: _Rows, lam: np.ndarray) -> Certificate:
    return _certify(rows, None, lam, np.zeros(0), "infeasible")


def _as_lp(sol: SVMSolution, p: float, attempts: tuple[str, ...] = ()) -> SVMSolution:
    obj = float("inf") if sol.W is None else lp_norm(sol.W, p)
    return replace(sol, norm="lp", objective=obj, attempts=attempts or sol.attempts,
                   notes=sol.notes + (f"p={p:g}",))

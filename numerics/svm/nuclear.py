"""Att-SVM⋆, the nuclear-norm SVM ``min ‖W‖_* s.t. ⟨(x_{iα_i} − x_it) z_i^T, W⟩ ≥ 1``: the certified SDP
ladder.

Feasibility is decided beforehand by the Frobenius core (a Farkas certificate when infeasible); this module
climbs :data:`NUC_LADDER` (reduced and full-space formulations, dual and primal SDPs, Clarabel and SCS),
polishes each rung's answer by Gauss–Newton on its rank and active set, and keeps the first one that passes
the SDP certificate (:func:`numerics.svm.core._certify`, tolerances never loosened).
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import tolerances as tol
from ..errors import InvalidInputError, SolverError
from .core import _bases, _certify, _reduced_features, _Rows, _tight_settings

#: The nuclear-norm ladder (Att-SVM⋆): rungs tried in order until an answer passes the independent SDP
#: certificate (:func:`_certify`; its tolerances are never loosened). A rung is (solver, formulation):
#:
#: * "clarabel" — the dual SDP ``max b^T λ s.t. λ ≥ 0, ‖Σ λ_s F_s‖_2 ≤ 1`` at tight settings (fast; the
#:   default);
#: * "clarabel-tight" — the same dual at tighter tolerances and a larger iteration cap;
#: * "clarabel-primal" — the primal ``min ‖M‖_* s.t. ⟨F_s, M⟩ ≥ b_s`` (cvxpy normNuc);
#: * "scs" — the primal by SCS (first order) at eps 1e-9, then polished;
#:
#: formulation "reduced": W = U M V^T in orthonormal bases of span{key differences} ⊗ span{z_i} (exact:
#: every minimiser lies there, THEORY.md §3); "full": the unreduced SDP over all of R^{d×d} (U = V = I), which
#: does not build the span structure in and so serves as an independent reference
#: (``solve_att_svm(..., norm="nuc", formulation="full")``). Every rung's answer is Newton-polished on its
#: numerical rank and active set (:func:`_nuclear_polish`); if the polished answer does not certify, the
#: rung's raw interior-point answer is certified instead (its name then lacks "+polish"). The rung that
#: certified is recorded in ``SVMSolution.solver`` and every attempt in ``SVMSolution.attempts``.
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


def _solve_nuclear_ladder(rows: _Rows, rungs, cache: dict
                          ) -> tuple[np.ndarray, np.ndarray, str, tuple[str, ...]]:
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
            cert = _certify(rows, W, lam, np.zeros(0), "optimal", "nuc")
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
        settings.update(tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, tol_ktratio=1e-10,
                        max_iter=2000)
    try:
        with warnings.catch_warnings():  # "may be inaccurate": the status is checked and the answer certified
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=name, **settings)
    except cp.error.SolverError as exc:
        raise SolverError(f"{name} failed on the nuclear-norm SDP: {exc}", status="error",
                          solver=key) from None
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"{name} returned status {prob.status!r} on the nuclear-norm SDP; "
                          "expected 'optimal'",
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

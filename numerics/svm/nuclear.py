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
#: * "ipm" — our primal-dual interior-point method for this SDP (:func:`_nuclear_ipm`): it exploits that every
#:   constraint matrix has rank one, so a step costs one m × m Cholesky (m = n(T−1)) instead of Clarabel's
#:   factorisation of a KKT system with a dense svec(r1 + r2) block (3-8x faster at the bench's sizes);
#: * "clarabel" — the dual SDP ``max b^T λ s.t. λ ≥ 0, ‖Σ λ_s F_s‖_2 ≤ 1`` at tight settings, handed to
#: Clarabel's API directly (:func:`_nuclear_dual_direct`: no cvxpy, faer KKT solver);
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
    ("ipm", "reduced"),
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
NUC_SOLVERS = ("ipm", "clarabel", "clarabel-tight", "clarabel-primal", "scs")
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
    if key not in NUC_SOLVERS:
        raise InvalidInputError(f"nuclear solver must be one of {', '.join(NUC_SOLVERS)}, got {key!r}")
    if key == "ipm":
        return _nuclear_ipm(F, b, r1, r2)
    if key in ("clarabel", "clarabel-tight"):
        return _nuclear_dual_direct(F, b, r1, r2, key)
    import cvxpy as cp

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


#: Clarabel's statuses -> the cvxpy-style status names used everywhere else (SolverError.status).
_CLARABEL_STATUS = {
    "Solved": "optimal",
    "AlmostSolved": "optimal_inaccurate",
    "PrimalInfeasible": "infeasible",
    "DualInfeasible": "unbounded",
    "AlmostPrimalInfeasible": "infeasible_inaccurate",
    "AlmostDualInfeasible": "unbounded_inaccurate",
    "MaxIterations": "max_iterations",
    "MaxTime": "max_time",
    "NumericalError": "numerical_error",
    "InsufficientProgress": "insufficient_progress",
}

#: Clarabel's direct KKT solver for the dual SDP. "faer" (a dense-aware supernodal LDL) factors the KKT
#: system, whose PSD block is dense (the svec of an (r1 + r2)-square matrix), 1.5-4x faster than the default
#: "qdldl" at the catalogue's sizes (README, Performance); older Clarabel builds without it use qdldl. One
#: thread, so an answer does not depend on the machine's core count.
DIRECT_SOLVE_METHODS = ("faer", "qdldl")


def _nuclear_dual_direct(F, b, r1, r2, key):
    """The dual SDP of :func:`_nuclear_sdp` ("clarabel" / "clarabel-tight") handed to Clarabel directly, with
    no cvxpy canonicalisation (which cost 30-40 % of a solve at (n, T, d) = (10, 10, 20)): the same program,
    the same tolerances (:func:`numerics.svm.core._tight_settings`), the same certificate afterwards.

    min −b^T λ  s.t.  −λ + s₀ = 0, s₀ ≥ 0;  A λ + s = svec(I), s ∈ PSD(r1 + r2), where A maps λ to
    −svec([[0, S(λ)], [S(λ)^T, 0]]) (Clarabel's svec: upper triangle by columns, off-diagonals × √2), so
    s = svec([[I, −S], [−S^T, I]]) ⪰ 0 ⇔ ‖S(λ)‖₂ ≤ 1. Stationarity with the PSD multiplier Z gives
    ⟨F_s, −2 Z₁₂⟩ = b_s + z₀,s ≥ b_s: M = −2 Z₁₂, as in the cvxpy form.
    """
    import clarabel
    import scipy.sparse as sp

    m = F.shape[0]
    N = r1 + r2
    nsv = N * (N + 1) // 2
    ii, jj = np.meshgrid(np.arange(r1), np.arange(r2), indexing="ij")
    col = r1 + jj
    idx = (col * (col + 1) // 2 + ii).ravel()  # svec position of entry (i, r1 + j), in vec_C(M) order
    vals = (-np.sqrt(2.0) * F.T).ravel()  # row idx[k] of A holds −√2 F[:, k]
    keep = vals != 0.0
    A_psd = sp.csc_matrix((vals[keep], (np.repeat(idx, m)[keep], np.tile(np.arange(m), idx.size)[keep])),
                          shape=(nsv, m))
    A = sp.vstack([-sp.identity(m, format="csc"), A_psd], format="csc")
    rhs = np.zeros(m + nsv)
    diag = np.arange(N)
    rhs[m + diag * (diag + 1) // 2 + diag] = 1.0
    settings = _tight_settings("CLARABEL")
    if key == "clarabel-tight":
        settings.update(
            tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, tol_ktratio=1e-10, max_iter=2000
        )
    sol = None
    for method in DIRECT_SOLVE_METHODS:
        st = clarabel.DefaultSettings()
        st.verbose = False
        for k, v in settings.items():
            setattr(st, k, v)
        try:
            st.direct_solve_method = method
            st.max_threads = 1
            sol = clarabel.DefaultSolver(
                sp.csc_matrix((m, m)),
                -np.asarray(b, dtype=float),
                A,
                rhs,
                [clarabel.NonnegativeConeT(m), clarabel.PSDTriangleConeT(N)],
                st,
            ).solve()
            break
        except Exception as exc:  # noqa: BLE001 - a build without this KKT solver: try the next one
            last = exc
    if sol is None:
        raise SolverError(f"CLARABEL failed on the nuclear-norm SDP: {last}", status="error", solver=key)
    status = _CLARABEL_STATUS.get(str(sol.status), str(sol.status).lower())
    if status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"CLARABEL returned status {status!r} on the nuclear-norm SDP; expected 'optimal'",
                          status=status, solver=key)
    lam = np.maximum(np.asarray(sol.x, dtype=float), 0.0)
    z = np.asarray(sol.z, dtype=float)[m:]
    Mv = (-np.sqrt(2.0) * z[idx]).reshape(r1, r2)  # −2 Z₁₂, Z₁₂ = z / √2 off the diagonal
    return Mv, lam, status


#: Stopping rule of :func:`_nuclear_ipm`: relative duality gap, primal and dual infeasibility all below this
#: (Clarabel's tight settings use the same 1e-10); the answer is then polished and certified like any rung's.
IPM_TOL = 1e-10
#: If X or Z stops being numerically positive definite (the optimum is rank deficient, so their small
#: eigenvalues head for round-off) after the relative gap fell below this, the last such iterate is handed
#: to the Newton polish (status "optimal_inaccurate"; on degenerate instances the primal residual can stall
#: near 1e-5 while the dual is feasible to round-off, and the polish restores feasibility exactly); the
#: certificate decides, as for every rung. 1e-7: the singular values of M that vanish at the optimum are then
#: of the order of the
#: gap, below tolerances.RANK_RTOL (1e-6), so the polish works on the right rank (a wrong one fails the
#: certificate and the ladder moves on).
IPM_HANDOVER = 1e-7
#: Iteration cap of :func:`_nuclear_ipm` (a Mehrotra predictor-corrector converges in 15-30 here); hitting it
#: is a solver failure and the ladder moves on to Clarabel.
IPM_MAX_ITER = 100
#: Fraction of the step to the boundary of the cones that a step takes (the usual 0.98-0.99 of IPMs).
IPM_STEP_FRACTION = 0.98


def _rank_one_factors(F, r1, r2):
    """a (m, r1), c (m, r2) with F_s = a_s c_s^T exactly (every Att-SVM row is an outer product): c_s is the
    largest row of F_s normalised, a_s = F_s c_s."""
    m = F.shape[0]
    Fr = F.reshape(m, r1, r2)
    j = np.argmax(np.einsum("sij,sij->si", Fr, Fr), axis=1)
    c = Fr[np.arange(m), j]
    c = c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-300)
    a = np.einsum("sij,sj->si", Fr, c)
    if np.linalg.norm(F - (a[:, :, None] * c[:, None, :]).reshape(m, -1)) > 1e-12 * max(
        1.0, np.linalg.norm(F)
    ):
        raise SolverError("ipm: a constraint matrix is not of rank one", status="error", solver="ipm")
    return a, c


def _nuclear_ipm(F, b, r1, r2):
    """The nuclear-norm SVM by a primal-dual interior-point method that uses its structure.

    Primal: min tr X s.t. ⟨A_s, X⟩ − x_s = b_s, X ⪰ 0 (N = r1 + r2), x ≥ 0, with A_s = [[0, F_s], [F_s^T, 0]];
    the optimum has ‖2 X₁₂‖_* = tr X, so M = 2 X₁₂. Dual: max b^T λ s.t. Z = I − Σ λ_s A_s ⪰ 0, λ ≥ 0 — the
    dual SDP of the other rungs. HKM search direction, Mehrotra predictor-corrector, infeasible start
    X = Z = I. Every F_s = a_s c_s^T is rank one, so the Schur matrix H_st = ⟨A_s, X A_t Z⁻¹⟩ is four
    Hadamard products of m × m matrices built by GEMMs, and a step is one Cholesky of H. Returns (M, λ,
    status) like :func:`_nuclear_sdp`; raises :class:`SolverError` when H or a cone matrix stops being
    positive definite, or at :data:`IPM_MAX_ITER` iterations (the ladder then tries Clarabel). The answer
    is Newton-polished and certified by the caller, like every rung's.
    """
    from scipy.linalg import cho_solve, solve_triangular

    a, c = _rank_one_factors(F, r1, r2)
    b = np.asarray(b, dtype=float)
    m, N = a.shape[0], r1 + r2

    def A_op(G):  # ⟨A_s, G⟩ = a_s^T (G₁₂ + G₂₁^T) c_s
        H = G[:r1, r1:] + G[r1:, :r1].T
        return np.einsum("si,si->s", a @ H, c)

    def A_adj(y):  # Σ y_s A_s
        S = (a * y[:, None]).T @ c
        G = np.zeros((N, N))
        G[:r1, r1:] = S
        G[r1:, :r1] = S.T
        return G

    def max_step(Li, dM, v, dv):  # largest t ≤ 1 with M + t dM ⪰ 0 and v + t dv ≥ 0 (M = L L^T, Li = L⁻¹)
        ev = np.linalg.eigvalsh(Li @ dM @ Li.T)
        t = 1.0 if ev[0] >= 0 else -1.0 / ev[0]
        neg = dv < 0
        if neg.any():
            t = min(t, float(np.min(-v[neg] / dv[neg])))
        return min(1.0, t)

    X, Z, I_N = np.eye(N), np.eye(N), np.eye(N)
    x, z, y = np.ones(m), np.ones(m), np.zeros(m)
    nb = 1.0 + float(np.linalg.norm(b))
    best = None
    try:
        for _ in range(IPM_MAX_ITER):
            Lz = solve_triangular(np.linalg.cholesky(Z), I_N, lower=True, check_finite=False)  # L_Z⁻¹
            Zi = Lz.T @ Lz
            Rp = b - A_op(X) + x
            Rd = I_N - A_adj(y) - Z
            rd = y - z
            mu = (float(np.sum(X * Z)) + float(x @ z)) / (N + m)
            pobj, dobj = float(np.trace(X)), float(b @ y)
            if abs(pobj - dobj) <= IPM_HANDOVER * (1.0 + abs(pobj) + abs(dobj)):
                best = (2.0 * X[:r1, r1:], np.maximum(y, 0.0))
            if (abs(pobj - dobj) <= IPM_TOL * (1.0 + abs(pobj) + abs(dobj))
                    and np.linalg.norm(Rp) <= IPM_TOL * nb
                    and np.linalg.norm(Rd) + np.linalg.norm(rd) <= IPM_TOL * (1.0 + np.sqrt(N))):
                return 2.0 * X[:r1, r1:], np.maximum(y, 0.0), "optimal"
            X11, X12, X22 = X[:r1, :r1], X[:r1, r1:], X[r1:, r1:]
            Z11, Z12, Z22 = Zi[:r1, :r1], Zi[:r1, r1:], Zi[r1:, r1:]
            # H_st = (f_s^T X e_t)(f_t^T Z⁻¹ e_s) + (f_s^T X f_t)(e_t^T Z⁻¹ e_s) + (e_s^T X e_t)(f_t^T Z⁻¹
            # f_s)
            #        + (e_s^T X f_t)(e_t^T Z⁻¹ f_s), e_s = [a_s; 0], f_s = [0; c_s]: with B = a X₁₂ c^T and
            # B' = a (Z⁻¹)₁₂ c^T the first and last terms are B^T ∘ B' and its transpose.
            t1 = (a @ X12 @ c.T).T * (a @ Z12 @ c.T)
            H = t1 + t1.T + (c @ X22 @ c.T) * (a @ Z11 @ a.T) + (a @ X11 @ a.T) * (c @ Z22 @ c.T)
            H[np.diag_indices(m)] += x / z
            Lh = np.linalg.cholesky(H)
            XRdZi = X @ Rd @ Zi
            state = (
                X,
                Zi,
                XRdZi,
                x,
                z,
                rd,
                Rp,
                Rd,
                lambda r, Lh=Lh: cho_solve((Lh, True), r, check_finite=False),
            )

            Lx = solve_triangular(np.linalg.cholesky(X), I_N, lower=True, check_finite=False)  # L_X⁻¹
            dX, dx, dy, dZ, dz = _ipm_direction(state, 0.0, None, None, A_op, A_adj)
            tp, td = max_step(Lx, dX, x, dx), max_step(Lz, dZ, z, dz)
            mu_aff = (float(np.sum((X + tp * dX) * (Z + td * dZ))) + float((x + tp * dx) @ (z + td * dz))) / (
                N + m
            )
            sigma = min(1.0, (mu_aff / mu) ** 3)
            dX, dx, dy, dZ, dz = _ipm_direction(state, sigma * mu, dX @ dZ @ Zi, dx * dz / z, A_op, A_adj)
            tp = IPM_STEP_FRACTION * max_step(Lx, dX, x, dx)
            td = IPM_STEP_FRACTION * max_step(Lz, dZ, z, dz)
            X = X + tp * dX
            X = (X + X.T) / 2
            x = x + tp * dx
            y, z = y + td * dy, z + td * dz
            Z = Z + td * dZ
            Z = (Z + Z.T) / 2
    except np.linalg.LinAlgError as exc:
        if best is not None:  # near the optimum X, Z turn singular in float64: hand the last iterate on
            return best[0], best[1], "optimal_inaccurate"
        raise SolverError(f"ipm: lost positive definiteness ({exc})", status="numerical_error",
                          solver="ipm") from None
    raise SolverError(
        f"ipm: no convergence in {IPM_MAX_ITER} iterations", status="max_iterations", solver="ipm"
    )


def _ipm_direction(state, smu, cX, cx, A_op, A_adj):
    """One HKM direction of :func:`_nuclear_ipm` for the centring target ``smu`` (σμ), with Mehrotra's
    second-order terms ``cX`` (ΔX ΔZ Z⁻¹) and ``cx`` (Δx ∘ Δz / z) when given."""
    X, Zi, XRdZi, x, z, rd, Rp, Rd, solve_h = state
    G = smu * Zi - X - XRdZi
    g = smu / z - x - x * rd / z
    if cX is not None:
        G, g = G - cX, g - cx
    rhs = Rp - A_op(G) + g
    dy = solve_h(rhs)
    Ady = A_adj(dy)
    dZ = Rd - Ady
    dX = G + X @ Ady @ Zi
    dX = (dX + dX.T) / 2
    dz = dy + rd
    dx = g - x * dz / z
    return dX, dx, dy, dZ, dz


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
    from scipy.linalg import cho_factor as _cho_factor
    from scipy.linalg import cho_solve as _cho_solve
    from scipy.linalg import lstsq as _lstsq

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
        # QR with column pivoting (gelsy): the least-squares step several times faster than the SVD-based
        # default, and as accurate for this well-conditioned (gauge-fixed) system
        rhs = -np.concatenate([r, np.zeros(len(skew))])
        try:  # normal equations by Cholesky (a GEMM and a factorisation: 3-4x faster than QR at r1 = 40)
            step = _cho_solve(_cho_factor(J.T @ J, check_finite=False), J.T @ rhs, check_finite=False)
            if not np.all(np.isfinite(step)):
                raise np.linalg.LinAlgError("non-finite step")
        except np.linalg.LinAlgError:  # (nearly) rank deficient: QR with column pivoting
            step = _lstsq(J, rhs, lapack_driver="gelsy", check_finite=False)[0]
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

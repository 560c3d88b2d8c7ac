r"""svm-rank-bound — Att-SVM and Att-SVM⋆ solutions live in span{z_i}; rank ≤ min(n, d).

Statement (TLTO, arXiv 2308.16898, §3 "rank of the SVM solutions", THEORY.md §4): for every selection α
for which Att-SVM is feasible, the Frobenius solution W^mm_α and every nuclear-norm solution W^mm_⋆,α satisfy

.. math:: W (I - P_Z) = 0,\qquad \operatorname{rank} W \le \min(n, d),

with P_Z the orthogonal projector onto span{z_1, …, z_n}. Reason: the score is x^T W z, so each
constraint reads ⟨(x_{iα_i} − x_it) z_i^T, W⟩ ≥ 1 and only W's action on span{z_i} is constrained; the
KKT form W^mm = Σ λ_it (x_{iα_i} − x_it) z_i^T puts every *row* of W in span{z_i}^T (and every column in
span of the key differences). For the nuclear norm the same holds for every minimiser: replacing W by
W P_Z keeps the constraints and tr√(W W^T) strictly drops unless W(I − P_Z) = 0.

Hypotheses implemented: Att-SVM(α) feasible (an infeasible α, proved by a Farkas certificate, makes the
instance vacuous); solutions certified (KKT for fro, SDP dual norm + gap for nuc — an uncertified answer
raises SolverError). Instance family: unit-sphere data, n ∈ 2..5, T ∈ 2..5, d ∈ 2..8 (including d < n,
where min(n, d) = d binds), cross- or self-attention, α = the optimal tokens or a random selection.

Measured: ‖W(I − P_Z)‖_F / ‖W‖_F (rows in span{z}), ‖(I − P_D)W‖_F / ‖W‖_F (columns in span of the key
differences), ranks by relative singular-value gap σ_j > RANK_RTOL σ_1 on certified solutions, for both
norms; and an *independent* unreduced primal solve of the Frobenius QP over all d² entries of W
(cvxpy/CLARABEL) — numerics.svm builds its answer in the reduced bases, so span membership of its
output is by construction; the full-space solve is not, and must agree with it.

Given data (``--data``): every instance solves Att-SVM / Att-SVM⋆ of the given (X, Y, Z, v) — for α = the
optimal tokens or a random selection drawn from the instance seed (random only, when the data have no head).
On data whose queries span R^d (digits: rank Z = d = 16) the span claims hold trivially (P_Z = I); the
metrics ``query_span_dim`` and ``key_span_dim`` say so, and the rank bound and the independent solve
remain informative.

Negative control (``svm-rank-bound-control``): "rank W^mm ≤ 1" on the same generic instances with
n, d ≥ 2, refuted by the certified Frobenius rank (generically min(n, d) ≥ 2).
"""

from __future__ import annotations

import numpy as np

from checks import Profile, Theorem, decide, failed, held, register
from numerics import tolerances as tol
from numerics.data import random_unit_sphere
from numerics.svm import solve_att_svm

from ._given import given_metrics

#: Rows in span{z}: ||W (I − P_Z)||_F ≤ SPAN_TOL ||W||_F on certified (polished) solutions (numerics.tolerances).
SPAN_TOL = tol.SPAN_TOL

#: The independent full-space interior-point solve is accurate to ~1e-8 relative (CLARABEL gap/feas 1e-10 on
#: an O(1)-scaled QP): its span residual and its distance to the certified W^mm are judged at 1e-5.
INDEP_TOL = 1e-5

#: Numerical rank of Z and of the key differences (projectors): σ > BASIS_RTOL σ_1; unit data are well
#: conditioned, so 1e-10 separates genuine directions from rounding.
BASIS_RTOL = 1e-10

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6),
    "full": Profile(instances=60, min_confirmed=50),
    "paper": Profile(instances=200, min_confirmed=170),
}


def _projector(rows: np.ndarray) -> np.ndarray:
    """Orthogonal projector onto span of the rows (d, d)."""
    _, s, Vt = np.linalg.svd(rows, full_matrices=False)
    r = int(np.sum(s > BASIS_RTOL * s[0])) if s.size and s[0] > 0 else 0
    B = Vt[:r].T
    return B @ B.T


def _full_space_fro(data, alpha) -> np.ndarray | None:
    """min ||W||_F² s.t. (x_iα − x_it)^T W z_i ≥ 1 over all d² entries (no basis reduction), CLARABEL."""
    import cvxpy as cp

    n, T, d = data.X.shape
    D = data.X[np.arange(n), alpha][:, None, :] - data.X  # (n, T, d)
    mask = np.ones((n, T), dtype=bool)
    mask[np.arange(n), alpha] = False
    F = (D[:, :, :, None] * data.Z[:, None, None, :])[mask].reshape(-1, d * d)  # (m, d²) rows vec_C(D z^T)
    w = cp.Variable(d * d)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), [F @ w >= 1])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    if prob.status != "optimal":
        from numerics.errors import SolverError

        raise SolverError(f"CLARABEL returned {prob.status!r} on the full-space Frobenius QP; expected 'optimal'",
                          status=prob.status, solver="CLARABEL")
    return np.asarray(w.value).reshape(d, d)


@register
class SVMRankBound(Theorem):
    id = "svm-rank-bound"
    depends_on = ("svm-fro", "svm-nuc", "rank")
    title = "Att-SVM / Att-SVM* solutions have rows in span{z_i} and rank <= min(n, d)"
    reference = "TLTO (arXiv 2308.16898) §3, rank of the SVM solutions"
    statement = (r"W^{mm}_\alpha (I - P_Z) = 0,\ W^{mm}_{\star,\alpha}(I - P_Z) = 0,\ "
                 r"\operatorname{rank} \le \min(n, d)")
    hypotheses_text = ("Att-SVM(alpha) feasible (alpha = optimal tokens or random); solutions certified "
                       "(KKT / SDP duality); generic unit-sphere data, n in 2..5, T in 2..5, d in 2..8 (or the "
                       "given data)")
    profiles = PROFILES
    plot_metric = "span_residual"
    accepts_data = True  # without a head v only random selections alpha are solved (see instance)

    def instance(self, rng, ctx):
        if ctx.data is not None:
            data = ctx.data
            random_alpha = data.v is None or rng.random() >= 0.5
            return {"data": data, "alpha": rng.integers(0, data.T, size=data.n) if random_alpha else None}
        n, T, d = int(rng.integers(2, 6)), int(rng.integers(2, 6)), int(rng.integers(2, 9))
        data = random_unit_sphere(n, T, d, rng=rng, self_attention=bool(rng.random() < 0.25))
        alpha = None if rng.random() < 0.5 else rng.integers(0, T, size=n)
        return {"data": data, "alpha": alpha}

    def prepare(self, instances, ctxs):
        out = []
        for inst in instances:
            fro = solve_att_svm(inst["data"], inst["alpha"], norm="fro")
            nuc = solve_att_svm(inst["data"], inst["alpha"], norm="nuc") if fro.feasible else None
            out.append({"fro": fro, "nuc": nuc})
        return out

    def assume_feasible(self, inst, state, ctx):
        fro = state["fro"]
        if not fro.feasible:
            return failed("Att-SVM(alpha) infeasible (verified Farkas certificate)",
                          farkas_verified=bool(fro.certificate.verified))
        return held()

    def check_rows_in_query_span(self, inst, state, ctx):
        data = inst["data"]
        PZ = _projector(data.Z)
        res = {}
        for name in ("fro", "nuc"):
            W = state[name].W
            res[name] = float(np.linalg.norm(W - W @ PZ) / np.linalg.norm(W))
        worst = max(res.values())
        extra = {}
        if ctx.data is not None:
            s = np.linalg.svd(data.Z, compute_uv=False)
            extra = dict(given_metrics(ctx), query_span_dim=int(np.sum(s > BASIS_RTOL * s[0])),
                         alpha_is_opt=int(inst["alpha"] is None))
        return decide(worst <= SPAN_TOL, "a solution has rows outside span{z_i}",
                      span_residual=worst, span_residual_fro=res["fro"], span_residual_nuc=res["nuc"], **extra)

    def check_columns_in_key_span(self, inst, state, ctx):
        data, sol = inst["data"], state["fro"]
        n = data.n
        D = (data.X[np.arange(n), sol.alpha][:, None, :] - data.X).reshape(-1, data.d)
        PD = _projector(D)
        res = max(float(np.linalg.norm(state[k].W - PD @ state[k].W) / np.linalg.norm(state[k].W))
                  for k in ("fro", "nuc"))
        extra = {}
        if ctx.data is not None:
            s = np.linalg.svd(D, compute_uv=False)
            extra = {"key_span_dim": int(np.sum(s > BASIS_RTOL * s[0]))}
        return decide(res <= SPAN_TOL, "a solution has columns outside span of the key differences",
                      column_residual=res, **extra)

    def check_rank_bound(self, inst, state, ctx):
        data = inst["data"]
        bound = min(data.n, data.d)
        rf, rn = state["fro"].rank, state["nuc"].rank
        return decide(max(rf, rn) <= bound, f"rank exceeds min(n, d) = {bound}",
                      rank_fro=rf, rank_nuc=rn, rank_bound=bound, rank_gap_fro=bound - rf)

    def check_independent_full_space_solve(self, inst, state, ctx):
        data, sol = inst["data"], state["fro"]
        W = _full_space_fro(data, sol.alpha)
        PZ = _projector(data.Z)
        span = float(np.linalg.norm(W - W @ PZ) / np.linalg.norm(W))
        dist = float(np.linalg.norm(W - sol.W) / np.linalg.norm(sol.W))
        return decide(span <= INDEP_TOL and dist <= INDEP_TOL,
                      "the unreduced full-space solve leaves span{z_i} or disagrees with the certified W^mm",
                      indep_span_residual=span, indep_distance=dist)


@register
class SVMRankBoundControl(SVMRankBound):
    id = "svm-rank-bound-control"
    depends_on = ("svm-fro", "svm-nuc", "rank")
    title = "Control: every Att-SVM solution has rank <= 1 (false)"
    statement = r"\operatorname{rank} W^{mm}_\alpha \le 1"
    expected = "FAIL"
    control_of = "svm-rank-bound"
    plot_metric = "rank_fro"

    def not_applicable(self, data):
        if min(data.n, data.d) < 2:
            return (f"rank <= 1 is what the theorem itself implies when min(n, d) = 1 (the given data have n = "
                    f"{data.n}, d = {data.d}): the control could not be refuted")
        return None

    def prepare(self, instances, ctxs):
        return [{"fro": solve_att_svm(inst["data"], inst["alpha"], norm="fro")} for inst in instances]

    # the control keeps the hypothesis (feasible) and replaces every prediction by the false one
    check_rows_in_query_span = None
    check_columns_in_key_span = None
    check_rank_bound = None
    check_independent_full_space_solve = None

    def check_rank_at_most_one(self, inst, state, ctx):
        sol = state["fro"]
        s = sol.singular_values
        return decide(sol.rank <= 1, f"certified Frobenius solution has rank {sol.rank} > 1",
                      rank_fro=sol.rank, sigma2_over_sigma1=float(s[1] / s[0]) if s.size > 1 else 0.0)

r"""svm-rank-bound — Att-SVM and Att-SVM⋆ solutions live in span{z_i}; rank ≤ min(n, d).

Statement (TLTO, arXiv 2308.16898, §3 "rank of the SVM solutions", THEORY.md §4): for every selection α
for which Att-SVM is feasible, the Frobenius solution W^mm_α and every nuclear-norm solution W^mm_⋆,α satisfy

.. math:: W (I - P_Z) = 0,\qquad \operatorname{rank} W \le \min(n, d),

with P_Z the orthogonal projector onto span{z_1, …, z_n}. Reason: the score is x^T W z, so each
constraint reads ⟨(x_{iα_i} − x_it) z_i^T, W⟩ ≥ 1 and only W's action on span{z_i} is constrained; the
KKT form W^mm = Σ λ_it (x_{iα_i} − x_it) z_i^T puts every *row* of W in span{z_i}^T (and every column in
span of the key differences). For the nuclear norm the same holds for every minimiser: replacing W by
W P_Z keeps the constraints and tr√(W W^T) strictly drops unless W(I − P_Z) = 0.

What is true by construction, and so is not what this check spends its budget on: numerics.svm's default
("reduced") solvers write W = U M V^T with U, V orthonormal bases of span{key differences} and span{z_i}, so
the span claims of *their* answers hold up to the rounding of U, V (≈ 1e-15), whatever the solver does. That
structural fact is certified once per instance as the report metric ``span_residual_reduced_by_construction``
(not a verdict) and, exactly, by tests/numerics/test_svm.py.

What can fail, and is checked: the *unreduced* full-space programs over all of R^{d×d} — the Frobenius QP
(numerics.svm ``formulation="full"``, CLARABEL primal QP) and the nuclear SDP (``formulation="full"``, its own
solver ladder, never the reduced one) — must (1) have rows in span{z_i} and columns in span of the key
differences (an outcome for them: nothing builds it in), (2) have rank in [1, min(n, d)], and (3) agree with
the reduced solutions: same optimal value, same solution (both certified; for the nuclear norm the minimiser
is unique on generic data), so that the reduction lost nothing. The certifiers that stand behind every
"certified" are themselves exercised: each must reject 1.05·W (feasible, not optimal) and (1.05·W, 1.05·λ),
and accept the true answer (``check_certificates_reject_wrong_answers``).

Hypotheses implemented: Att-SVM(α) feasible (an infeasible α, proved by a Farkas certificate, makes the
instance vacuous); solutions certified (KKT for fro, SDP dual norm + gap for nuc — an uncertified answer
raises SolverError). Instance family: unit-sphere data, n ∈ 2..5, T ∈ 2..5, d ∈ 2..8 (including d < n,
where min(n, d) = d binds), cross- or self-attention, α = the optimal tokens or a random selection; on a
quarter of the instances X and Z are scaled by 10^4 or 10^-4, so ‖W‖ ~ 1e-8 or 1e8 and a rank decided by an
absolute threshold would be wrong (rank 0 at 1e-8: refuted by the rank lower bound).

Given data (``--data``): every instance solves Att-SVM / Att-SVM⋆ of the given (X, Y, Z, v) — for α = the
optimal tokens or a random selection drawn from the instance seed (random only, when the data have no head).
On data whose queries span R^d (digits: rank Z = d = 16) the span claims hold trivially (P_Z = I); the
metrics ``query_span_dim`` and ``key_span_dim`` say so, and the rank bound and the independent solves
remain informative.

Negative control (``svm-rank-bound-control``): "rank W^mm_⋆ = rank W^mm" (the nuclear solution has the
Frobenius solution's rank) on the same instances — a claim every weaker check passes (both ranks respect
min(n, d), both solutions live in the spans), but false: the nuclear norm favours low rank, and on generic
instances with n, d ≥ 2 the certified nuclear rank is often strictly lower.

Resolution (``attnsvm power --resolution``, quick seed 0; each object alone): the certified reduced
answers the full-space programs must reproduce (``W^mm (reduced)``, ``W^mm_⋆ (reduced)``: points moved
inside the span of the constraint matrices, judged at INDEP_TOL = 1e-5 and NUC_DIST_TOL = 1e-4) and the rank
bound (``rank bound min(n, d)``, upper, floored: a rank is an integer, so any ε lowers it by one and an
instance whose rank attains min(n, d) refutes it) each resolve 0.01 (goal 0.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from checks import WITHDRAWN, Context, Criterion, Outcome, Profile, Theorem, decide, failed, held, register
from checks.power.resolution import token_difference_span
from numerics import tolerances as tol
from numerics.data import AttentionData, random_unit_sphere
from numerics.svm import SVMSolution, certify_att_svm, solve_att_svm

from ._given import given_metrics

#: Rows in span{z}: ||W (I − P_Z)||_F ≤ SPAN_TOL ||W||_F on certified (polished) solutions
#: (numerics.tolerances).
SPAN_TOL = tol.SPAN_TOL

#: The independent full-space Frobenius solve (CLARABEL primal QP, gap/feas 1e-10 on features rescaled to
#: O(1))
#: is accurate to ~1e-8 relative: its span residual and its distance to the certified W^mm are judged at 1e-5.
INDEP_TOL = 1e-5

#: Reduced vs full-space nuclear SDP. Optimal values: both answers pass the SDP certificate (duality gap
#: ≤ GAP_TOL each), so they agree to 2·GAP_TOL. Solutions: the nuclear objective is flat to first order around
#: its minimiser, so two certified answers are only ~sqrt(gap)-close in general; polished answers agree to
#: ~1e-6 (measured: ≤ 1.7e-6 over 102 svm-rank instances), and 1e-4 (= sqrt(1e-8), an order above) says "same
#: solution" while a different minimiser or a wrong reduction (distance O(1)) is refuted.
NUC_OBJ_TOL = 2 * tol.GAP_TOL
NUC_DIST_TOL = 1e-4

#: Numerical rank of Z and of the key differences (projectors): σ > BASIS_RTOL σ_1; unit data are well
#: conditioned, so 1e-10 separates genuine directions from rounding.
BASIS_RTOL = 1e-10

#: Share of generated instances whose X and Z are scaled by 10^±4 (‖W‖ ~ 1e∓8): the scale-robustness input.
SCALED_SHARE = 0.25
SCALES = (1e4, 1e-4)

#: A wrong answer the certifiers must reject: 1.05·W^mm is feasible (margins 1.05) and 5 % above optimal.
WRONG_FACTOR = 1.05

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6),
    "full": Profile(instances=60, min_confirmed=50),
    "paper": Profile(instances=200, min_confirmed=170),
}


@dataclass(frozen=True, eq=False)
class SVMRankBoundInstance:
    data: AttentionData
    alpha: np.ndarray | None  # (n,) the selection; None: the optimal tokens
    scale: float  # X and Z scaled by this (1, or 10^±4 on the scaled share)


@dataclass(frozen=True, eq=False)
class SVMRankBoundState:
    """The certified solutions: the reduced Frobenius one and, where it is feasible, the reduced nuclear one
    and the unreduced full-space nuclear and Frobenius ones (the control solves only fro and nuc)."""

    fro: SVMSolution
    nuc: SVMSolution | None = None
    nuc_full: SVMSolution | None = None
    fro_full: SVMSolution | None = None

    def solution(self, name: str) -> SVMSolution:
        """The solution ``name`` ("fro", "nuc", "fro_full", "nuc_full"); there is one where Att-SVM(α) is
        feasible (the predictions run only there)."""
        sol = getattr(self, name)
        assert sol is not None, f"no {name} solution: Att-SVM(alpha) infeasible"
        return sol

    def W(self, name: str) -> np.ndarray:
        W = self.solution(name).W
        assert W is not None
        return W


def _projector(rows: np.ndarray) -> np.ndarray:
    """Orthogonal projector onto span of the rows (d, d)."""
    _, s, Vt = np.linalg.svd(rows, full_matrices=False)
    r = int(np.sum(s > BASIS_RTOL * s[0])) if s.size and s[0] > 0 else 0
    B = Vt[:r].T
    return B @ B.T


def _key_differences(data: AttentionData, alpha: np.ndarray) -> np.ndarray:
    n = data.n
    return (data.X[np.arange(n), alpha][:, None, :] - data.X).reshape(-1, data.d)


def _rel(W: np.ndarray, R: np.ndarray) -> float:
    return float(np.linalg.norm(W - R) / np.linalg.norm(W))


@register
class SVMRankBound(Theorem):
    id = "svm-rank-bound"
    depends_on = ("svm-fro", "svm-nuc", "rank", "certificate")
    title = "Att-SVM / Att-SVM* solutions have rows in span{z_i} and rank <= min(n, d)"
    reference = "TLTO (arXiv 2308.16898) §3, rank of the SVM solutions"
    statement = (r"W^{mm}_\alpha (I - P_Z) = 0,\ W^{mm}_{\star,\alpha}(I - P_Z) = 0,\ "
                 r"\operatorname{rank} \le \min(n, d)")
    hypotheses_text = (
        "Att-SVM(alpha) feasible (alpha = optimal tokens or random); solutions certified "
        "(KKT / SDP duality); generic unit-sphere data, n in 2..5, T in 2..5, d in 2..8, a quarter "
        "scaled by 10^4 or 10^-4 (or the given data); span claims judged on the unreduced full-space "
        "solutions (true by construction for the reduced ones)"
    )
    profiles = PROFILES
    plot_metric = "span_residual"
    criteria: ClassVar[tuple[Criterion, ...]] = (
        Criterion(
            "‖W(I − P_Z)‖_F / ‖W‖_F of the full-space Frobenius and nuclear solutions",
            "<=",
            SPAN_TOL,
            plot_metric="span_residual",
        ),
        Criterion("‖(I − P_D)W‖_F / ‖W‖_F, D the key differences x_iα_i − x_it", "<=", SPAN_TOL),
        Criterion("rank of the four solutions (reduced/full, Frobenius/nuclear)", "in", "[1, min(n, d)]"),
        Criterion("|obj_full − obj_reduced| / obj_reduced of the nuclear SDP", "<=", NUC_OBJ_TOL),
        Criterion("‖W_reduced − W_full‖_F / ‖W_reduced‖_F of the nuclear SDP", "<=", NUC_DIST_TOL),
        Criterion("‖W^mm − W_full‖_F / ‖W^mm‖_F (independent full-space Frobenius QP)", "<=", INDEP_TOL),
        Criterion(
            f"wrong answers {WRONG_FACTOR}·W (λ, {WRONG_FACTOR}·λ) accepted by the KKT/SDP certifiers, or "
            "the answer rejected",
            "==",
            0,
        ),
    )
    accepts_data = True  # without a head v only random selections alpha are solved (see instance)

    def instance(self, rng: np.random.Generator, ctx: Context) -> SVMRankBoundInstance:
        if ctx.data is not None:
            data = ctx.data
            random_alpha = data.v is None or rng.random() >= 0.5
            alpha = rng.integers(0, data.T, size=data.n) if random_alpha else None
            return SVMRankBoundInstance(data=data, alpha=alpha, scale=1.0)
        n, T, d = int(rng.integers(2, 6)), int(rng.integers(2, 6)), int(rng.integers(2, 9))
        data = random_unit_sphere(n, T, d, rng=rng, self_attention=bool(rng.random() < 0.25))
        alpha = None if rng.random() < 0.5 else rng.integers(0, T, size=n)
        scale = 1.0
        if rng.random() < SCALED_SHARE:  # same instance at ‖W‖ ~ 1e-8 or 1e8 (scores keep their order)
            scale = float(SCALES[int(rng.integers(0, len(SCALES)))])
            data = AttentionData(data.X * scale, data.Y, data.Z * scale, data.v)
        return SVMRankBoundInstance(data=data, alpha=alpha, scale=scale)

    def prepare(self, instances: Sequence[SVMRankBoundInstance], ctxs: Sequence[Context]
                ) -> list[SVMRankBoundState]:
        out = []
        for inst in instances:
            data, alpha = inst.data, inst.alpha
            fro = solve_att_svm(data, alpha, norm="fro")
            st = SVMRankBoundState(fro)
            if fro.feasible:
                nuc = solve_att_svm(data, alpha, norm="nuc")
                nuc_full = solve_att_svm(data, alpha, norm="nuc", formulation="full")
                fro_full = solve_att_svm(data, alpha, norm="fro", formulation="full", solver="clarabel")
                st = SVMRankBoundState(fro, nuc=nuc, nuc_full=nuc_full, fro_full=fro_full)
            out.append(st)
        return out

    def assume_feasible(self, inst: SVMRankBoundInstance, state: SVMRankBoundState, ctx: Context) -> Outcome:
        fro = state.fro
        if not fro.feasible:
            return failed("Att-SVM(alpha) infeasible (verified Farkas certificate)",
                          farkas_verified=bool(fro.certificate.verified))
        return held()

    def check_rows_in_query_span(self, inst: SVMRankBoundInstance, state: SVMRankBoundState, ctx: Context
                                 ) -> Outcome:
        """Judged on the full-space solutions; the reduced ones are recorded (true by construction)."""
        data = inst.data
        PZ = _projector(data.Z)
        res = {k: _rel(state.W(k), state.W(k) @ PZ) for k in ("fro_full", "nuc_full")}
        built_in = max(_rel(state.W(k), state.W(k) @ PZ) for k in ("fro", "nuc"))
        worst = max(res.values())
        extra = {}
        if ctx.data is not None:
            s = np.linalg.svd(data.Z, compute_uv=False)
            extra = dict(given_metrics(ctx), query_span_dim=int(np.sum(s > BASIS_RTOL * s[0])),
                         alpha_is_opt=int(inst.alpha is None))
        return decide(worst <= SPAN_TOL, "a full-space solution has rows outside span{z_i}",
                      span_residual=worst, span_residual_fro_full=res["fro_full"],
                      span_residual_nuc_full=res["nuc_full"], span_residual_reduced_by_construction=built_in,
                      w_scale=float(np.linalg.norm(state.W("fro"))), **extra)

    def check_columns_in_key_span(self, inst: SVMRankBoundInstance, state: SVMRankBoundState, ctx: Context
                                  ) -> Outcome:
        data = inst.data
        D = _key_differences(data, state.fro.alpha)
        PD = _projector(D)
        res = max(_rel(state.W(k), PD @ state.W(k)) for k in ("fro_full", "nuc_full"))
        extra = {}
        if ctx.data is not None:
            s = np.linalg.svd(D, compute_uv=False)
            extra = {"key_span_dim": int(np.sum(s > BASIS_RTOL * s[0]))}
        return decide(
            res <= SPAN_TOL,
            "a full-space solution has columns outside span of the key differences",
            column_residual=res,
            **extra,
        )

    def check_rank_bound(self, inst: SVMRankBoundInstance, state: SVMRankBoundState, ctx: Context) -> Outcome:
        """1 ≤ rank ≤ min(n, d) for every solution (W ≠ 0: the constraints have right-hand side 1). The lower
        bound catches a rank decided by an absolute threshold on the 1e-8-scaled instances."""
        data = inst.data
        # the bound through the resolution seam ("upper": lowered by 1 − ε); a rank is an integer, so the
        # bound it must respect is the floor
        bound = int(np.floor(self.predicted("rank bound min(n, d)", float(min(data.n, data.d)), "upper")
                             + 1e-9))
        ranks = {k: state.solution(k).rank for k in ("fro", "nuc", "fro_full", "nuc_full")}
        ok = all(1 <= r <= bound for r in ranks.values())
        return decide(ok, f"a rank lies outside [1, min(n, d) = {bound}]: {ranks}",
                      rank_fro=ranks["fro"], rank_nuc=ranks["nuc"], rank_nuc_full=ranks["nuc_full"],
                      rank_bound=bound, rank_gap_fro=bound - ranks["fro"])

    def check_full_space_nuclear_agrees(self, inst: SVMRankBoundInstance, state: SVMRankBoundState,
                                        ctx: Context) -> Outcome:
        """The reduced SDP (W = U M V^T) and the unreduced full-space SDP: same optimal value, same
        solution."""
        red, full = state.solution("nuc"), state.solution("nuc_full")
        obj = abs(full.objective - red.objective) / red.objective
        # the certified reduced answer the full-space program must reproduce, through the resolution seam
        dist = _rel(self.predicted("W^mm_⋆ (reduced)", state.W("nuc"), "point",
                                   lambda: token_difference_span(inst.data)), state.W("nuc_full"))
        return decide(obj <= NUC_OBJ_TOL and dist <= NUC_DIST_TOL,
                      "the unreduced full-space nuclear SDP disagrees with the reduced one",
                      nuc_full_obj_rel_diff=obj, nuc_full_distance=dist,
                      nuc_full_rank_equal=int(full.rank == red.rank))

    def check_independent_full_space_solve(self, inst: SVMRankBoundInstance, state: SVMRankBoundState,
                                           ctx: Context) -> Outcome:
        # the certified reduced W^mm the full-space QP must reproduce, through the resolution seam
        dist = _rel(self.predicted("W^mm (reduced)", state.W("fro"), "point",
                                   lambda: token_difference_span(inst.data)), state.W("fro_full"))
        return decide(
            dist <= INDEP_TOL,
            "the unreduced full-space Frobenius QP disagrees with the certified W^mm",
            indep_distance=dist,
        )

    def check_certificates_reject_wrong_answers(self, inst: SVMRankBoundInstance, state: SVMRankBoundState,
                                                ctx: Context) -> Outcome:
        """The KKT and SDP certifiers accept the answer and reject 1.05·W with λ and with 1.05·λ (feasible,
        not optimal): a certifier whose tolerances were loosened (10^6×) accepts them and fails this check."""
        data = inst.data
        bad = []
        for norm in ("fro", "nuc"):
            sol, W = state.solution(norm), state.W(norm)
            if not certify_att_svm(data, sol.alpha, W, sol.lam, norm=norm).verified:
                bad.append(f"{norm}: the certified answer is rejected on re-certification")
            for lam_f in (1.0, WRONG_FACTOR):
                c = certify_att_svm(data, sol.alpha, WRONG_FACTOR * W, lam_f * sol.lam, norm=norm)
                if c.verified:
                    bad.append(f"{norm}: {WRONG_FACTOR}·W (λ × {lam_f}) accepted ({c.summary()})")
        return decide(not bad, "; ".join(bad) or "certifiers reject wrong answers",
                      wrong_answers_accepted=len(bad))


@register
class SVMRankBoundControl(SVMRankBound):
    id = "svm-rank-bound-control"
    depends_on = ("svm-fro", "svm-nuc", "rank", "certificate")
    title = "Control: the nuclear solution has the Frobenius solution's rank (false)"
    statement = r"\operatorname{rank} W^{mm}_{\star,\alpha} = \operatorname{rank} W^{mm}_\alpha"
    expected = "FAIL"
    control_of = "svm-rank-bound"
    plot_metric = "rank_drop"
    criteria = (
        Criterion(
            "certified rank(W^mm_⋆,α) − rank(W^mm_α) (the control's claim: equal ranks)",
            "==",
            0,
            plot_metric="rank_drop",
        ),
    )

    def not_applicable(self, data):
        if min(data.n, data.d) < 2:
            return (f"with min(n, d) = 1 (the given data have n = {data.n}, d = {data.d}) both ranks are 1: "
                    "the control could not be refuted")
        return None

    def prepare(self, instances: Sequence[SVMRankBoundInstance], ctxs: Sequence[Context]
                ) -> list[SVMRankBoundState]:
        out = []
        for inst in instances:
            fro = solve_att_svm(inst.data, inst.alpha, norm="fro")
            nuc = solve_att_svm(inst.data, inst.alpha, norm="nuc") if fro.feasible else None
            out.append(SVMRankBoundState(fro, nuc=nuc))
        return out

    # the control keeps the hypothesis (feasible) and replaces every prediction by the false one
    check_rows_in_query_span = WITHDRAWN
    check_columns_in_key_span = WITHDRAWN
    check_rank_bound = WITHDRAWN
    check_full_space_nuclear_agrees = WITHDRAWN
    check_independent_full_space_solve = WITHDRAWN
    check_certificates_reject_wrong_answers = WITHDRAWN

    def check_nuclear_rank_equals_frobenius_rank(self, inst: SVMRankBoundInstance, state: SVMRankBoundState,
                                                 ctx: Context) -> Outcome:
        rf, rn = state.fro.rank, state.solution("nuc").rank
        return decide(rn == rf, f"certified nuclear rank {rn} differs from the Frobenius rank {rf}",
                      rank_fro=rf, rank_nuc=rn, rank_drop=rf - rn)

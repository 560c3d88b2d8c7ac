r"""gen-svm-finite — the Gen-SVM finite part: GD's projection on S_fin converges to the restricted optimum
W^fin⋆.

Statement (Li et al. 2024, arXiv 2403.08081, *Mechanics of Next Token Prediction with Self-Attention*: the
characterisation of the finite component's limit, stated there for next-token prediction and transferred here
to TLTO §5's nonlinear-head setting, where TLTO gives the decomposition W^svmeq = W^fin + R W^dir): train W
by plain GD with a nonlinear head until its token selection settles: selected O_i = {t : s_it > τ_H}, the
other tokens' probabilities → 0. Let S_fin = span{(x_it − x_iτ) z_i^T : t, τ ∈ O_i}, P_fin the orthogonal
projection onto it, and

    W^fin⋆ = argmin_{W ∈ S_fin} L_O(W),   L_O(W) = (1/n) Σ_i ℓ(y_i h(Σ_{t ∈ O_i} softmax_{O_i}(X_i W z_i)_t
    x_it)),

the loss with the masked tokens removed (numerics.genfin.finite_part; it depends on W only through P_fin W,
the log-ratios inside each O_i). Then P_fin W(k) → W^fin⋆. The paper reads W^fin off an iterate's own
log-ratios, which cannot fail; here W^fin⋆ is computed from the data alone (scipy BFGS on S_fin, independent
of the torch numerics GD runs on) and GD must approach it.

Hypotheses implemented (exactly): logistic loss; ReLU head h(u) = 1^T ReLU(V^T u)
(numerics.attention.ReLUHead);
plain GD, step ETA, STEPS steps from W(0) with N(0, 0.01²) entries; ``non_degenerate`` — GD's final selection
has some |O_i| ≥ 2 (else S_fin = {0} and the claim is empty); ``finite_part_unique`` — L_O has a unique finite
minimiser on S_fin (two BFGS starts agree, |∇| ≤ 1e-8, inside |β| ≤ 40; else the selected face has no finite
optimum and the statement does not apply). Data: numerics.genfin.coupled_selection (shared query and token
pair, labels that balance the pair at an interior optimum; see gen-svm's docstring), (d, n₊, n₋) cycling over
numerics.genfin.CATALOGUE_CONFIGS, T = 3. GD picks its own selection: the sets are GD's, not the design's.

Why plain GD: under normalised GD (the authors' optimiser, used by gen-svm) the fixed step length 2-cycles
along S_fin once the selected tokens balance (measured: the log-ratio freezes ~0.07 off θ⋆ on alternate
steps), so the finite part is only reached to O(step); with a fixed step the S_fin dynamics are GD on L_O plus
a perturbation proportional to the masked probabilities, which fall as 1/k.

Predictions (e(k) = ‖P_fin W(k) − W^fin⋆‖_F at the recorded k = S/2, 5S/8, …, S):
* ``is_gradient_descent``: one run_gd step from W(0) and from W(0)/‖W(0)‖ is along −∇L computed independently
  (checks/theorems/_gd.py, ReLU head): an ascending or random optimiser is refuted here;
* ``finite_part_converges``: e(S) ≤ FIN_TOL and e falls by at least FALL_MIN over the second half (theory: ×2
  for a 1/k perturbation; measured ×1.6–1.8), or e(S) ≤ precision_floor (derived). Refuted when e does not
  fall (no progress: a no-op optimiser, or a limit other than W^fin⋆); undecided when a selected token's
  probability is still falling by ×FALL_MIN over the second half (GD deselecting it: measured on paper
  instance 120, 0.0020 → 0.0013, drifting into the flat tail of L_O), when e falls but is still above FIN_TOL
  (budget), when a non-selected token's probability has not fallen over the second half (selection not
  settled), or — instead of a refutation for not falling — when L_O's curvature at P_fin W(S) is below
  CURV_MIN (the finite part is in L_O's flat tail, steered by the masked tokens; issue 29, quick seed 18
  instance 4).

Negative control (``gen-svm-finite-control``), at the boundary where a weaker check ("the finite part
converges") would pass: "P_fin W(k) → the restricted optimum of the *exponential* loss" — the same S_fin, the
same selected tokens, the same GD, only the loss in L_O differs (for a linear head and n₊ : n₋ labels the two
balance at h = ln(n₊/n₋) and h = ½ ln(n₊/n₋)). Judged by the same rule; vacuous where the two optima are
closer than SEPARATION (the budget could not tell them apart) or the exponential one is not finite. Only ~30 %
of the theorem's draws qualify, so the control's family is redrawn until the designed selection does
(``GenSVMFiniteControl.instance``, metric ``family_draws``; issue 29: quick seed 8 was VACUOUS 16 of 16).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from checks import Context, Criterion, Outcome, Profile, Theorem, decide, failed, held, register, undecided
from numerics import tolerances as tol
from numerics.data import AttentionData
from numerics.genfin import (
    CATALOGUE_CONFIGS,
    FinitePart,
    coupled_selection,
    curvature_at,
    finite_part,
    restricted_gradient,
)
from numerics.tokens import softmax_probs

from ._gd import FIDELITY_TOL, independent_grad_W, init_fidelity, judge_fidelity, run_relu_gd_padded

#: Plain GD step: the S_fin curvature of L_O is ≤ ~0.05 on this family (ℓ'' ≤ 1/4 times (∂h/∂θ)² ≤ 1/16 times
#: ‖(b − a) z^T‖² = 2, averaged over n ≥ 3 examples), so η = 5 keeps η·H < 1 there; the loss is checked to
#: fall between every recorded pair (metric ``loss_rises``; measured 0 on every quick and full instance).
ETA = 5.0
#: Budget: 20000 steps (≈ 1 s per batch on one core, ReLU head on the torch path; instances of equal n run
#: as one batch zero-padded in d, _gd.run_relu_gd_padded: exact, 2.2× faster than one batch per d), recorded
#: at S/8 steps.
STEPS = 20000
RECORD = STEPS // 8
#: Convergence threshold of ‖P_fin W − W^fin⋆‖_F: log-ratios within ~0.04 (‖(b − a) z^T‖_F = √2), i.e. the
#: selected tokens' probabilities within ~2 % of the predicted split; measured e(S) ≤ 1.1e-2 at S = 20000
#: wherever the selection settled.
FIN_TOL = 3e-2
#: Over the second half (k = S/2 → S) e must fall at least this factor: 2 for a 1/k perturbation, measured
#: 1.6–1.8; a run that is not approaching W^fin⋆ (no-op optimiser, a different limit) keeps it near 1.
FALL_MIN = 1.25
#: Unit roundoff of the float64 arithmetic GD, the projection and the finite-part solve run in: the
#: precision floor of e (``precision_floor``) is derived from it, not fitted.
EPS = float(np.finfo(float).eps)
#: The control is judged only where its exponential-loss optimum is this far (‖·‖_F) from W^fin⋆: ten times
#: the convergence threshold, so that a run that meets the claim cannot also meet the control.
SEPARATION = 10 * FIN_TOL
INIT_SCALE = 0.01
#: Below this curvature of L_O at W^fin⋆ the budget cannot decide: GD's finite part sits ~(masked probability)
#: / curvature away (measured: error 0.018 at curvature 4.4e-4, and a drift away from a minimiser of curvature
#: 1e-5 for all 20000 steps), so a curvature of 1e-4 could not get within FIN_TOL at S = 20000.
CURV_MIN = 1e-4
#: The control redraws its family until the exponential optimum is finite and separated (see
#: GenSVMFiniteControl.instance): ~30 % of draws qualify, so 60 draws leave a miss with probability
#: 0.7⁶⁰ ≈ 5e-10 per instance (a miss keeps the last draw, which the hypothesis then makes vacuous).
CONTROL_MAX_DRAWS = 60


@dataclass(frozen=True, eq=False)
class FiniteInstance:
    """One draw of numerics.genfin.coupled_selection and GD's start."""

    data: AttentionData
    V: np.ndarray  # (R, d) the ReLU head's fixed units
    W0: np.ndarray  # (d, d) GD's start
    family_draws: int | None = None  # the control's draws until its hypothesis held (the theorem: none)


@dataclass(frozen=True, eq=False)
class FiniteState:
    """GD's run on one instance, its final selection and the finite part predicted on it. ``prepare`` sets
    every field; a state built by hand (tests of the judgement) may leave the optional ones out, which turns
    the rules that read them off."""

    traj: np.ndarray  # (records, d, d)
    selected: tuple[np.ndarray, ...]  # O_i of W(S) (probability > τ_H)
    fp: FinitePart  # W^fin⋆ of the logistic (or the prediction's) loss on that selection
    p_mid: np.ndarray  # (n, T) softmax probabilities at S/2
    p_end: np.ndarray  # (n, T) ... and at S
    fidelity: float = float("nan")
    curv_end: float = float("inf")  # curvature of L_O at P_fin W(S)
    masked_pull: float | None = None  # ‖the masked tokens' pull on the finite part‖ at W(S)
    fin_residual_grad: float | None = None  # ‖P_fin ∇L(W(S))‖
    fp_exp: FinitePart | None = None  # the control's exponential-loss optimum on S_fin


class _FiniteBase(Theorem):
    reference = ("Li et al. 2024 (arXiv 2403.08081, Mechanics of Next Token Prediction with Self-Attention): "
                 "the finite part's limit; TLTO §5 gives the decomposition W^svmeq = W^fin + R W^dir")
    depends_on = ("gd", "softmax")
    #: the hypotheses read GD's final selection: a broken optimiser is refuted by its step, not left vacuous
    integrity = ("is_gradient_descent",)
    profiles = {
        # measured (seed 0): ~75 % of draws settle on a two-token selection with a unique finite part
        "quick": Profile(instances=16, min_confirmed=8, batch=16),
        "full": Profile(instances=64, min_confirmed=32, batch=32),
        "paper": Profile(instances=200, min_confirmed=100, batch=50),
    }
    plot_metric = "fin_err"
    loss_of_prediction = "logistic"
    criteria = (
        Criterion(
            "1 − corr(one step of the optimiser, −∇L computed independently) at W(0), W(0)/‖W(0)‖",
            "<",
            FIDELITY_TOL,
        ),
        Criterion("‖P_fin W(S) − W^fin⋆‖_F", "<=", FIN_TOL, plot_metric="fin_err"),
        Criterion("its fall over the second half, e(S/2) / e(S)", ">=", FALL_MIN),
        Criterion("inconclusive (budget): curvature of L_O at W^fin⋆ on S_fin", "<", CURV_MIN),
        Criterion("inconclusive (budget), instead of a refuted fall: curvature of L_O at P_fin W(S)", "<",
                  CURV_MIN),
        Criterion("inconclusive (budget): a selected token's probability falls over the second half by ×",
                  ">=", FALL_MIN),
        Criterion(
            "inconclusive (budget): a non-selected token's probability did not fall over the second half",
            "any",
            "example",
        ),
    )

    def not_applicable(self, data):
        return (
            "needs a nonlinear (ReLU) head trained with W on data built to select several tokens; the data "
            "format carries only a fixed linear head v"
        )

    def instance(self, rng: np.random.Generator, ctx: Context) -> FiniteInstance:
        d, n_pos, n_neg = CATALOGUE_CONFIGS[ctx.instance % len(CATALOGUE_CONFIGS)]
        inst = coupled_selection(rng, d, n_pos, n_neg)
        return FiniteInstance(data=inst.data, V=inst.V, W0=INIT_SCALE * rng.standard_normal((d, d)))

    def prepare(self, instances: Sequence[FiniteInstance], ctxs: Sequence[Context]) -> list[FiniteState]:
        states = []
        datas = [inst.data for inst in instances]
        Vs, W0s = [inst.V for inst in instances], [inst.W0 for inst in instances]
        trajs = run_relu_gd_padded(datas, Vs, W0s, steps=STEPS, lr=ETA, normalized=False, record_every=RECORD,
                                   device=ctxs[0].device)
        for inst, traj, ctx in zip(instances, trajs, ctxs, strict=True):
            data, V, W0 = inst.data, inst.V, inst.W0
            p = softmax_probs(data, traj[-1])
            sel = tuple(np.flatnonzero(q > tol.TAU_H) for q in p)
            fp = finite_part(data, V, sel, loss=self.loss_of_prediction)
            fid = init_fidelity(data, W0, ETA, normalized=False, V=V, device=ctx.device)
            # L_O (the logistic loss GD trains, whatever the prediction) at the point W(S) projects to
            curv_end = curvature_at(data, V, sel, traj[-1])
            # the S_fin gradient of the loss GD descends (masked tokens included; numpy, independent of the
            # torch run) splits into ∇L_O at P_fin W(S) and the masked tokens' pull on the finite part
            g_full = fp.project(independent_grad_W(data, traj[-1], V))
            pull = float(np.linalg.norm(g_full - restricted_gradient(data, V, sel, traj[-1])))
            states.append(FiniteState(traj=traj, selected=sel, fp=fp, fidelity=fid, curv_end=curv_end,
                                      masked_pull=pull, fin_residual_grad=float(np.linalg.norm(g_full)),
                                      p_mid=softmax_probs(data, traj[len(traj) // 2]), p_end=p))
        return states

    # -- hypotheses ------------------------------------------------------------------------------
    def assume_non_degenerate(self, inst: FiniteInstance, st: FiniteState, ctx: Context) -> Outcome:
        k = int(max(len(o) for o in st.selected))
        return decide(
            k >= 2, "every example selects one token at the end of the run: S_fin = {0}", max_selected=k
        )

    def assume_finite_part_unique(self, inst: FiniteInstance, st: FiniteState, ctx: Context) -> Outcome:
        fp = st.fp
        return decide(fp.unique, f"L_O on S_fin: {fp.message}", fin_dim=len(fp.basis), fin_grad=fp.grad_norm)

    # -- predictions -----------------------------------------------------------------------------
    def check_is_gradient_descent(self, inst: FiniteInstance, st: FiniteState, ctx: Context) -> Outcome:
        return judge_fidelity(st.fidelity)

    def _target(self, st: FiniteState) -> FinitePart:
        """W^fin⋆, through the resolution seam: moved by ε‖W^fin⋆‖ inside S_fin under a perturbation."""
        fp = st.fp
        W = self.predicted("W^fin⋆", fp.W, "point", lambda: list(fp.basis))
        return fp if W is fp.W else dataclasses.replace(fp, W=W)

    def check_finite_part_converges(self, inst: FiniteInstance, st: FiniteState, ctx: Context) -> Outcome:
        target, traj = self._target(st), st.traj
        half = len(traj) // 2
        e = [float(np.linalg.norm(target.project(W) - target.W)) for W in traj[half:]]
        ks = [min(RECORD * k, STEPS) for k in range(half, len(traj))]
        fall = e[0] / e[-1] if e[-1] > 0 else np.inf
        sel = st.selected
        rest = [np.setdiff1d(np.arange(inst.data.T), o) for o in sel]
        masked_mid = max((float(st.p_mid[i, r].max()) for i, r in enumerate(rest) if len(r)), default=0.0)
        masked_end = max((float(st.p_end[i, r].max()) for i, r in enumerate(rest) if len(r)), default=0.0)
        m = {"fin_err": e[-1], "fin_err_mid": e[0], "fin_fall": float(fall), "fin_err_curve": e,
             "fin_err_iterations": ks, "fin_norm": float(np.linalg.norm(target.W)),
             "max_masked_prob": masked_end}
        drop = max(float(np.max(st.p_mid[i, o] / st.p_end[i, o])) for i, o in enumerate(sel) if len(o))
        m["selected_prob_drop"] = drop
        if drop >= FALL_MIN:
            return undecided(f"a selected token's probability fell ×{drop:.2f} over the second half, as fast "
                             "as a masked one: GD may be deselecting it (budget)", **m)
        if masked_end > 0 and not masked_end < masked_mid:
            return undecided("a non-selected token's probability did not fall over the second half "
                             f"({masked_mid:.2g} → {masked_end:.2g}): selection not settled (budget)", **m)
        m["fin_curvature"] = target.curvature
        floor = precision_floor(target, traj[-1], inst.data.d)
        m["fin_floor"] = floor
        if e[-1] <= floor:
            return held(**m)  # at the precision of the comparison: converged, nothing left to fall
        if target.curvature < CURV_MIN:
            return undecided(
                f"L_O's minimiser is too flat (curvature {target.curvature:.2g} < {CURV_MIN:g}) to be "
                "reached within the budget: the iterate sits ~perturbation/curvature off it",
                **m,
            )
        # prepare always sets it; a state built by hand (tests of the judgement) may not: the rule is then off
        curv_end = float(st.curv_end)
        m["curvature_at_iterate"] = curv_end
        if fall < FALL_MIN and curv_end < CURV_MIN:
            # "P_fin W(k) → W^fin⋆" is a limit; "not falling" refutes it only where the finite part's motion
            # is governed by L_O. In L_O's flat tail (curvature at the iterate below CURV_MIN, the bound of
            # the rule above) the masked tokens' perturbation steers it instead (issue 29: quick seed 18
            # instance 4 crosses such a plateau, log-ratio ≈ −5.9 with curvature −1.1e-5 there, e 2.65 → 2.78
            # over the second half; continued, it leaves the plateau near step 55000 and reaches e = 3e-4 by
            # 4·10⁵). Converged iterates measured 2e-3 … 5e-2, equal to the curvature at W^fin⋆.
            return undecided(
                f"P_fin W(k) is not approaching W^fin⋆ ({e[0]:.3g} → {e[-1]:.3g}) but sits where L_O is flat "
                f"(curvature {curv_end:.2g} < {CURV_MIN:g}): the masked tokens still steer the finite "
                "part (budget)",
                **m,
            )
        if fall < FALL_MIN and st.masked_pull is not None and st.fin_residual_grad is not None:
            # The limit is not contradicted where the remaining error is what the masked tokens, whose
            # probabilities are falling (checked above), still hold the finite part off by. GD descends
            # L_O + (masked terms) on S_fin, so ∇L_O(P_fin W(S)) = r − g with r = P_fin ∇L(W(S)) (GD's own
            # S_fin gradient) and g the masked pull; with L_O μ-strongly convex between P_fin W(S) and its
            # minimiser (μ the smaller of its curvature at both ends, both ≥ CURV_MIN here), the iterate is
            # within (‖g‖ + ‖r‖)/μ of it. Both norms are measured, no factor is fitted. The offset is the
            # masked tokens' doing only where GD has settled on S_fin (‖r‖ ≤ ‖g‖; else an optimiser that
            # stalls off the minimiser would pass). The 1/k fall FALL_MIN expects can then be slower:
            # contributions of different examples' masked tokens can cancel (issue 29, quick seed 36 #0:
            # P_fin W − W^fin⋆ changes sign near step 5000 and falls only ×1.12 over 10⁴ → 2·10⁴, 4.1e-7 →
            # 3.6e-7, then ×1.5 to 2.4e-7 by 4·10⁴), so that is the budget, not a counterexample. A target
            # other than L_O's minimiser (W^fin⋆ scaled by 0.9, zeroed, or mixed 3 % with a random
            # direction: e ≥ 1e-2) lies orders of magnitude outside this bound and stays refuted.
            # μ: the smaller end curvature, less their difference (a margin for the curvature's variation
            # inside the segment, measured at its ends) and the 1e-10 error of the central differences
            # that give it (numerics.genfin._min_curvature)
            mu = min(target.curvature, curv_end) - abs(target.curvature - curv_end) - 1e-10
            pull, resid = st.masked_pull, st.fin_residual_grad
            explained = (pull + resid) / mu + floor
            m.update(masked_pull=pull, fin_residual_grad=resid, fin_err_explained=explained)
            if resid <= pull and e[-1] <= explained:
                return undecided(
                    f"‖P_fin W − W^fin⋆‖ {e[0]:.3g} → {e[-1]:.3g} fell only ×{fall:.2f} < ×{FALL_MIN} over "
                    f"the second half, but lies within the {explained:.2g} the masked tokens' vanishing pull "
                    f"({pull:.2g}) accounts for: consistent with the limit, its fall not shown (budget)",
                    **m,
                )
        if fall < FALL_MIN:
            return failed(
                f"P_fin W(k) is not approaching the predicted finite part: ‖P_fin W − W^fin⋆‖ "
                f"{e[0]:.3g} → {e[-1]:.3g} over the second half (fall ×{fall:.2f} < ×{FALL_MIN})",
                **m,
            )
        if e[-1] > FIN_TOL:
            return undecided(f"approaching W^fin⋆ (×{fall:.2f} over the second half) but still {e[-1]:.3g} > "
                             f"{FIN_TOL:g} away (budget)", **m)
        return held(**m)


def precision_floor(target, W_end, d: int) -> float:
    """The accuracy to which e = ‖P_fin W(S) − W^fin⋆‖_F can be computed: below it e is resolution, not
    distance. The sum of (1) W^fin⋆'s own error, ‖∇L_O(W^fin⋆)‖ / curvature (the solve's gradient residual
    over L_O's curvature: strong convexity); (2) the rounding of the projection, whose k coordinates are
    dot products of d² terms, each within d² EPS ‖W(S)‖_F (the standard bound), so √k d² EPS ‖W(S)‖_F
    in all; (3) GD's own rounding, EPS ‖W(S)‖_F per step, which the finite part's contraction 1 − η·curvature
    per step sums to EPS ‖W(S)‖_F / (η·curvature). 0 where the curvature is not positive (no floor)."""
    if not target.curvature > 0:
        return 0.0
    wn = float(np.linalg.norm(W_end))
    k = len(target.basis)
    return (target.grad_norm / target.curvature + np.sqrt(k) * d * d * EPS * wn
            + EPS * wn / (ETA * target.curvature))


@register
class GenSVMFinite(_FiniteBase):
    id = "gen-svm-finite"
    title = "Gen-SVM finite part: P_fin W(k) → W^fin⋆ = argmin over S_fin of the loss on the selected tokens"
    statement = r"P_{\mathrm{fin}}W(k)\to W^{fin}_\star=\arg\min_{W\in S_{fin}}L_{O}(W)"
    hypotheses_text = (
        f"logistic loss; ReLU head; plain GD η = {ETA:g}, {STEPS} steps; GD's final selection has "
        "some |O_i| ≥ 2; L_O has a unique finite minimiser on S_fin; data: "
        "numerics.genfin.coupled_selection"
    )
    #: ~75 % of coupled_selection draws settle on a two-token selection with a unique finite part; the others
    #: (a one-token selection, S_fin = {0}; a flat L_O) are properties of the draw: drawn again (harness)
    redraw_on = ("non_degenerate", "finite_part_unique")


@register
class GenSVMFiniteControl(_FiniteBase):
    id = "gen-svm-finite-control"
    title = (
        "Control: P_fin W(k) → the restricted optimum of the exponential loss (false: GD trains the logistic)"
    )
    statement = r"P_{\mathrm{fin}}W(k)\to\arg\min_{W\in S_{fin}}L^{\exp}_{O}(W)\ \text{(false)}"
    expected = "FAIL"
    control_of = "gen-svm-finite"
    hypotheses_text = ("as gen-svm-finite; the exponential loss's restricted optimum is finite and at least "
                       f"{SEPARATION:g} from the logistic one")

    def instance(self, rng, ctx):
        """The control's family meets its own hypothesis by construction: coupled_selection is redrawn until
        the exponential loss's restricted optimum on the *designed* selection (tokens a, b) is finite, unique
        and ≥ SEPARATION from the logistic one. Measured on the theorem's family (quick seeds 0–19, 320 draws)
        only ~30 % of draws qualify (the exponential balance h = ½ ln(n₊/n₋) lies below the (a, b) edge's
        range of h on the others, so its optimum is a vertex, at infinity), and seed 8 had 1 of 16: a control
        left VACUOUS by chance. The draws are reported (metric ``family_draws``); the hypotheses are still
        re-decided on GD's own selection. The theorem's family is not changed."""
        for draws in range(1, CONTROL_MAX_DRAWS + 1):
            inst = dataclasses.replace(super().instance(rng, ctx), family_draws=draws)
            sel = tuple(np.array([0, 1]) for _ in range(inst.data.n))
            fe = finite_part(inst.data, inst.V, sel, loss="exponential")
            if fe.unique and np.linalg.norm(fe.W - finite_part(inst.data, inst.V, sel).W) >= SEPARATION:
                break
        return inst

    def prepare(self, instances: Sequence[FiniteInstance], ctxs: Sequence[Context]) -> list[FiniteState]:
        states = super().prepare(instances, ctxs)
        return [dataclasses.replace(st, fp_exp=finite_part(inst.data, inst.V, st.selected,
                                                           loss="exponential"))
                for inst, st in zip(instances, states, strict=True)]

    def assume_separated(self, inst: FiniteInstance, st: FiniteState, ctx: Context) -> Outcome:
        fe, fp = st.fp_exp, st.fp
        assert fe is not None  # prepare solves it
        draws = int(inst.family_draws if inst.family_draws is not None else 1)
        if not fe.unique:
            return failed(f"exponential L_O on S_fin: {fe.message}", family_draws=draws)
        gap = float(np.linalg.norm(fe.W - fp.W))
        return decide(
            gap >= SEPARATION, f"the two restricted optima are only {gap:.3g} apart", optima_gap=gap,
            family_draws=draws,
        )

    def _target(self, st: FiniteState) -> FinitePart:
        assert st.fp_exp is not None  # prepare solves it
        return st.fp_exp

r"""rp-kq-nuclear — the (K, Q) regularisation path converges in direction to W^mm_⋆ (nuclear Att-SVM⋆).

Statement (TLTO §2, regularisation path of the (K, Q) parametrisation): under Assumption A, unique
optimal tokens, Att-SVM feasible and m ≥ n, (K_R, Q_R) = argmin_{‖K‖_F² + ‖Q‖_F² ≤ 2R} L(K Q^T) satisfies
K_R Q_R^T / R → W^mm_⋆ / ‖W^mm_⋆‖_⋆, and ‖K_R Q_R^T‖_⋆ ≈ R (the constraint is ‖W‖_⋆ ≤ R in disguise:
‖W‖_⋆ = min_{KQ^T = W} ½(‖K‖² + ‖Q‖²)).

Hypotheses implemented: logistic loss; unique optimal tokens; Att-SVM and Att-SVM⋆ feasible (certified);
m = d ≥ n. Instance family: random unit-sphere data (n=3, T=4, d=6). The path is
numerics.regpath.regularization_path(param="KQ") (projected normalised GD, restarts + warm start, best loss),
R = 1, 2, ..., 64 (log grid), PATH_STEPS = 1500 steps and 4 restarts per radius. Not THEORY.md's 128:
there the loss of the (K, Q) path is flat to the last float64 digit (the 300- and 1500-step paths reach
the same loss to 2e-16 while their directions differ), so the direction at R = 128 is numerically
undetermined even where the loss still drops by > 1e-10 from R = 64, and the trend broke there on
3 of 72 full-profile instances (300 steps, 2 restarts).

Predictions: (1) 1 − corr(K_R Q_R^T, W^mm_⋆) non-increasing in R up to noise (25% relative / 2e-3 absolute per
step) and < 3e-2 at the largest judged R (the error decays like log R / R and is 1e-3–2e-2 at R = 64; above it
but still shrinking → undecided, stalled → failed, as in rp-w-frobenius, including its trend window — from
where the path selects the optimal tokens — and its missed-minimiser test with rescaled path points: paper
profile, seed 0, instance 144: 1 − corr = 0.28 → 0.37 from R = 4 to 8 with min-margin < 0 at both, the same
loss 0.65806598 at R = 8 from 2 × 12 restarts × 3000 steps, then 0.011, 0.0047, 0.0017 at R = 16..64); (2)
‖K_R Q_R^T‖_⋆ / R ∈ [0.95, 1 + 1e-9] at every radius (it is ≤ 1 by AM–GM; ≈ 1 when the factors balance).

Given data (``--data``): as rp-w-frobenius — the first 5 examples of each label, one path per instance
with its own restarts, 1000 steps per radius, R = 1..64 (``GIVEN_RADII``): at R = 128 on the digits
subset the direction is right (1 − corr ≈ 8e-4) but the factors no longer balance within the budget,
‖K Q^T‖_⋆ / R ≈ 0.89, so the path point is not the constrained minimiser (an optimisation budget, not a
property of the path).

The directional threshold of (1) is per instance, min(3e-2, sep/4) with sep = 1 − corr(W^mm, W^mm_⋆), under
the hypothesis ``solutions_separated`` (sep ≥ SEP_MIN = 0.04); see _paths.SEPARATION_K for why 4.

Control (``rp-kq-nuclear-control``, at the boundary): "the (K, Q) path → the Frobenius solution W^mm", with
the same per-instance threshold sep/4 on the same separated instances; refuted when the error to W^mm stalls
above sep/4, or still shrinks while the path is already within sep/4 of W^mm_⋆ (then provably > sep/4 from
W^mm). Resolution (issue 23; checks/power/resolution.json): 0.5 on quick seed 0, against a goal of 0.05: a
limit of the budget and of the path's noise. The (K, Q) path reaches 1 − corr 1e-4–2e-2 at R = 64 under the
per-instance threshold sep/4 ≤ 3e-2, which a tilt up to ε ≈ 0.2 stays within, and the path's noise (TREND_ABS
= 2e-3) exceeds a 5 % tilt's 1 − cos θ = 1.25e-3, so no stall rule below the threshold is certified.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from checks import WITHDRAWN, Context, Criterion, Outcome, Profile, decide, register

from ._paths import (
    NUC_RATIO_MIN,
    NUC_RATIO_SLACK,
    PathCheck,
    PathInstance,
    PathState,
    control_not_applicable,
    judge_nuclear_ratio,
    nuclear_ratio,
    path_criteria,
)

RADII = 2.0 ** np.arange(0, 7)  # 1..64, not THEORY.md's 128: see the module docstring
GIVEN_RADII = RADII
#: Path solver budget per radius. The factored problem is non-convex and its minimiser is found more slowly
#: than W's: on the six full-profile instances (seed 0: 22, 25, 35, 45, 49, 58) where rp-w-frobenius's
#: 300 steps / 2 restarts broke the trend, 1500 steps / 4 restarts reach a lower loss at R = 32 and 64 (by
#: 1e-12 to 1e-5 relative): the shorter path had not found the constrained minimiser.
PATH_STEPS, RESTARTS = 1500, 4
#: Cap of the per-instance directional threshold min(CORR_ERR_MAX, sep/4) at the largest judged R (observed
#: 5e-4–2e-2 at R = 64; the factored path converges like log R / R). See _paths.SEPARATION_K.
CORR_ERR_MAX = 3e-2
#: ``solutions_separated``: sep = 1 − corr(W^mm, W^mm_⋆) ≥ 0.04, so sep/4 ≥ 1e-2 is within the (K, Q) path's
#: budget (full profile, seed 0: 61 of 72 instances have sep ≥ 0.04; with the path's errors at R = 64 the
#: threshold sep/4 is met on ~85 % of them, the rest still shrinking: undecided).
SEP_MIN = 0.04

PROFILES = {
    "quick": Profile(instances=12, min_confirmed=6, batch=12),
    "full": Profile(instances=72, min_confirmed=50, batch=36),
    # paper: ~18 % of draws have W^mm and W^mm_⋆ too close to separate (vacuous, measured 35 of 200)
    "paper": Profile(instances=200, min_confirmed=140, batch=50),
}


@register
class RPKQNuclear(PathCheck):
    id = "rp-kq-nuclear"
    depends_on = ("regpath", "svm-fro", "svm-nuc", "optimal-token")
    #: a softmax temperature τ is the reparametrisation KQᵀ → KQᵀ/τ: the (K, Q) path at R is the clean one at
    #: R/τ, the same path in direction (at radius R/τ), so the claimed limit direction cannot tell it
    #: (measured: quick seed 0, the full power matrix of 2026-11-27, PASS under it)
    invariant_to: ClassVar[dict[str, str]] = {"softmax-temperature": (
        "a temperature τ is the reparametrisation KQᵀ → KQᵀ/τ: the path's points at R are"
        " the clean path's at R/τ, the same limit direction")}
    title = "The (K, Q) regularisation path converges in direction to the nuclear-norm Att-SVM⋆ solution"
    reference = "TLTO §2 (regularisation path of (K, Q))"
    statement = (r"(K_R,Q_R)=\arg\min_{\|K\|_F^2+\|Q\|_F^2\le 2R}L(KQ^\top):\quad "
                 r"K_RQ_R^\top/R\to W^{mm}_\star/\|W^{mm}_\star\|_\star,\ \|K_RQ_R^\top\|_\star\approx R")
    hypotheses_text = (
        "logistic loss (Assumption A); unique optimal tokens; Att-SVM and Att-SVM⋆ feasible; "
        "m = d ≥ n; R = 1..64 (log grid), 1500 path steps, 4 restarts; given data: the first 5 examples of "
        "each label, "
        "R = 1..64, 1000 path steps per radius"
    )
    profiles = PROFILES
    param = "KQ"
    radii = RADII
    given_radii = GIVEN_RADII
    path_steps, restarts = PATH_STEPS, RESTARTS
    corr_err_max = CORR_ERR_MAX
    sep_min = SEP_MIN
    criteria = path_criteria("W^mm_⋆", "W^mm", CORR_ERR_MAX) + (
        Criterion(
            "norm constraint active, (‖K_R‖²_F + ‖Q_R‖²_F)/2 ≥ (1 − numerics.gd_common.ACTIVE_RTOL)·R",
            "at",
            "every resolved radius",
        ),
        Criterion(
            f"‖K_R Q_R^T‖_⋆ / R at every resolved radius (and ≤ 1 + {NUC_RATIO_SLACK:g})",
            ">=",
            NUC_RATIO_MIN,
            plot_metric="nuc_ratio_min",
        ),
    )

    def assume_m_ge_n(self, inst: PathInstance, st: PathState, ctx: Context) -> Outcome:
        data = inst.data
        return decide(data.d >= data.n, f"m = d = {data.d} < n = {data.n}")

    target_key, other_key = "nuc", "fro"

    check_margin = WITHDRAWN  # replaced by the nuclear-norm identity below

    def check_nuclear_norm(self, inst: PathInstance, st: PathState, ctx: Context) -> Outcome:
        J = self.resolved(st)  # the resolved radii only, as every prediction (see rp-w-frobenius)
        # the factored path's own points (the polished ones of _paths.polish_path have ‖W‖_⋆ = R by
        # construction)
        return judge_nuclear_ratio(nuclear_ratio(st.path_W[:J], st.radii[:J]))


@register
class RPKQNuclearControl(RPKQNuclear):
    id = "rp-kq-nuclear-control"
    depends_on = ("regpath", "svm-fro", "svm-nuc", "optimal-token")
    title = "Control: the (K, Q) regularisation path converges to the Frobenius solution (false)"
    statement = r"K_RQ_R^\top/R\to W^{mm}/\|W^{mm}\|_F"
    hypotheses_text = RPKQNuclear.hypotheses_text + "; threshold sep/4 (the theorem's, see SEPARATION_K)"
    expected = "FAIL"
    control_of = "rp-kq-nuclear"
    criteria = path_criteria("W^mm", "W^mm_⋆", CORR_ERR_MAX) + RPKQNuclear.criteria[-2:-1]

    def not_applicable(self, data: Any) -> str | None:
        return control_not_applicable(data, m_ge_n=True, sep_min=self.sep_min)

    target_key, other_key = "fro", "nuc"

    check_nuclear_norm = WITHDRAWN  # the control's false claim is the direction alone


@register
class RPKQNuclearSelf(RPKQNuclear):
    """The self-attention variant (module docstring): the same check on the family with z_i = x_i1."""

    id = "rp-kq-nuclear-self"
    title = ("The (K, Q) regularisation path converges in direction to the nuclear-norm Att-SVM⋆ solution "
             "(self-attention, z_i = x_i1)")
    hypotheses_text = (
        "self-attention z_i = x_i1; logistic loss (Assumption A); unique optimal tokens; Att-SVM and "
        "Att-SVM⋆ "
        "feasible; m = d ≥ n; R = 1..64 (log grid), 1500 path steps, 4 restarts"
    )
    self_attention = True
    accepts_data = False



@register
class RPKQNuclearSelfControl(RPKQNuclearControl):
    id = "rp-kq-nuclear-self-control"
    title = ("Control: the (K, Q) regularisation path converges to the Frobenius solution (self-attention; "
             "false)")
    hypotheses_text = RPKQNuclearSelf.hypotheses_text + "; threshold sep/4 (the theorem's, see SEPARATION_K)"
    control_of = "rp-kq-nuclear-self"
    self_attention = True
    accepts_data = False


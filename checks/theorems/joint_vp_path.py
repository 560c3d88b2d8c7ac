r"""joint-vp-path — the joint (v, p) regularisation path selects max-margin tokens (TLZO).

Statement (TLZO, "Max-Margin Token Selection in Attention Mechanism", arXiv 2306.13596, §5, joint
training of the prompt p and the head v; keys k_it = x_it, i.e. W = I): for the logistic loss, the
joint regularisation path

    (v_r, p_R) = argmin_{‖v‖ ≤ r, ‖p‖ ≤ R} L(v, p),   L = (1/n) Σ_i ℓ(Y_i v^T X_i^T S(X_i p)),

converges in direction (r = R → ∞) to

    v_r / r → v^mm/‖v^mm‖,  v^mm = argmin ‖v‖ s.t. Y_i v^T x_{iα_i} ≥ 1  (hard-margin SVM on the optimal tokens);
    p_R / R → p^rlx/‖p^rlx‖, p^rlx = argmin ‖p‖ s.t. p^T (x_{iα_i} − x_it) ≥ 1 for support examples of v^mm,
                                                               ≥ 0 for the others (the relaxed p-SVM).

Hypotheses implemented (exactly): logistic loss; α_i = the token with the highest v^mm-score
(token 2 in this family, token 1 being the origin); ``head_svm_feasible``; ``relaxed_feasible``;
``support_separated`` — every non-support example of v^mm has margin ≥ 1 + SUPPORT_GAP (so finite radii
can tell it apart; the statement itself needs only > 1). The path is computed at radii
RADII with r = R by multi-start minimisation of log L over the two spheres (numerics.prompt.joint_vp_path).

Instance family (T = 2, d = 2, n = 3, labels (+1, −1, +1), first token of every input at the origin):
* tight (even instances): Y_i x_i2 = (a_i, 1) with a = (1, −1, 0.5) — TLZO's fixture
  [(0,0),(1,1)], [(0,0),(1,−1)], [(0,0),(0.5,1)]: v ∝ (0, 1), every example a support vector, so the
  relaxed p-SVM is the full p-SVM p^mm = (4/3, 1/3);
* non-tight (odd instances): the third input is (0.5, 1.5): its v-margin is 1.5, so p → (1, 0), while the
  full p-SVM would be (1.25, 0.25).
Instances 0 and 1 are the exact fixtures; later ones perturb the first coordinates a_i (and the third
input's second coordinate in the non-tight case) by U(−0.15, 0.15) and rotate the plane randomly —
changes that keep the structure, which the hypotheses re-verify with the certified solvers.

Prediction: 1 − corr(v_R, v^mm) and 1 − corr(p_R, p^rlx) at the largest radius are below V_TOL / P_TOL
and not above their values at the middle radius (R = 4). Inconclusive: p error in [P_TOL, SLOW_TOL) and still
falling by ≥ 20 % over the last doubling of R (precision caps R at 16).

Finding (paper profile): at r = R the limit of p_R/R is argmax_{‖q‖=1} min_i (γ_i + q^T(x_i2 − x_i1)), which is the
relaxed p-SVM only when every non-support example's v-margin excess outweighs its p-margin shortfall at p^rlx;
instances 177 and 199 violate this and converge to a direction 0.015 / 0.010 away (``JointVPPath.finding``).

Control (``joint-vp-path-control``): on non-tight instances, "p → the full p-SVM" — refuted because the
path settles on the relaxed direction, whose 1 − corr with the full p-SVM stays ≈ 0.014–0.02.
"""

from __future__ import annotations

import numpy as np

from checks import Profile, Theorem, decide, register, undecided
from numerics.prompt import joint_vp_path
from numerics.svm import solve_joint_vp_svm, solve_p_svm

#: Radii of the path (r = R). float64 resolves the p-dependence of log L only while r e^{−R·margin} ≫
#: 1e-15 |log L|, i.e. up to R ≈ 20 here; 16 is the largest power of two safely inside.
RADII = (1.0, 2.0, 4.0, 8.0, 16.0)
#: Final directional errors allowed at R = 16. Measured on the fixtures: v ≈ 1e-4, p ≈ 2e-4 (tight),
#: 5e-4 (non-tight); the errors fall like 1/R² — 5e-3 leaves a 10x margin yet stays well under the
#: ≈ 1.4e-2 separation of the relaxed and full p-SVM directions the control relies on.
V_TOL = 5e-3
P_TOL = 5e-3
#: Below this 1 − corr (angle ≈ 0.014 rad; the optimiser's accuracy on the spheres)
#: the trend is noise; an error already under it counts as converged regardless of the trend.
FLOOR = 1e-4
#: Budget rule: float64 caps the radius at 16 (see RADII). A p error above P_TOL that is below SLOW_TOL
#: and still fell by ≥ 20 % over the last doubling of R (ratio ≤ SLOW_RATIO) is inconclusive, not refuted
#: (perturbed non-tight instances converge like R^-0.6 there). A wrong limit (the control's full p-SVM)
#: shows a rising error instead, so this cannot hide it.
SLOW_TOL = 1e-2
SLOW_RATIO = 0.8
#: Non-support examples must clear the margin by this much to be resolvable at radii ≤ 16.
SUPPORT_GAP = 0.2
#: Perturbation half-width of the fixture coordinates (keeps a_1 > 0 > a_2 and the third input's margin ≥ 1.35).
PERTURB = 0.15

Y_FIX = np.array([1.0, -1.0, 1.0])
A_FIX = np.array([1.0, -1.0, 0.5])


def _corr(a, b) -> np.ndarray:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def _dataset(rng, tight: bool, exact: bool) -> np.ndarray:
    a = A_FIX.copy()
    second = np.array([1.0, 1.0, 1.0 if tight else 1.5])
    Q = np.eye(2)
    if not exact:
        a = a + rng.uniform(-PERTURB, PERTURB, 3)
        if not tight:
            second[2] += rng.uniform(-PERTURB, PERTURB)
        th = rng.uniform(0, 2 * np.pi)
        Q = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
    YX2 = np.stack([a, second], axis=1)  # (3, 2): Y_i x_i2
    X = np.zeros((3, 2, 2))
    X[:, 1] = (Y_FIX[:, None] * YX2) @ Q.T
    return X


class _JointBase(Theorem):
    reference = "TLZO (arXiv 2306.13596) §5: joint (v, p) regularisation path"
    profiles = {
        "quick": Profile(instances=8, min_confirmed=6, batch=8),
        "full": Profile(instances=60, min_confirmed=50, batch=20),
        "paper": Profile(instances=200, min_confirmed=170, batch=25),
    }
    plot_metric = "p_final_gap"

    def not_applicable(self, data):
        return ("TLZO's joint (v, p) prompt model checked on its exact T = d = 2 fixtures (trained head v, "
                "keys = tokens); given data define the W-attention model with a fixed head instead")

    def _tight(self, ctx) -> bool:
        return ctx.instance % 2 == 0

    def instance(self, rng, ctx):
        tight = self._tight(ctx)
        return {"tight": tight, "X": _dataset(rng, tight, exact=ctx.instance < 2), "Y": Y_FIX.copy(),
                "alpha": np.ones(3, dtype=np.int64)}

    def prepare(self, instances, ctxs):
        paths = joint_vp_path(np.stack([i["X"] for i in instances]), np.stack([i["Y"] for i in instances]), RADII,
                              rng=ctxs[0].rng)
        states = []
        for inst, path in zip(instances, paths, strict=True):
            v_sol, p_sol = solve_joint_vp_svm(inst["X"], inst["Y"], inst["alpha"])
            full = solve_p_svm(inst["X"], inst["alpha"])
            states.append({"path": path, "v": v_sol, "p": p_sol, "full": full})
        return states

    # -- hypotheses ------------------------------------------------------------------------------
    def assume_head_svm_feasible(self, inst, state, ctx):
        return decide(state["v"].feasible, "hard-margin SVM on the optimal tokens is infeasible")

    def assume_optimal_tokens(self, inst, state, ctx):
        X, Y, a = inst["X"], inst["Y"], inst["alpha"]
        g = Y[:, None] * (X @ state["v"].w)  # (n, T) scores under v^mm
        others = np.where(np.arange(g.shape[1])[None, :] == a[:, None], -np.inf, g)
        ok = bool(np.all(g[np.arange(len(a)), a] > others.max(axis=1)))
        return decide(ok, "α is not the highest-scoring token under v^mm")

    def assume_relaxed_feasible(self, inst, state, ctx):
        return decide(state["p"].feasible, "relaxed p-SVM is infeasible")

    def assume_support_separated(self, inst, state, ctx):
        X, Y = inst["X"], inst["Y"]
        marg = Y * (X[np.arange(3), inst["alpha"]] @ state["v"].w)
        sup = np.zeros(3, dtype=bool)
        sup[state["v"].support] = True
        n_sup = int(sup.sum())
        if sup.all():
            return decide(True, "", n_support=n_sup)
        worst = float(marg[~sup].min() - 1)
        return decide(worst >= SUPPORT_GAP, f"a non-support example has margin within {SUPPORT_GAP} of 1",
                      n_support=n_sup, nonsupport_excess=worst)

    # -- predictions -----------------------------------------------------------------------------
    def check_v_direction(self, inst, state, ctx):
        gap = 1 - _corr(state["path"].v, state["v"].w)
        return decide(gap[-1] < V_TOL and (gap[-1] <= gap[len(gap) // 2] or gap[-1] < FLOOR),
                      f"1−corr(v_R, v^mm) = {gap[-1]:.3g} at R = {RADII[-1]} (R = {RADII[0]}: {gap[0]:.3g})",
                      v_final_gap=float(gap[-1]), v_gap_curve=[float(x) for x in gap])

    def _p_target(self, state):
        return state["p"].w

    def check_p_direction(self, inst, state, ctx):
        gap = 1 - _corr(state["path"].p, self._p_target(state))
        mid = len(gap) // 2
        ok = gap[-1] < P_TOL and (gap[-1] <= gap[mid] or gap[-1] < FLOOR)
        if not ok and gap[-1] < SLOW_TOL and gap[-1] <= SLOW_RATIO * gap[-2]:
            return undecided(f"still converging at the largest resolvable radius: 1−corr {gap[-2]:.3g} → {gap[-1]:.3g}",
                             p_final_gap=float(gap[-1]), p_gap_curve=[float(x) for x in gap])
        return decide(ok,
                      f"1−corr(p_R, target) = {gap[-1]:.3g} at R = {RADII[-1]} (R = {RADII[0]}: {gap[0]:.3g})",
                      p_final_gap=float(gap[-1]), p_gap_curve=[float(x) for x in gap],
                      relaxed_full_gap=float(1 - _corr(state["p"].w, state["full"].w)))


@register
class JointVPPath(_JointBase):
    id = "joint-vp-path"
    depends_on = ("vp-path", "svm-fro")
    title = "Joint (v, p) regularisation path: v → hard-margin SVM on optimal tokens, p → relaxed p-SVM"
    statement = (r"\frac{v_r}{r}\to\frac{v^{mm}}{\|v^{mm}\|},\ \frac{p_R}{R}\to\frac{p^{rlx}}{\|p^{rlx}\|},\ "
                 r"p^{rlx}=\arg\min\|p\|\ \text{s.t.}\ p^\top(x_{i\alpha_i}-x_{it})\ge\mathbb 1[i\in\mathcal S(v^{mm})]")
    hypotheses_text = ("logistic loss, W = I; head SVM on optimal tokens feasible; relaxed p-SVM feasible; non-support "
                       f"examples clear the v-margin by ≥ {SUPPORT_GAP}; path at r = R ∈ {RADII}")
    finding = ("Genuine counterexamples to the r = R path as implemented (paper profile, seed 0: non-tight instances 177 "
               "and 199 of 200; none in quick or full). With r = R the p-dependent part of the loss is "
               "Σ_i rγ_i e^{−R(γ_i + q_i)} (γ_i = Y_i v̂ᵀx_i2 the unit-head margins, q_i = p̂ᵀ(x_i2 − x_i1)), so p_R/R "
               "tends to argmax_{‖q‖=1} min_i (γ_i + q_i), not to the relaxed p-SVM: a non-support example whose margin "
               "excess γ_ns − γ_s is smaller than q_s − q_ns at p^rlx keeps an active constraint. Here the excess is "
               "0.357 / 0.358 against q_s − q_ns = 0.765 / 0.689 at p^rlx; that limit has "
               "1 − corr 0.0151 / 0.0099 with p^rlx, above P_TOL = 5e-3. The path does converge to it: 1 − corr(p_R, "
               "limit) = 0.0121, 0.0027, 4.3e-4, 6e-5 at R = 2, 4, 8, 16 (instance 177; 199 alike) while 1 − corr(p_R, "
               "p^rlx) flattens at 0.0171 / 0.0116 — no larger R can rescue it. With r = 4R the same instances do reach "
               "p^rlx (1 − corr < 1e-5 at R = 16): the relaxed p-SVM is the limit when r grows faster than R, or at r = R "
               "when the excess exceeds q_s − q_ns at p^rlx.")
    finding_seen = {("paper", 0): (177, 199)}


@register
class JointVPPathControl(_JointBase):
    id = "joint-vp-path-control"
    depends_on = ("vp-path", "svm-fro")
    title = "Control: p path → the full p-SVM in the non-tight case (false)"
    statement = r"p_R/R \to p^{mm}/\|p^{mm}\|\ \text{(full p-SVM; false when some example is not a support vector of } v^{mm})"
    expected = "FAIL"
    control_of = "joint-vp-path"
    hypotheses_text = "non-tight instances only (some example is not a support vector of v^mm)"

    def _tight(self, ctx) -> bool:
        return False

    def assume_relaxed_differs(self, inst, state, ctx):
        c = float(_corr(state["p"].w, state["full"].w))
        return decide(1 - c >= 2 * P_TOL, "relaxed and full p-SVM directions are too close to tell apart",
                      relaxed_full_gap=1 - c)

    def _p_target(self, state):
        return state["full"].w

r"""gd-local — from the cone of a locally optimal W^mm_α, GD converges in direction to W^mm_α.

Statement (TLTO §3, local convergence of GD; THEORY.md §3–4): if α is locally optimal (every support
token t ∈ T_i(α) of W^mm_α scores below α_i) and Att-SVM(α) is feasible, then for every μ > 0 there is
R such that GD started in C_{μ,R}(W^mm_α) = {W : corr(W, W^mm_α) ≥ 1 − μ, ‖W‖_F ≥ R} stays in the cone
and W(k)/‖W(k)‖ → W^mm_α/‖W^mm_α‖ — not to W^mm when α ≠ opt.

Hypotheses implemented: logistic loss; α ≠ opt, Att-SVM(α) feasible (certified) and α locally optimal
(numerics.svm.is_locally_optimal); R large: the theorem's R depends on the instance through the slack
δ⁺ = min{margin_it(W^mm_α) − 1 : t non-support, γ_it ≥ γ_iα_i} of the higher-scoring non-support tokens
(their softmax share relative to the support tokens is e^{−δ⁺ M} at W = M W^mm_α), so W(0) = M W^mm_α
(+ 1% relative Gaussian noise) with M = max(10, 10/δ⁺); instances needing M > 300 (softmax beyond
float64 range for the run) are vacuous. Instance family: checks.strategies.local_alpha_data
(unit-sphere data n=4, T=5, d=8, α = opt except one example on its second-best token).

Predictions: normalised GD (step 0.1, 2000 steps) keeps corr(W(k), W^mm_α) ≥ 1 − μ (μ = 0.05) at every
recorded step; 1 − corr(W(end), W^mm_α) < 1e-2; when W^mm and W^mm_α differ (corr < 0.98), the final
corr with W^mm_α exceeds the corr with W^mm by ≥ 0.01.

Given data (``--data``): α switches one example of the given data to its second-best token (as
local_alpha_data builds it), drawn from the instance seed among the switches that are feasible, locally
optimal and need M ≤ 300 (the hypotheses still re-verify them); the noise of W(0) comes from the seed too.
Digits have 6 locally optimal switches among 60 (5 with M ≤ 300), so the theorem runs; the control draws
among the non-locally-optimal switches. Either is not applicable to data that have none.

Control (``gd-local-control``): the same claim for α NOT locally optimal (a support token scores at
least as high as α_i; local_alpha_data(locally_optimal=False)), same initialisation rule: GD leaves
the cone (towards the higher-scoring support token), refuting the claim.
"""

from __future__ import annotations

import numpy as np

from checks import Profile, Theorem, decide, held, register
from checks.strategies import local_alpha_data
from checks.theorems.gd_global import corr_curve
from numerics.gd import run_gd
from numerics.svm import is_locally_optimal, solve_att_svm
from numerics.tokens import corr, margins, optimal_tokens, scores

from ._given import draw_candidate, given_metrics, need_head, switched_candidates

#: Cone half-width μ of the claim (corr ≥ 1 − μ all along the run).
MU = 0.05
#: Final directional threshold, as gd-global.
CORR_ERR_MAX = 1e-2
#: W^mm and W^mm_α count as different below this correlation; then GD must prefer W^mm_α by SEP_MIN.
DIFFER_MAX, SEP_MIN = 0.98, 0.01
#: Initial radius rule: softmax share of higher-scoring non-support tokens ≤ e^{-SHARE_EXP}.
SHARE_EXP = 10.0
M_MIN, M_MAX = 10.0, 300.0  # M_MAX: logits up to ~300 M-units keep the run far inside float64 range
NOISE = 0.01  # relative size of the random perturbation of W(0) (corr(W(0), W^mm_α) ≈ 1 − 5e-5)
STEP, STEPS, RECORD = 0.1, 2000, 100

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=5, batch=8),
    "full": Profile(instances=64, min_confirmed=50, batch=32),
    "paper": Profile(instances=200, min_confirmed=150, batch=50),
}


def init_multiplier(data, alpha, W_alpha) -> float:
    """M = max(M_MIN, SHARE_EXP / δ⁺) (inf when δ⁺ = 0)."""
    g = scores(data)
    marg = margins(data, W_alpha, alpha)
    higher = g >= g[np.arange(data.n), alpha][:, None]
    higher[np.arange(data.n), alpha] = False
    slack = marg[higher] - 1.0
    slack = slack[slack > 1e-6]  # active higher-scoring tokens are the control's business (not local)
    return M_MIN if slack.size == 0 else max(M_MIN, SHARE_EXP / float(slack.min()))


@register
class GDLocal(Theorem):
    id = "gd-local"
    depends_on = ("gd", "svm-fro", "optimal-token")
    title = "GD from the cone of a locally optimal W^mm_α converges to W^mm_α"
    reference = "TLTO §3 (local convergence of GD, locally optimal directions)"
    statement = (r"\alpha\ \text{locally optimal},\ W(0)\in C_{\mu,R}(W^{mm}_\alpha)\Rightarrow "
                 r"W(k)\in C_{\mu,R}(W^{mm}_\alpha),\ \frac{W(k)}{\|W(k)\|}\to\frac{W^{mm}_\alpha}{\|W^{mm}_\alpha\|}")
    hypotheses_text = ("logistic loss; α ≠ opt; Att-SVM(α) feasible; α locally optimal; "
                       "W(0) = M W^mm_α + 1% noise, M = max(10, 10/δ⁺) ≤ 300; normalised GD step 0.1, 2000 steps; "
                       "α = opt with one example on its second-best token")
    profiles = PROFILES
    plot_metric = "corr_err"
    locally_optimal = True
    n, T, d = 4, 5, 8
    accepts_data = True

    def _given_candidates(self, data):
        """Switched selections of the given data with this theorem's local optimality and M ≤ M_MAX."""
        return switched_candidates(data, self.locally_optimal,
                                   accept=lambda a, sol: init_multiplier(data, a, sol.W) <= M_MAX)

    def not_applicable(self, data):
        if data.v is None:
            return need_head(data)
        if not self._given_candidates(data):
            kind = "locally optimal" if self.locally_optimal else "non-locally-optimal"
            return (f"the given data have no {kind} selection alpha != opt (one example switched to its "
                    f"second-best token, Att-SVM(alpha) feasible, initial multiplier M <= {M_MAX:g})")
        return None

    def instance(self, rng, ctx):
        if ctx.data is not None:
            data = ctx.data
            _, alpha, _ = draw_candidate(self._given_candidates(data), rng)
            noise = rng.standard_normal((data.d, data.d))
            return {"data": data, "alpha": alpha, "noise": noise / np.linalg.norm(noise)}
        data, alpha = local_alpha_data(self.n, self.T, self.d, rng=rng, locally_optimal=self.locally_optimal)
        noise = rng.standard_normal((self.d, self.d))
        return {"data": data, "alpha": alpha, "noise": noise / np.linalg.norm(noise)}

    def prepare(self, instances, ctxs):
        states, init = [], []
        for inst in instances:
            sol = solve_att_svm(inst["data"], inst["alpha"])
            glob = solve_att_svm(inst["data"])
            M = init_multiplier(inst["data"], inst["alpha"], sol.W) if sol.feasible else np.inf
            states.append({"sol": sol, "glob": glob, "M": M})
            Wa = sol.W if sol.feasible else np.zeros((inst["data"].d, inst["data"].d))
            Mc = min(M, M_MAX)
            init.append(Mc * Wa + NOISE * Mc * np.linalg.norm(Wa) * inst["noise"])
        traj = run_gd([i["data"] for i in instances], steps=STEPS, lr=STEP, init=np.stack(init),
                      record_every=RECORD, device=ctxs[0].device).W_traj
        for j, st in enumerate(states):
            st["traj"] = traj[:, j]
        return states

    def assume_alpha_not_opt(self, inst, st, ctx):
        return bool(np.any(inst["alpha"] != optimal_tokens(inst["data"]).index))

    def assume_feasible(self, inst, st, ctx):
        return st["sol"].feasible and st["glob"].feasible

    def assume_alpha_locally_optimal(self, inst, st, ctx):
        return is_locally_optimal(inst["data"], inst["alpha"], st["sol"])

    def assume_R_large(self, inst, st, ctx):
        return decide(st["M"] <= M_MAX, f"needs M = {st['M']:.3g} > {M_MAX}", init_M=float(min(st["M"], 1e9)))

    def check_stays_in_cone(self, inst, st, ctx):
        c = corr_curve(st["traj"], st["sol"].W)
        return decide(c.min() >= 1 - MU, f"left the cone: min corr {c.min():.4f} < {1 - MU}",
                      min_corr=float(c.min()), corr_alpha_curve=c.tolist())

    def check_direction(self, inst, st, ctx):
        err = 1 - corr_curve(st["traj"], st["sol"].W)[-1]
        return decide(err < CORR_ERR_MAX, f"1 − corr(W, W^mm_α) = {err:.3g} ≥ {CORR_ERR_MAX}", corr_err=float(err),
                      **given_metrics(ctx))

    def check_not_global(self, inst, st, ctx):
        Wa, Wg, W = st["sol"].W, st["glob"].W, st["traj"][-1]
        svm_corr = float(corr(Wa, Wg))
        ca, cg = float(corr(W, Wa)), float(corr(W, Wg))
        if svm_corr >= DIFFER_MAX:
            return held(corr_global=cg, svm_corr=svm_corr)
        return decide(ca - cg >= SEP_MIN, f"corr with W^mm ({cg:.4f}) not below corr with W^mm_α ({ca:.4f})",
                      corr_global=cg, svm_corr=svm_corr)


@register
class GDLocalControl(GDLocal):
    id = "gd-local-control"
    depends_on = ("gd", "svm-fro", "optimal-token")
    title = "Control: the local claim for an α that is NOT locally optimal (false)"
    statement = r"\alpha\ \text{not locally optimal},\ W(0)\in C_{\mu,R}(W^{mm}_\alpha)\Rightarrow W(k)\in C_{\mu,R}(W^{mm}_\alpha)"
    hypotheses_text = ("logistic loss; α ≠ opt; Att-SVM(α) feasible; α NOT locally optimal (a support token scores "
                       "≥ α_i); same initialisation and GD as gd-local")
    expected = "FAIL"
    control_of = "gd-local"
    locally_optimal = False
    plot_metric = "min_corr"

    def assume_alpha_locally_optimal(self, inst, st, ctx):  # the control's hypothesis is the negation
        return not is_locally_optimal(inst["data"], inst["alpha"], st["sol"])

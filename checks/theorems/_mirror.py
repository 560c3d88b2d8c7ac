"""The machinery of md-global (ℓp mirror descent on W, fixed step) and md-global-normalized (its normalised
variant) and of their cross-pairing controls: the budget and thresholds (named, with reasons), the instance
family, the hypotheses and the predictions. The statements and catalogue entries are
checks/theorems/md_global.py (a theorem module never imports another: the entries subclass these bases).

Shared with gd-global (checks/theorems/_global.py): the instance family (B.2 and B.1 data alternating), the
small random start, the doubling grid, the Assumption-A and unique-optimum hypotheses and the start-gradient
test. What differs: the target is the certified ℓp-AttSVM solution W^mm_p (numerics.svm.solve_lp_att_svm),
B.1 is read on ITS support tokens, the run is numerics.gd.Mirror(p) through run_gd, the projection that must
grow is the mirror (dual) variable's ⟨∇ψ(W(k)), W^mm_p⟩, and the direction is refuted by a certified
competitor: another exponent's ℓp solution W^mm_r that the iterate is confirmed to approach.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from checks import WITHDRAWN, Context, Criterion, Outcome, Profile, decide, held, undecided
from checks import hypotheses as hyp
from checks.strategies import b1_data, b2_data
from numerics.data import AttentionData
from numerics.gd import GDConfig, Mirror, run_gd
from numerics.svm import SVMSolution
from numerics.svm.lp import lp_norm, solve_lp_att_svm
from numerics.tokens import corr, optimal_tokens, scores

from ._gd import FIDELITY_TOL, init_fidelity, judge_fidelity
from ._given import given_metrics
from ._global import (
    INIT_SCALE,
    GlobalGD,
    GlobalInstance,
    GlobalState,
    attractor_metrics,
    doubling_points,
    grad_inner,
    svm_W,
)
from ._trends import SHRINK_MAX, corr_curve, corr_floor, last_ratio, stalled_below

#: The exponents of the claim's instances and of its cross pairing (issue 25 part 3: p = 1.75, 2, 3).
EXPONENTS = (1.75, 2.0, 3.0)
#: Plain mirror descent: gd-global's fixed step and budget (η = 0.4, 20000 steps; p = 2 is gd-global exactly).
#: The paper asks for "η sufficiently small" without a computable bound for p ≠ 2; the step is stated, and
#: the monotone growth of ⟨∇ψ(W(k)), W^mm_p⟩ (a consequence of every descent step under B.1/B.2) is checked.
ETA, STEPS = 0.4, 20000
#: Normalised mirror descent: the authors' normalised step η = 0.1; 4000 steps (2000, the authors' GD budget,
#: leaves p = 3 at 1 − corr ≈ 1e-2 on seed 0; the dual-variable growth is linear, so twice the steps halves
#: the error).
ETA_N, STEPS_N = 0.1, 4000
#: Normalised runs stop before float64 saturates: the dual variable grows by ≈ η per step, so the logit gap
#: grows like (ηk)^{1/(p−1)}; for p < 2 it outruns p = 2's and e^{−gap} underflows (1.75 at 4000 steps: the
#: gradient is exactly 0 from k ≈ 2500 on, seed 0). Budget for p: the power of two ≥ the k at which
#: (ηk)^{1/(p−1)} equals p = 2's gap at STEPS_N, i.e. (η STEPS_N)^{p−1}/η, capped at STEPS_N (p = 1.75: 1024).


def normalized_steps(p: float) -> int:
    """The normalised run's budget for exponent p (see STEPS_N)."""
    k = (ETA_N * STEPS_N) ** (p - 1.0) / ETA_N
    return int(min(STEPS_N, 2 ** math.ceil(math.log2(k))))


#: Direction confirmation: 1 − corr(W(S), W^mm_p) below it and below its value at S/32. Plain: gd-global's
#: budget 0.05 (the rate is 1/log²k, module docstring of gd_global.py); normalised: gd-global-normalized's
#: 1e-2 (THEORY.md §4). Above it the instance is undecided, never refuted by the threshold alone.
CORR_ERR_MAX, CORR_ERR_MAX_N = 0.05, 1e-2
#: Stall rule (normalised only; issue 23 resolution): below the threshold, 1 − corr(W(S), claimed limit) must
#: still shrink by ≤ _trends.SHRINK_MAX = 0.8 over the last doubling of k, unless it is at the float64 floor
#: (_trends.stalled_below); otherwise refuted. Theory: the normalised dual variable grows linearly, u(k) = ηk
#: ū + b(k) with b bounded, so W = sign(u)|u|^{1/(p−1)} is off its limit direction by O(1/k) relative on the
#: entries where |ū_ab| ≫ |b_ab|/(ηk), and by O(k^{−1/(p−1)}) on those where the limit's entry is small or 0
#: (slower for p > 2): 1 − corr ∝ k^{−min(2, 2/(p−1))} at worst, a ratio per doubling ≤ 2^{−min(2, 2/(p−1))} =
#: 0.25 (p ≤ 2), 0.5 (p = 3) — measured 0.12–0.28 (p ≤ 2) and 0.52–0.58 (p = 3) on quick seed 0 at S/2 → S; a
#: target off the true limit by an angle θ has ratio → 1 (1 − corr → 1 − cos θ). Plain mirror descent's rate
#: is logarithmic (ratio (ln k / ln 2k)² ≈ 0.87 per doubling at k = 20000, as gd-global's), so no ratio rule
#: applies to it.
#: Norm trend (plain): each of the last two doublings of k adds ≥ NORM_RATE_MIN·‖W^mm_p‖_F ln 2 to ‖W(k)‖_F.
#: Near the limit W ≈ r W^mm_p, the dual variable u = ∇ψ(W) ≈ r^{p−1}∇ψ(W^mm_p) moves by η e^{−r}·O(1), so
#: r^{p−2} dr/dk ∝ e^{−r}, e^r r^{p−2} ∝ k: r(k) = ln k − (p − 2) ln ln k + O(1), whose increment per doubling
#: ln 2 − (p − 2) ln(1 + ln 2 / ln k) → ln 2 (from below for p > 2: 0.90 ln 2 at k = 20000, p = 3; from above
#: for p < 2); a stalled iterate adds 0. The ratio is the same in any norm (W ≈ r W^mm_p), here Frobenius.
#: NORM_RATE_MIN = 0.5 is gd-global's margin below that asymptote, a chosen constant, not a proved bound on
#: the finite-k increment. Measured on paper seed 0 (last doubling, 10000 → 20000): p = 1.75 1.03–1.22, p = 2
#: 0.99–1.68, p = 3 0.81–0.89, except instance 64 (0.49; p = 2 on B.2): the trapped-example finding
#: (md_global.py), whose iterate approaches the SVM W_rest of the untrapped examples and so grows like
#: ‖W_rest‖_F ln k (measured 0.43 per doubling at 1.28·10⁶ steps = ‖W_rest‖_F/‖W^mm_p‖_F = 0.436); the
#: direction prediction refutes it on its own (the attractor rule).
NORM_RATE_MIN = 0.5
#: Norm trend (normalised): ⟨∇ψ(W(k)), W^mm_p⟩ / ‖W^mm_p‖_p grows by ≥ NORM_RATE_MIN·η per step over the
#: second half: each normalised step moves ∇ψ(W) by η g/‖g‖_q, whose pairing with a unit-ℓp direction is ≤ η
#: (Hölder) and → η when the gradient aligns with the limit (as gd-global-normalized's rate in units of η).

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, batch=8),
    "full": Profile(instances=60, min_confirmed=50, batch=30),
    "paper": Profile(instances=200, min_confirmed=180, batch=50),
}
#: The control's ordered pairs (p of the run, q of the claimed limit). Normalised: all six. Plain: the pairs
#: whose solutions are apart by more than the plain threshold 0.05 on the family (1.75 ↔ 3 and 2 → 3; 1.75
#: and 2 are 0.013–0.02 apart, below what 20000 plain steps resolve: the normalised control covers them).
PAIRS_N: tuple[tuple[float, float], ...] = tuple((p, q) for p in EXPONENTS for q in EXPONENTS if p != q)
PAIRS: tuple[tuple[float, float], ...] = ((1.75, 3.0), (3.0, 1.75), (2.0, 3.0))


@dataclass(frozen=True, eq=False, kw_only=True)
class MirrorInstance(GlobalInstance):
    """An instance of md-global(-normalized) and its controls: gd-global's (data, family, W(0)) and the
    exponents, p of the run and q of the claimed limit (q = p for the theorems)."""

    p: float
    q: float


@dataclass(frozen=True, eq=False, kw_only=True)
class MirrorState(GlobalState):
    """gd-global's state with ``sol`` = W^mm_q (the claimed limit), the certified ℓr-AttSVM(opt) solution of
    every exponent r of the family, and the run's budget (set with the path, where the hypotheses held)."""

    sols: dict[float, SVMSolution]
    steps: int | None = None


def dual_map(W: np.ndarray, p: float) -> np.ndarray:
    """∇ψ(W) = sign(W)|W|^{p−1}, entrywise (the mirror descent's dual variable)."""
    return np.sign(W) * np.abs(W) ** (p - 1.0)


class MirrorGD(GlobalGD[MirrorInstance, MirrorState]):
    """ℓp mirror descent converges in direction to the ℓp-AttSVM solution of the optimal tokens. No statement
    of its own: md-global / md-global-normalized (md_global.py) subclass it. ``pairs``: None for the theorem
    (the run's p is also the claimed limit's), else the control's (p, q) pairs."""

    depends_on = ("gd", "optimal-token", "softmax", "svm-lp")
    profiles = PROFILES
    plot_metric = "corr_err"
    accepts_data = False
    normalized = False
    steps, lr, record = STEPS, ETA, STEPS // 32
    corr_err_max = CORR_ERR_MAX
    pairs: tuple[tuple[float, float], ...] | None = None
    criteria = (
        Criterion("1 − agreement (direction and length) of the engine's mirror step ∇ψ(W) − ∇ψ(W₊) with the "
                  "independent η∇L (/‖∇L‖_q normalised) at W(0) and W(0)/‖W(0)‖_F", "<", FIDELITY_TOL),
        Criterion("increase of ‖W(k)‖_F over each of the last two doublings of k (plain) in units of "
                  "‖W^mm_p‖_F ln 2, or of ⟨∇ψ(W), W^mm_p⟩/‖W^mm_p‖_p per step over the second half in units "
                  "of η (normalised)", ">=", NORM_RATE_MIN, plot_metric="norm_rate"),
        Criterion("⟨∇ψ(W(k)), W^mm_p⟩ at every record (each mirror step adds −η⟨∇L, W^mm_p⟩ > 0 under "
                  "B.1/B.2)", "strictly increasing", "at every record"),
        Criterion("refuted: 1 − corr(W(S), W^mm_r) below the threshold and below its value at S/32 for a "
                  "certified W^mm_r of another exponent r, apart from the claimed limit by at least the "
                  "threshold, while 1 − corr(W(S), claimed limit)", ">=", "the threshold",
                  plot_metric="alt_corr_err"),
        Criterion("1 − corr(W(S), claimed limit), below its value at S/32 and below 1 − corr(W(S), W^mm_r) "
                  "for every competitor r (PASS of the instance)", "<",
                  "0.05 (plain), 1e-2 (normalised)", plot_metric="corr_err"),
        Criterion("normalised only, refuted (stalled) below the threshold: the last-doubling ratio of "
                  "1 − corr(W(k), claimed limit), above the float64 floor of 1 − corr", ">", SHRINK_MAX,
                  plot_metric="last_ratio"),
    )

    def not_applicable(self, data):
        return "the mirror-descent check draws its own B.1/B.2 family (no --data reading yet)"

    def exponents(self, ctx: Context) -> tuple[float, float]:
        """(p of the run, q of the claimed limit) of instance ``ctx.instance``."""
        if self.pairs is None:
            p = EXPONENTS[ctx.instance % len(EXPONENTS)]
            return p, p
        return self.pairs[ctx.instance % len(self.pairs)]

    def _draw(self, rng: np.random.Generator, ctx: Context) -> tuple[AttentionData, str]:
        # the theorem: p cycles with period 3, the family with period 2, so 6 instances meet every pair;
        # the control: the pair cycles with its own period, the family changes every len(pairs) instances
        k = ctx.instance if self.pairs is None else ctx.instance // len(self.pairs)
        if k % 2 == 0:
            return b2_data(4, 6, 8, rng=rng), "B.2"
        return b1_data(3, 4, 12, rng=rng), "B.1"

    def instance(self, rng: np.random.Generator, ctx: Context) -> MirrorInstance:
        data, family = self._draw(rng, ctx)
        p, q = self.exponents(ctx)
        init = INIT_SCALE * rng.standard_normal((data.d, data.d))
        return MirrorInstance(data=data, family=family, init=init, p=p, q=q)

    def geometry(self, p: float) -> Mirror:
        return Mirror(p, normalized=self.normalized)

    def budget(self, p: float) -> int:
        """Steps of the run with exponent p (normalised: :func:`normalized_steps`)."""
        return normalized_steps(p) if self.normalized else self.steps

    def prepare(self, instances: Sequence[MirrorInstance], ctxs: Sequence[Context]) -> list[MirrorState]:
        states = []
        for inst in instances:
            sols = {r: solve_lp_att_svm(inst.data, p=r) for r in EXPONENTS}
            states.append(MirrorState(sol=sols[inst.q], sols=sols))
        keep = [j for j in range(len(instances)) if self._hypotheses_hold(instances[j], states[j], ctxs[j])]
        groups: dict[tuple, list[int]] = {}
        for j in keep:
            dt = instances[j].data
            groups.setdefault((dt.n, dt.T, dt.d, instances[j].p), []).append(j)
        for (_, _, _, p), idx in groups.items():
            steps = self.budget(p)
            cfg = GDConfig(steps=steps, lr=self.lr, geometry=self.geometry(p))
            res = run_gd([instances[j].data for j in idx], cfg,
                         init=np.stack([instances[j].init for j in idx]), record_every=steps // 32,
                         device=ctxs[idx[0]].device)
            traj = res.W_traj
            assert traj is not None  # recorded: record_every is given (GDResult.W_traj)
            for col, j in enumerate(idx):
                states[j] = replace(states[j], traj=traj[:, col], its=res.iterations, steps=steps)
        # integrity: on every instance, hypotheses met or not
        return [replace(st, fidelity=init_fidelity(inst.data, inst.init, self.lr, p=inst.p,
                                                   normalized=self.normalized, device=ctx.device))
                for inst, st, ctx in zip(instances, states, ctxs, strict=True)]

    # -- hypotheses (assume_loss_A and assume_unique_opt are gd-global's)
    assume_feasible = WITHDRAWN
    assume_B1_or_B2 = WITHDRAWN
    assume_step_below_1_over_L = WITHDRAWN
    assume_start_gradient = WITHDRAWN
    # gd-global's step-fidelity prediction (integrity ``is_gradient_descent``, inherited) judges the mirror
    # step here: the engine's first step against the independent ℓp mirror step (_gd.mirror_step_fidelity)
    def check_is_gradient_descent(self, inst: MirrorInstance, st: MirrorState, ctx: Context) -> Outcome:
        """The engine's step from W(0) and from W(0)/‖W(0)‖_F is the ℓp mirror step ∇ψ(W₊) = ∇ψ(W) − η g
        of the theorem (g = ∇L, or ∇L/‖∇L‖_q normalised), direction and length, against an independent
        numpy reference (_gd.mirror_step_fidelity)."""
        return judge_fidelity(cast(float, st.fidelity), step="mirror step ∇ψ(W) − ∇ψ(W₊)",
                              along="η∇L (independent numpy)" if not self.normalized else "η∇L/‖∇L‖_q")

    def assume_lp_svm_certified(self, inst: MirrorInstance, st: MirrorState, ctx: Context) -> Outcome:
        """ℓp-AttSVM(opt) feasible, for every exponent of the family, each answer certified by weak duality
        (solve_lp_att_svm raises where no solver certifies: the harness records ERROR)."""
        bad = [r for r, s in st.sols.items() if not s.feasible]
        return decide(not bad, f"ℓp-AttSVM(opt) infeasible at p = {bad}")

    def assume_B1_or_B2_lp(self, inst: MirrorInstance, st: MirrorState, ctx: Context) -> Outcome:
        """B.1 on the support tokens of W^mm_p of the run's p (every non-optimal token active), or B.2."""
        data = inst.data
        b1, b2 = hyp.b1_or_b2(st.sols[inst.p], scores(data), optimal_tokens(data).index)
        return decide(b1 or b2, f"neither B.1 (on the support tokens of W^mm_p, p = {inst.p:g}) nor B.2 "
                      "holds", B1=b1, B2=b2)

    def assume_start_gradient_lp(self, inst: MirrorInstance, st: MirrorState, ctx: Context) -> Outcome:
        ip = grad_inner(inst.data, inst.init, svm_W(st.sols[inst.p]))
        return decide(ip < 0, f"⟨∇L(W(0)), W^mm_p⟩ = {ip:.3g} ≥ 0", start_grad_inner=ip)

    # -- predictions
    def target(self, inst: MirrorInstance, st: MirrorState) -> np.ndarray:
        """The claimed limit W^mm_q (q = p for the theorem), through the resolution seam; the ℓp solution
        need not lie in the token-difference span (ℓp is not rotation invariant): perturbed in all R^{d×d}."""
        return self.predicted("W^mm_p", st.sol.W, "direction")

    def check_norm_grows(self, inst: MirrorInstance, st: MirrorState, ctx: Context) -> Outcome:
        if not self.normalized:
            return super().check_norm_grows(inst, st, ctx)
        W = self.target(inst, st)
        traj, its = st.path()
        proj = np.einsum("kij,ij->k", dual_map(traj, inst.p), W) / lp_norm(W, inst.p)
        h = len(proj) // 2
        rate = float((proj[-1] - proj[h]) / (its[-1] - its[h]) / self.lr)
        return decide(rate >= NORM_RATE_MIN,
                      f"⟨∇ψ(W), W^mm_p⟩/‖W^mm_p‖_p grows by {rate:.3g}·η per step over the second half "
                      f"(< {NORM_RATE_MIN})", norm_rate=rate)

    def check_projection_grows(self, inst: MirrorInstance, st: MirrorState, ctx: Context) -> Outcome:
        """⟨∇ψ(W(k)), W^mm⟩ strictly increasing: each mirror step adds −η⟨∇L(W), W^mm⟩ (/‖∇L‖_q normalised) to
        it, > 0 at every W under B.1/B.2 (TLTO's no-stationary-points argument uses only W^mm's margins, all
        ≥ 1 and = 1 on the support tokens: W^mm_p has the same pattern). A no-op or an ascent refutes it."""
        traj, its = st.path()
        proj = np.einsum("kij,ij->k", dual_map(traj, inst.p), self.target(inst, st))
        bad = np.flatnonzero(np.diff(proj) <= 0)
        k = int(bad[0]) if len(bad) else 0
        return decide(len(bad) == 0,
                      f"⟨∇ψ(W(k)), W^mm⟩ does not increase from k = {its[k]} to k = {its[k + 1]}"
                      f" ({proj[k]:.4g} → {proj[k + 1]:.4g}); every mirror step adds −η⟨∇L, W^mm⟩ > 0 under "
                      "B.1/B.2", proj_final=float(proj[-1]))

    def check_direction(self, inst: MirrorInstance, st: MirrorState, ctx: Context) -> Outcome:
        traj, its = st.path()
        steps = cast(int, st.steps)  # set with the path
        idx = doubling_points(its, steps)
        traj, its = traj[idx], its[idx]
        claimed = self.target(inst, st)
        err = 1 - corr_curve(traj, claimed)
        eps = self.corr_err_max
        m = dict(given_metrics(ctx), corr_err=float(err[-1]), corr_err_fall=float(err[-1] / err[0]),
                 corr_err_iterations=its.tolist(), corr_err_curve=err.tolist(), alt_corr_err=float("nan"),
                 p=inst.p, q=inst.q)
        for r in EXPONENTS:
            Wr = svm_W(st.sols[r])
            m[f"corr_err_l{r:g}"] = float(1 - corr(traj[-1], Wr))
            m[f"sep_l{r:g}"] = float(1 - corr(Wr, claimed))
        # competitors: the certified solutions of every exponent at least the threshold away from the claimed
        # limit (a closer one is the same direction at this resolution). In a normal run that excludes q's own
        # solution (it IS the claimed limit); under `attnsvm power --resolution` the claimed limit is tilted
        # and the certified W^mm_q competes with it like the others.
        rivals = [r for r in EXPONENTS if m[f"sep_l{r:g}"] >= eps]
        # the stall rule (normalised only, _trends.stalled_below; see STALL_RULE_NORMALIZED)
        stalled = self.normalized and stalled_below(err, traj[-1].size)
        m.update(last_ratio=last_ratio(err), corr_floor=corr_floor(traj[-1].size))
        # gd-global's attractor rule in the run's geometry (_global.attractor_metrics with the certified
        # ℓp-AttSVM of the run's p): an example trapped off its optimal token, its lead growing over the last
        # doublings, and the iterate nearer a certified self-consistent ℓp direction (Att-SVM_p(α) of a
        # locally optimal α ≠ opt, or the ℓp SVM of the untrapped examples with the trapped optimal tokens
        # behind) than to the claimed limit. Checked first, as in gd-global (_trends.judge_convergence).
        alt = attractor_metrics(inst.data, traj, err,
                                svm=lambda data, a: solve_lp_att_svm(data, a, p=inst.p))
        m.update(alt)
        if alt["attracted"]:
            return decide(False, f"mirror descent (p = {inst.p:g}) converges to another direction: W_alt = "
                          f"{alt['alt_kind']} (the iterate's selection {alt['gd_selection']}, opt "
                          f"{alt['opt']}); 1 − corr(W(k), W_alt) falls to {alt['alt_corr_err']:.3g} at k = "
                          f"{its[-1]} (< 1 − corr to the claimed limit = {err[-1]:.3g}, which went "
                          f"{err[0]:.3g} → {err[-1]:.3g})", **m)
        if err[-1] < eps and err[-1] < err[0] and all(err[-1] < m[f"corr_err_l{r:g}"] for r in rivals):
            if not stalled:
                return held(**m)
            return decide(False, f"1 − corr(W(k), claimed limit) = {err[-1]:.3g} < {eps} but stalled: "
                          f"it shrank only ×{last_ratio(err):.2f} (> {SHRINK_MAX}) from k = {its[-2]} to "
                          f"{its[-1]}, above the float64 resolution of 1 − corr: the mirror iterate "
                          "converges to a direction other than the claimed limit", **m)
        for r in rivals:
            e_r = 1 - corr_curve(traj, svm_W(st.sols[r]))
            if e_r[-1] < eps and e_r[-1] < e_r[0] and e_r[-1] < err[-1]:
                m["alt_corr_err"] = float(e_r[-1])
                return decide(False, f"mirror descent (p = {inst.p:g}) converges to the certified "
                              f"ℓr-AttSVM solution, r = {r:g}: 1 − corr(W(k), W^mm_r) {e_r[0]:.3g} → "
                              f"{e_r[-1]:.3g} (< {eps}), while 1 − corr to the claimed limit "
                              f"(q = {inst.q:g}) went "
                              f"{err[0]:.3g} → {err[-1]:.3g}; the two solutions are "
                              f"{m[f'sep_l{r:g}']:.3g} apart", **m)
        return undecided(f"1 − corr(W(k), W^mm_q) {err[0]:.3g} at k = {its[0]} → {err[-1]:.3g} at k = "
                         f"{its[-1]} (≥ {eps} or not below its start), and no other exponent's certified "
                         f"solution is confirmed either: the limit is not reached within {steps} steps",
                         **m)


class MirrorGDControl(MirrorGD):
    """The cross pairing: mirror descent with p against the ℓq-AttSVM, q ≠ p (false: its limit is W^mm_p).
    Hypothesis: the two solutions are apart by at least the direction threshold, so the claimed limit is
    outside the confirmation ball of the true one (in the limit 1 − corr(W(k), W^mm_q) → 1 − corr(W^mm_p,
    W^mm_q) ≥ the threshold)."""

    pairs = PAIRS
    redraw_on = ("distinguishable",)

    def assume_distinguishable(self, inst: MirrorInstance, st: MirrorState, ctx: Context) -> Outcome:
        sep = float(1 - corr(svm_W(st.sols[inst.p]), svm_W(st.sols[inst.q])))
        return decide(sep >= self.corr_err_max,
                      f"1 − corr(W^mm_p, W^mm_q) = {sep:.3g} < {self.corr_err_max}: the claimed limit is "
                      "within the check's resolution of the true one", sep=sep)


__all__ = ["EXPONENTS", "PAIRS", "PAIRS_N", "MirrorGD", "MirrorGDControl", "MirrorInstance", "MirrorState",
           "dual_map"]

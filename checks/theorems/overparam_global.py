r"""overparam-global — over-parameterisation helps GD find the global max-margin direction W^mm.

Statement (TLTO §3–4, over-parameterisation experiment; an empirical claim, THEORY.md §4/§6): the share
of runs on which GD on W converges in direction to W^mm — the solution of Att-SVM(opt) for the globally
optimal tokens — grows with the dimension d. Tested here *conditioned on Att-SVM(opt) being feasible*
(W^mm exists), between d = 3 and d = 16 (n = 4, T = 6, cross-attention, random unit-sphere data).

Why conditioned: Att-SVM(opt) is feasible on about half the draws at d = 2 and on all of them for d ≥ 4
(d ≥ max(T − 1, n) guarantees it for generic data), so an unconditioned share ("final argmax = opt") grows
with d through feasibility alone — the former version of this check measured that (feasible 51.5 % at
d = 2 vs 100 % at d = 8) and its "reached" (final argmax = opt) did not even put W(k) in the cone of W^mm.

One instance is one *cell comparison*: it draws ``runs_small`` datasets at d = d_small and ``runs_large``
at d = d_large, each with W(0) of i.i.d. N(0, 0.1²) entries, and runs normalised GD (step 0.5, 2000
steps) on all of them in one batch. Per run, Att-SVM(opt) is solved (certified: KKT, or Farkas when
infeasible); an infeasible run is left out (the conditioning), a feasible one is classified by
g(k) = 1 − corr(W(k), W^mm):
  reached      g(end) < GAP_MAX = 0.01 (corr > 0.99);
  undecided    g(end) < NEAR_MAX = 0.1 and falling: g non-increasing over the second half of the run (slack
               1e-3 relative) and fallen there by ≥ a tenth of its remaining distance to GAP_MAX;
  not reached  anything else (a plateau, a rise, or far away: measured, every such run at d ≥ 3 had
               selected other tokens and sits at g ≥ 0.1, i.e. converges to some other W^mm_α).
Step 0.5 rather than the authors' 0.1: normalised GD's ‖W‖ grows ≈ step·k and the directional error
decays with ‖W‖; at step 0.1 (d = 2, 100 draws) 36 of 46 feasible runs reach corr > 0.99 in 2000 steps
against 41 at step 0.5, with the same final selections — 0.5 decides runs the budget would leave open.

Hypotheses (per instance): at least MIN_FEASIBLE = 16 feasible runs at each d (the conditioned sample is
not empty). Predictions: (0) progress: at each d the median run's ‖W(end)‖ ≥ 4‖W(0)‖, and every run's
loss fell (normalised GD grows the norm ~500× in the median; a no-op optimiser keeps norm and loss, an
ascending one raises the loss) — else refuted. The median, not every run: at d = 2 a run whose loss has a
finite minimiser oscillates around it (full profile: one run grew only 4.7×);
(1) the share grows: with k reached of m feasible runs per d, the difference D = p_large − p_small gets
Newcombe's hybrid score interval (method 10) built from the two Wilson 95% intervals of
checks.experiments.sweep.wilson_interval; undecided runs are counted against the claim for confirmation and
for it for refutation: held if the interval's lower end is > 0 with undecided runs against the claim, failed
if its upper end is < 0 with them for the claim (the share significantly decreases), undecided otherwise.
Metrics: the shares with Wilson intervals, the Newcombe interval, feasible/undecided counts per d.

Measured (seed 0–2, 300–600 draws per d, pooled; conditioned on feasibility): share reaching W^mm
0.855 (532/622) at d = 2, 0.653 (767/1174) at d = 3, 0.708 (850/1200) at d = 4, 0.95 (1140/1200) at
d = 16. The share is NOT monotone in d once feasibility is conditioned on: the data on which Att-SVM(opt)
is feasible at d = 2 are a favourable subset (a finding, see the control).

Control (``overparam-global-control``), at the boundary where the unconditioned check passes: the same
claim and the same test between d = 2 and d = 3. Unconditioned, the share grows there (≈ 0.44 → 0.65,
feasibility 52 % → 99 %), which the former check would have confirmed; conditioned on feasibility it
falls (0.855 → 0.653), so the claim is false there and the harness refutes it (a significant decrease).
The control draws 256 runs at d = 2 (≈ 128 feasible) and 128 at d = 3 for power.

Measured, seed 0: quick 4/4 confirmed, control 4/4 refuted; full 40/40 confirmed (lower end of the
difference's interval 0.045–0.34, shares 0.48–0.73 at d = 3, 0.89–1.0 at d = 16, at most 2 undecided
runs per instance), control 39/40 refuted and 1 undecided (upper ends −0.47…+0.004).
"""

from __future__ import annotations

import numpy as np

from checks import Criterion, Profile, Theorem, decide, held, register, undecided
from checks.experiments.sweep import wilson_interval
from checks.theorems._trends import corr_curve
from numerics.data import random_unit_sphere
from numerics.errors import SolverError
from numerics.gd import GDConfig, run_gd
from numerics.svm import solve_att_svm
from numerics.tokens import optimal_tokens

N, T = 4, 6
#: Normalised GD: step 0.5 (see the docstring), 2000 steps, W(0) entries N(0, INIT_SCALE²); 20 recorded
#: iterates.
STEP, STEPS, INIT_SCALE, RECORD = 0.5, 2000, 0.1, 100
#: "Reached W^mm": 1 − corr(W(end), W^mm) below this (corr > 0.99, issue 14). Measured at d = 16: 577 of 600
#: feasible runs end below 1e-3; the rest at ≥ 0.1 on other tokens — nothing lies near the threshold.
GAP_MAX = 0.01
#: A run not yet below GAP_MAX is undecided only while it is near (below this) and falling; further away it
#: converges elsewhere (measured: every such run at d ≥ 3 had selected tokens other than opt).
NEAR_MAX = 0.1
#: "Falling": the second half never rises by more than TREND_SLACK (relative, GD zig-zag) and falls by at
#: least FALL_FRAC of the remaining distance to GAP_MAX (a plateau creeping down by 1e-6 is not on its way).
TREND_SLACK, FALL_FRAC = 1e-3, 0.1
#: Conditioned sample size: fewer feasible runs than this at either d leaves the instance vacuous.
MIN_FEASIBLE = 16
#: Progress: the median run's ‖W(end)‖ ≥ NORM_GROWTH_MIN ‖W(0)‖ (measured, full profile: ≥ 160× at d ∈ {3,
#: 16}; the slowest single run at d = 2 grew 4.7×, hence the median; a no-op optimiser: 1×).
NORM_GROWTH_MIN = 4.0

PROFILES = {
    "quick": Profile(instances=4, min_confirmed=3, batch=4),
    "full": Profile(instances=40, min_confirmed=36, batch=20, max_inconclusive=0.2),
    "paper": Profile(instances=100, min_confirmed=90, batch=25, max_inconclusive=0.2),
}


def newcombe_interval(k1: int, m1: int, k2: int, m2: int) -> tuple[float, float]:
    """Newcombe's hybrid score interval (method 10) for p2 − p1, from the two Wilson intervals.

    >>> tuple(round(x, 4) for x in newcombe_interval(10, 20, 15, 20))
    (-0.0468, 0.4936)
    """
    p1, p2 = k1 / m1, k2 / m2
    lo1, hi1 = wilson_interval(k1, m1)
    lo2, hi2 = wilson_interval(k2, m2)
    d = p2 - p1
    return d - float(np.hypot(p2 - lo2, hi1 - p1)), d + float(np.hypot(hi2 - p2, p1 - lo1))


def classify(gap: np.ndarray) -> str:
    """"reached", "undecided" or "missed" for one run's curve g(k) = 1 − corr(W(k), W^mm)."""
    if gap[-1] < GAP_MAX:
        return "reached"
    half = gap[len(gap) // 2:]
    steady = bool(np.all(np.diff(half) <= TREND_SLACK * np.abs(half[:-1])))
    falling = steady and half[0] - half[-1] >= FALL_FRAC * (half[-1] - GAP_MAX)
    return "undecided" if gap[-1] < NEAR_MAX and falling else "missed"


@register
class OverparamGlobal(Theorem):
    id = "overparam-global"
    depends_on = ("gd", "svm-fro", "optimal-token", "softmax")
    title = "Conditioned on feasibility, the share of GD runs reaching the global W^mm grows with d"
    reference = "TLTO §4 (over-parameterisation experiment; empirical claim)"
    statement = (r"\Pr[\operatorname{corr}(W(k), W^{mm}) > 0.99 \mid \text{Att-SVM(opt) feasible}]"
                 r"\ \text{grows with } d\quad (d = 3\ \text{vs}\ d = 16)")
    hypotheses_text = ("random unit-sphere data, n=4, T=6; runs with Att-SVM(opt) infeasible left out, ≥ 16 "
                       "feasible runs per d; normalised GD step 0.5, 2000 steps, W(0) ~ N(0, 0.1²)")
    profiles = PROFILES
    plot_metric = "diff_lo"
    criteria = (
        Criterion(f"a run reached W^mm: 1 − corr(W(S), W^mm), S = {STEPS}", "<", GAP_MAX),
        Criterion("a run is undecided (else missed) while 1 − corr(W(S), W^mm) is below", "<", NEAR_MAX),
        Criterion(
            "… and falling over the second half by ≥ this fraction of its distance to the reach threshold",
            ">=",
            FALL_FRAC,
        ),
        Criterion("feasible runs at each d (else the instance is vacuous)", ">=", MIN_FEASIBLE),
        Criterion(
            "median growth ‖W(S)‖_F / ‖W(0)‖_F (min over the two d)",
            ">=",
            NORM_GROWTH_MIN,
            plot_metric="norm_growth",
        ),
        Criterion("runs whose loss did not fall", "==", 0),
        Criterion(
            "lower end of the 95% Newcombe interval of share(d_large) − share(d_small), undecided runs "
            "counted against the claim",
            ">",
            0.0,
            plot_metric="diff_lo",
        ),
        Criterion(
            "refuted when the upper end (undecided runs counted for the claim) is",
            "<",
            0.0,
            plot_metric="diff_hi",
        ),
        Criterion("inconclusive: the interval contains 0", "→", "inconclusive"),
    )
    d_small, d_large = 3, 16
    runs_small, runs_large = 64, 64

    def not_applicable(self, data):
        return (
            "compares how often GD reaches W^mm on random data at two dimensions; a given dataset has one "
            "fixed d"
        )

    def sizes(self, inst):
        """n and T of every dataset of the cell comparison; d is the claim's variable (d_small, d_large),
        shown against the share in the figure."""
        return {"n": N, "T": T}

    def instance(self, rng, ctx):
        out = {}
        for key, d, runs in (
            ("small", self.d_small, self.runs_small),
            ("large", self.d_large, self.runs_large),
        ):
            out[key] = random_unit_sphere(N, T, d, rng=rng, R=runs)
            out["init_" + key] = INIT_SCALE * rng.standard_normal((runs, d, d))
        return out

    def prepare(self, instances, ctxs):
        states = [{} for _ in instances]
        for key in ("small", "large"):
            datas = [dt for inst in instances for dt in inst[key]]
            init = np.concatenate([inst["init_" + key] for inst in instances])
            res = run_gd(datas, GDConfig(steps=STEPS, lr=STEP), init=init, record_every=RECORD,
                         device=ctxs[0].device)
            traj, losses = res.W_traj, res.loss_traj
            norms = np.linalg.norm(traj, axis=(2, 3))
            growth = norms[-1] / np.maximum(norms[0], 1e-300)
            rose = losses[-1] >= losses[0]
            j = 0
            for inst, st in zip(instances, states, strict=True):
                runs = len(inst[key])
                counts = {"feasible": 0, "reached": 0, "undecided": 0, "missed": 0}
                retried: list[str] = []
                for r in range(runs):
                    data = inst[key][r]
                    try:
                        sol = solve_att_svm(data, optimal_tokens(data).index)
                    except SolverError as exc:
                        # No attempt certified this draw's Att-SVM(opt) either way (full seed 7 #19: every
                        # rung 'optimal_inaccurate'). Its feasibility and GD outcome are unknown, so it
                        # counts as feasible *and* undecided: against the claim in the lower end of the
                        # interval and for it in the upper (check_share_grows), so it can only widen the
                        # interval. Recorded with the solvers' statuses (svm_retry_attempts), never hidden.
                        counts["feasible"] += 1
                        counts["undecided"] += 1
                        retried.append(f"run {r}: uncertified ({exc.status}): {exc}"[:400])
                        continue
                    if len(sol.attempts) > 1:  # certified by a later attempt (numerics.svm.core.FRO_ATTEMPTS)
                        retried.append(f"run {r}: " + " | ".join(sol.attempts))
                    if sol.feasible:
                        counts["feasible"] += 1
                        counts[classify(1 - corr_curve(traj[:, j + r], sol.W))] += 1
                st[key] = counts
                st["svm_retries_" + key] = retried
                st["growth_" + key] = float(np.median(growth[j:j + runs]))
                st["loss_rose_" + key] = int(rose[j:j + runs].sum())
                j += runs
        return states

    def assume_enough_feasible(self, inst, st, ctx):
        fs, fl = st["small"]["feasible"], st["large"]["feasible"]
        return decide(min(fs, fl) >= MIN_FEASIBLE, f"too few runs with Att-SVM(opt) feasible: {fs} at "
                      f"d={self.d_small}, {fl} at d={self.d_large} (need {MIN_FEASIBLE})")

    def check_progress(self, inst, st, ctx):
        g = min(st["growth_small"], st["growth_large"])
        rose = st["loss_rose_small"] + st["loss_rose_large"]
        # every Att-SVM solve certified only by a retry, with its attempts: recorded, never hidden
        retries = st["svm_retries_small"] + st["svm_retries_large"]
        m = dict(norm_growth=g, loss_rose=rose, svm_retries=len(retries),
                 svm_uncertified=sum("uncertified" in x for x in retries), svm_retry_attempts=retries)
        if g < NORM_GROWTH_MIN:
            return decide(
                False, f"no progress: the median run's ‖W‖ grew {g:.3g}× (< {NORM_GROWTH_MIN:g}×)", **m
            )
        return decide(rose == 0, f"no progress: the loss did not fall on {rose} runs", **m)

    def check_share_grows(self, inst, st, ctx):
        s, la = st["small"], st["large"]
        ms, ml = s["feasible"], la["feasible"]
        # undecided runs against the claim (small: reached, large: missed) and for it (the other way round)
        lo, _ = newcombe_interval(s["reached"] + s["undecided"], ms, la["reached"], ml)
        _, hi = newcombe_interval(s["reached"], ms, la["reached"] + la["undecided"], ml)
        lo_s, hi_s = wilson_interval(s["reached"], ms)
        lo_l, hi_l = wilson_interval(la["reached"], ml)
        m = dict(share_curve=[s["reached"] / ms, la["reached"] / ml],  # the claim: the share against d
                 share_d=[self.d_small, self.d_large],
                 share_small=s["reached"] / ms, share_large=la["reached"] / ml, share_small_lo=lo_s,
                 share_small_hi=hi_s, share_large_lo=lo_l, share_large_hi=hi_l, diff_lo=lo, diff_hi=hi,
                 feasible_small=ms, feasible_large=ml, undecided_small=s["undecided"],
                 undecided_large=la["undecided"])
        cell = (f"{s['reached']}/{ms} (+{s['undecided']} undecided) at d={self.d_small}, "
                f"{la['reached']}/{ml} (+{la['undecided']} undecided) at d={self.d_large}")
        if lo > 0:
            return held(**m)
        if hi < 0:
            return decide(False, f"the share significantly decreases (95% interval of the difference "
                          f"[{lo:.3f}, {hi:.3f}]): {cell}", **m)
        return undecided(f"the difference's 95% interval [{lo:.3f}, {hi:.3f}] contains 0: {cell}", **m)


@register
class OverparamGlobalControl(OverparamGlobal):
    id = "overparam-global-control"
    depends_on = ("gd", "svm-fro", "optimal-token", "softmax")
    title = "Control: conditioned on feasibility, the share grows from d = 2 to d = 3 (false)"
    statement = (r"\Pr[\operatorname{corr}(W(k), W^{mm}) > 0.99 \mid \text{Att-SVM(opt) feasible}]"
                 r"\ \text{grows from } d = 2\ \text{to}\ d = 3")
    hypotheses_text = OverparamGlobal.hypotheses_text.replace(
        "≥ 16", "≥ 16 (256 draws at d = 2, 128 at d = 3)"
    )
    expected = "FAIL"
    control_of = "overparam-global"
    d_small, d_large = 2, 3
    runs_small, runs_large = 256, 128
    plot_metric = "diff_hi"

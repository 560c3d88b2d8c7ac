r"""overparam-global — over-parameterisation helps GD find the global max-margin direction.

Statement (TLTO §3–4, over-parameterisation experiment; an empirical claim, THEORY.md §4/§6): the share
of random instances on which GD on W converges to the globally optimal tokens (direction W^mm) grows
with the dimension d.

What one instance is: one *cell comparison*. It draws RUNS random unit-sphere datasets (n=4, T=6,
cross-attention) at d = 2 and RUNS at d = 8, runs normalised GD (step 0.1, 500 steps, W(0) with
N(0, 0.1²) entries) on all of them in one batch, and records for each run whether GD reached the
global solution: the final softmax argmax is the optimal token in every example (then GD is in the
cone of W^mm, where it converges to it, cf. gd-local). Hypotheses: none (the claim is about random
data; ties of optimal tokens have probability 0).

Prediction: a one-sided two-proportion z-test of share(d=8) > share(d=2) at level 0.01 — held if
significant, failed if the reverse one-sided test is significant, undecided otherwise (too few runs).
Metrics: the two shares with Wilson 95% intervals, z and the one-sided p-value.

Control (``overparam-global-control``): "the share decreases with d" — the same test with the roles
swapped, refuted whenever the increase is significant.
"""

from __future__ import annotations

import math

import numpy as np

from checks import Profile, Theorem, failed, held, register, undecided
from numerics.data import random_unit_sphere
from numerics.gd import run_gd
from numerics.tokens import optimal_tokens, softmax_probs

N, T = 4, 6
D_SMALL, D_LARGE = 2, 8  # shares ≈ 0.35 and ≈ 0.8 on this family (pilot runs), a clear contrast
RUNS = 32  # per dimension per instance: the z-test has power ≈ 0.99 at that contrast
#: One-sided significance level of each cell comparison.
ALPHA = 0.01
#: Wilson interval level (two-sided 95%).
Z95 = 1.959963984540054
STEP, STEPS, INIT_SCALE = 0.1, 500, 0.1

PROFILES = {
    "quick": Profile(instances=6, min_confirmed=5, batch=6),
    "full": Profile(instances=60, min_confirmed=50, batch=20),
    "paper": Profile(instances=200, min_confirmed=180, batch=50),
}


def wilson(k: int, m: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/m."""
    p = k / m
    den = 1 + z * z / m
    c = (p + z * z / (2 * m)) / den
    h = z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / den
    return c - h, c + h


def z_test(k1: int, k2: int, m: int) -> tuple[float, float]:
    """Two-proportion z statistic for share2 − share1 (pooled) and its one-sided p-value P(Z ≥ z)."""
    p = (k1 + k2) / (2 * m)
    se = math.sqrt(max(p * (1 - p) * 2 / m, 1e-300))
    z = (k2 / m - k1 / m) / se if 0 < p < 1 else 0.0
    return z, 0.5 * math.erfc(z / math.sqrt(2))


def reached_global(data, W) -> bool:
    return bool(np.all(softmax_probs(data, W).argmax(1) == optimal_tokens(data).index))


@register
class OverparamGlobal(Theorem):
    id = "overparam-global"
    depends_on = ("gd", "optimal-token", "softmax")
    title = "The share of runs on which GD reaches the global W^mm grows with d"
    reference = "TLTO §4 (over-parameterisation experiment; empirical claim)"
    statement = r"\Pr[\text{GD}\to W^{mm}]\ \text{increases with } d\quad (d=2\ \text{vs}\ d=8)"
    hypotheses_text = "none (random unit-sphere data, n=4, T=6; 32 runs per d per instance; normalised GD)"
    profiles = PROFILES
    plot_metric = "share_large"
    sign = +1  # the claim: large d beats small d

    def not_applicable(self, data):
        return ("compares how often GD reaches W^mm on random data at two dimensions (d = 2 vs d = 8); "
                "a given dataset has one fixed d")

    def instance(self, rng, ctx):
        small = random_unit_sphere(N, T, D_SMALL, rng=rng, R=RUNS)
        large = random_unit_sphere(N, T, D_LARGE, rng=rng, R=RUNS)
        return {"small": small, "large": large,
                "init_small": INIT_SCALE * rng.standard_normal((RUNS, D_SMALL, D_SMALL)),
                "init_large": INIT_SCALE * rng.standard_normal((RUNS, D_LARGE, D_LARGE))}

    def prepare(self, instances, ctxs):
        counts = {}
        for key in ("small", "large"):
            datas = [dt for inst in instances for dt in inst[key]]
            init = np.concatenate([inst["init_" + key] for inst in instances])
            W = run_gd(datas, steps=STEPS, lr=STEP, init=init, device=ctxs[0].device).W
            ok = np.array([reached_global(dt, Wr) for dt, Wr in zip(datas, W, strict=True)]).reshape(len(instances), RUNS)
            counts[key] = ok.sum(1)
        return [{"k_small": int(a), "k_large": int(b)} for a, b in zip(counts["small"], counts["large"], strict=True)]

    def check_share_trend(self, inst, st, ctx):
        ks, kl = st["k_small"], st["k_large"]
        z, p_up = z_test(ks, kl, RUNS)
        _, p_down = z_test(kl, ks, RUNS)
        lo_s, hi_s = wilson(ks, RUNS)
        lo_l, hi_l = wilson(kl, RUNS)
        m = dict(share_small=ks / RUNS, share_large=kl / RUNS, share_small_lo=lo_s, share_small_hi=hi_s,
                 share_large_lo=lo_l, share_large_hi=hi_l, z=z, p_increase=p_up)
        p_claim, p_against = (p_up, p_down) if self.sign > 0 else (p_down, p_up)
        word = "increases" if self.sign > 0 else "decreases"
        if p_claim < ALPHA:
            return held(**m)
        if p_against < ALPHA:
            return failed(f"the share significantly goes the other way (p = {p_against:.2g}): "
                          f"{ks}/{RUNS} at d={D_SMALL}, {kl}/{RUNS} at d={D_LARGE}", **m)
        return undecided(f"not significant that the share {word} (p = {p_claim:.2g}) with {RUNS} runs per d", **m)


@register
class OverparamGlobalControl(OverparamGlobal):
    id = "overparam-global-control"
    depends_on = ("gd", "optimal-token", "softmax")
    title = "Control: the share of runs reaching the global W^mm decreases with d (false)"
    statement = r"\Pr[\text{GD}\to W^{mm}]\ \text{decreases with } d"
    expected = "FAIL"
    control_of = "overparam-global"
    sign = -1

"""Trend helpers and the one convergence rule shared by the theorems that judge a trajectory (private: theorem
modules import this, never each other): corr(W(k), target) along a recorded trajectory, the trend tests of
an error curve, :func:`judge_convergence`, the decision every such check makes, and the trend and dip tests
of a share measured over a d-grid (over-parameterisation; the statistics themselves live in
checks.experiments.sweep beside the one Wilson interval).

The rule (issue 22, item 3) for a limit claim err → 0 judged on a finite record (GD iterations or path
radii): not moving → refuted; converged → confirmed; still falling, or a budget / precision reason →
undecided; stalled above what the claim allows → refuted. Each check supplies its own quantity and the
reasons (its thresholds are named where it defines them); the order of the decisions is this module's."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from checks import Outcome, failed, held, undecided
from checks.experiments.sweep import newcombe_interval, trend_z
from numerics.tokens import corr

#: An error converging to 0 at the rates the theorems give shrinks by ~2× or more per doubling of k or R
#: (the regularisation path's 1 − corr ~ (log R / R)²: ratio ≈ 0.3 per doubling on quick seed 0; normalised
#: GD's ≈ 0.25–0.37); one converging to a positive limit (a wrong target) has ratio → 1. 0.8 separates the
#: two with room for noise.
SHRINK_MAX = 0.8
#: Unit roundoff: precision floors derive from it.
EPS = float(np.finfo(float).eps)


def corr_curve(traj: np.ndarray, target: np.ndarray) -> np.ndarray:
    """corr(W(k), target) along a trajectory (S, d, d)."""
    return np.asarray(corr(traj, target[None]))


def falling(err: np.ndarray, slack: float) -> bool:
    """Trend test: the error over the second half of the record is non-increasing up to ``slack``
    (relative) step to step, and its last value is below its mid-run value."""
    half = err[len(err) // 2:]
    return bool(np.all(np.diff(half) <= slack * np.abs(half[:-1]) + 1e-15) and half[-1] < half[0])


def adversarial_trend(counts: list[dict], scores: list[float]) -> tuple[float, float]:
    """(z against the claim, z for it) of a share growing in ``scores``: the Cochran–Armitage z with every
    undecided run placed where it lowers z (reached below the weighted mean score, missed above it) and where
    it raises z. Each count: {"runs", "reached", "undecided"}."""
    m = [c["runs"] for c in counts]
    sbar = float(np.dot(m, scores)) / sum(m)
    lo = [c["reached"] + (c["undecided"] if s < sbar else 0) for c, s in zip(counts, scores, strict=True)]
    hi = [c["reached"] + (c["undecided"] if s >= sbar else 0) for c, s in zip(counts, scores, strict=True)]
    return trend_z(lo, m, scores), trend_z(hi, m, scores)


def step_z(steps: int) -> float:
    """The normal quantile of a Bonferroni family of ``steps`` two-sided 95 % intervals (one per step of the
    curve): a dip anywhere on a monotone curve is then reported with probability about 5 % at most."""
    return NormalDist().inv_cdf(1 - 0.025 / max(steps, 1))


def first_dip(counts: list[dict]) -> tuple[int | None, list[float], float]:
    """(index of the first step j → j + 1 that goes significantly down, or None; every step's Newcombe upper
    end, undecided runs counted for growth; the Bonferroni z used)."""
    z = step_z(len(counts) - 1)
    his = [newcombe_interval(a["reached"], a["runs"], b["reached"] + b["undecided"], b["runs"], z)[1]
           for a, b in zip(counts, counts[1:], strict=False)]
    dips = [k for k, h in enumerate(his) if h < 0]
    return (dips[0] if dips else None), his, z


def last_ratio(err: np.ndarray) -> float:
    """err[-1] / err[-2] (0 when err[-2] is 0): the shrink of the last step of a doubling grid."""
    return float(err[-1] / err[-2]) if err[-2] > 0 else 0.0


def corr_floor(size: int) -> float:
    """Rounding bound of 1 − corr(A, B) for arrays of ``size`` entries in float64: the inner product and the
    two norms each carry a relative error ≤ size·EPS (Higham's γ_n), so corr is exact to ~3·size·EPS and
    1 − corr below 4·size·EPS is not resolved (a stall there is rounding, not a limit)."""
    return 4.0 * size * EPS


def stalled_below(err: np.ndarray, size: int) -> bool:
    """A curve judged on a doubling grid has stopped shrinking: the last ratio exceeds SHRINK_MAX while the
    error is above the float64 resolution of 1 − corr (:func:`corr_floor`). Under a limit claim err → 0 at
    the theorems' rates the ratio stays ≤ SHRINK_MAX; a curve converging to a positive limit (a target off
    the true direction by an angle θ: 1 − cos θ) has ratio → 1 as it reaches it."""
    return bool(err[-1] > corr_floor(size) and last_ratio(err) > SHRINK_MAX)


def judge_convergence(
    *,
    converged: bool,
    stalled: str,
    no_progress: str = "",
    falling: str = "",
    waits: Sequence[tuple[bool, str]] = (),
    unresolved: str = "",
    **metrics,
) -> Outcome:
    """The one convergence rule (module docstring). In this order: ``no_progress`` (a reason: the optimiser
    did not move, or moved the wrong way) → failed; ``unresolved`` (a reason: the record cannot be judged at
    all, e.g. the asymptotic regime is not reached, or the numerics that produced it failed) → undecided;
    ``converged`` → held; ``falling`` (a reason: still converging, the budget is short) → undecided; the
    first ``(condition, reason)`` of ``waits`` whose condition holds (a budget or precision reason) →
    undecided; otherwise → failed with ``stalled`` (the error levelled off away from the claim's limit).
    ``metrics`` are recorded on every outcome."""
    if no_progress:
        return failed(no_progress, **metrics)
    if unresolved:
        return undecided(unresolved, **metrics)
    if converged:
        return held(**metrics)
    if falling:
        return undecided(falling, **metrics)
    for cond, reason in waits:
        if cond:
            return undecided(reason, **metrics)
    return failed(stalled, **metrics)


#: "Still rising" tolerates a relative step-to-step decrease of this size over the second half of a recorded
#: correlation (GD zig-zag).
RISE_SLACK = 1e-3
#: "Still rising" (the budget, not the claim, is short) needs the second half's rise to cover at least this
#: fraction of the remaining distance to the target: a plateau that creeps up by 1e-5 is not on its way (with
#: the authors' weight decay the (K, Q) direction settles: under the true claim no instance needs the excuse,
#: and the Frobenius correlations of the (K, Q) control, flat at s ± 0.01, crept up by < 1e-3 and were left
#: undecided without this rule).
RISE_FRAC = 0.1


def rising(c: np.ndarray, target: float) -> bool:
    """The second half of ``c`` never falls (slack RISE_SLACK) and rises by ≥ RISE_FRAC·(target − c[-1])."""
    half = c[len(c) // 2:]
    steady = bool(np.all(np.diff(half) >= -RISE_SLACK * np.abs(half[:-1])))
    return (
        steady and bool(half[-1] - half[0] >= RISE_FRAC * max(target - half[-1], 0.0)) and half[-1] > half[0]
    )

"""Trend helpers shared by the GD theorems (private: theorem modules import this, never each other):
corr(W(k), target) along a recorded trajectory, the "still falling" test of an error curve, and the trend
and dip tests of a share measured over a d-grid (over-parameterisation; the statistics themselves live in
checks.experiments.sweep beside the one Wilson interval)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from checks.experiments.sweep import newcombe_interval, trend_z
from numerics.tokens import corr


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

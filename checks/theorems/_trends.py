"""Trend helpers shared by the GD theorems (private: theorem modules import this, never each other):
corr(W(k), target) along a recorded trajectory, and the "still falling" test of an error curve."""

from __future__ import annotations

import numpy as np

from numerics.tokens import corr


def corr_curve(traj: np.ndarray, target: np.ndarray) -> np.ndarray:
    """corr(W(k), target) along a trajectory (S, d, d)."""
    return np.asarray(corr(traj, target[None]))


def falling(err: np.ndarray, slack: float) -> bool:
    """Trend test: the error over the second half of the record is non-increasing up to ``slack``
    (relative) step to step, and its last value is below its mid-run value."""
    half = err[len(err) // 2:]
    return bool(np.all(np.diff(half) <= slack * np.abs(half[:-1]) + 1e-15) and half[-1] < half[0])

"""Cone helpers shared by gd-local and cone-no-stationary: points of C_{μ,R}(W^mm_α) = {W : corr(W, W^mm_α) ≥
1 − μ, ‖W‖_F ≥ R} on its boundary (THEORY.md §3, TLTO §3 local convergence).

Not a theorem module (the leading underscore keeps ``catalogue.load_builtin`` from importing it as one).
"""

from __future__ import annotations

import numpy as np


def boundary_start(W_alpha: np.ndarray, R: float, direction: np.ndarray, mu: float = 0.01) -> np.ndarray:
    """R ((1 − μ) Ŵ + √(1 − (1 − μ)²) U) with U the unit part of ``direction`` orthogonal to W_alpha:
    ‖W(0)‖_F = R and corr(W(0), W_alpha) = 1 − μ (to rounding). Default μ: gd-local's cone width 0.01."""
    Wh = W_alpha / np.linalg.norm(W_alpha)
    U = direction - np.sum(direction * Wh) * Wh
    U = U / np.linalg.norm(U)
    c = 1.0 - mu
    return R * (c * Wh + np.sqrt(1.0 - c * c) * U)

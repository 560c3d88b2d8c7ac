"""Shared GD helpers of the GD theorems (private: theorem modules import this, never each other).

``step_fidelity`` certifies that the optimiser a check ran is the gradient descent its theorem is about:
one step of ``numerics.gd.run_gd`` from a given W is compared with the step along an independently
computed gradient (plain numpy, its own softmax; none of numerics.attention / numerics.tokens). A
directional claim can hold for a wrong optimiser too — normalised steps along a gradient computed with
an unnormalised softmax still drift to the same max-margin direction in a cone — so without this
prediction such a bug passes; with it, any change of the step (no-op, ascent, random direction, a
broken softmax or gradient) is refuted. Checks evaluate it at their start W(0) and at W(0)/‖W(0)‖: deep
in a cone the softmax is saturated and a missing normaliser changes the step by e^-gap only, so the
unit-norm point (softmax far from one-hot) is where an implementation error shows.
"""

from __future__ import annotations

import numpy as np

from numerics.data import AttentionData
from numerics.gd import run_gd

#: corr(step taken, −∇L) must exceed 1 − FIDELITY_TOL. Both sides are float64 closed forms of the same
#: quantity with O(nTd) roundings each (~1e-15 relative); 1e-9 leaves six orders of margin for
#: reduction order on any CPU while a wrong softmax, gradient or step (measured: corr ≤ 0.999) fails.
FIDELITY_TOL = 1e-9


def independent_grad_W(data: AttentionData, W: np.ndarray) -> np.ndarray:
    """∇L(W) = (1/n) Σ_i ℓ′(γ_iᵀ s_i) X_iᵀ (diag s_i − s_i s_iᵀ) γ_i z_iᵀ for the logistic loss and the linear
    head v, in plain numpy (docs/theory.md §2), independent of numerics.attention."""
    X, Z, Y, v = data.X, data.Z, data.Y, data.require_head()
    logits = np.einsum("itd,de,ie->it", X, W, Z)  # (n, T)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)  # (n, T)
    gamma = Y[:, None] * (X @ v)  # (n, T)
    u = (s * gamma).sum(axis=1)  # (n,)
    lprime = -1.0 / (1.0 + np.exp(u))  # logistic ℓ′(u)
    # (diag s − s sᵀ) γ with γ_t − Σ_τ s_τ γ_τ summed as Σ_τ s_τ (γ_t − γ_τ): deep in saturation the
    # subtraction γ_t − u would cancel to rounding noise (s_τ ~ e^-50), the pairwise form stays exact.
    c = s * np.einsum("iu,itu->it", s, gamma[:, :, None] - gamma[:, None, :])  # (n, T)
    return np.einsum("i,itd,it,ie->de", lprime, X, c, Z) / data.n


def step_fidelity(data: AttentionData, W: np.ndarray, lr: float, *, normalized: bool = True,
                  device: str = "cpu") -> float:
    """corr(W − W⁺, ∇L(W)) for one step W⁺ of run_gd from W: 1 for a correct (normalised or plain) GD step."""
    nxt = run_gd([data], steps=1, lr=lr, init=np.asarray(W)[None], normalized=normalized, device=device).W[0]
    step, g = (np.asarray(W) - nxt).ravel(), independent_grad_W(data, np.asarray(W)).ravel()
    den = np.linalg.norm(step) * np.linalg.norm(g)
    return float(step @ g / den) if den > 0 else 0.0

r"""The smoothness constant of the W-loss: one definition, shared by gd-global and smoothness-step.

:func:`smoothness_bound` — derivation of L̄_W ≥ L_W, the Lipschitz constant of ∇L(W) (logistic loss, linear
head v; TLTO §3, where the GD theorems take a step η ≤ 1/L_W). With a_i = X_i W z_i ∈ R^T (a linear map of W
with operator norm ≤ ‖X_i‖₂‖z_i‖₂) and φ_i(a) = ℓ(γ_i^T S(a)), ∇²_W L = (1/n) Σ_i A_i^T ∇²φ_i(a_i) A_i, so
L_W ≤ (1/n) Σ_i ‖X_i‖₂² ‖z_i‖² sup_a ‖∇²φ_i(a)‖₂. With s = S(a), J = diag(s) − s s^T, u = γ^T s and
g = γ − u 1: ∇φ = ℓ'(u) J γ and ∇²φ = ℓ''(u) (Jγ)(Jγ)^T + ℓ'(u) D, D = diag(g) J − s (Jγ)^T. Bounds:
Jγ = s ⊙ g, so ‖Jγ‖₂ ≤ ‖s ⊙ g‖₁ = E_s|γ − E_sγ| ≤ Δ_i/2 (mean absolute deviation of a distribution on an
interval of length Δ_i = max_t γ_it − min_t γ_it); ‖J‖₂ ≤ ‖J‖_∞ = max_t 2 s_t(1 − s_t) ≤ 1/2 (J symmetric);
‖g‖_∞ ≤ Δ_i; ‖s‖₂ ≤ 1. So ‖D‖₂ ≤ Δ_i/2 + Δ_i/2 = Δ_i and, with the logistic |ℓ'| ≤ 1, 0 < ℓ'' ≤ 1/4:

    L_W ≤ L̄_W = (1/n) Σ_i ‖X_i‖₂² ‖z_i‖² (Δ_i²/16 + Δ_i).

The smoothness-step theorem checks this bound on adversarial pairs and the descent lemma it implies;
tests/test_gd_checks.py checks it against measured gradient differences.
"""

from __future__ import annotations

import numpy as np

from numerics.data import AttentionData
from numerics.tokens import scores


def smoothness_bound(data: AttentionData) -> float:
    """L̄_W = (1/n) Σ_i ‖X_i‖₂² ‖z_i‖² (Δ_i²/16 + Δ_i) ≥ L_W, the Lipschitz constant of ∇L(W) for the logistic
    loss with the linear head v (Δ_i = max_t γ_it − min_t γ_it; derivation in the module docstring)."""
    g = scores(data)
    D = g.max(1) - g.min(1)  # (n,)
    Xn = np.linalg.norm(data.X, ord=2, axis=(1, 2))  # (n,) spectral norms of X_i
    zn = np.linalg.norm(data.Z, axis=1)
    return float(np.mean(Xn ** 2 * zn ** 2 * (D ** 2 / 16 + D)))

r"""The excess logistic loss E_ρ(W) = L(W) − (1/n) Σ_i ℓ(γ_iρ_i) of the attention model, in a form that keeps
full relative precision where L itself is flat in float64, with a forward rounding-error bound.

Why (the local regularisation paths, checks/theorems/_localpath.py): on a cone that selects ρ the loss tends
to the constant L_∞ = (1/n) Σ_i ℓ(γ_iρ_i) and the W-dependence of L lives in the softmax tails s_it ~ e^{−M}
(M the logit gap). At M ≈ 32 these tails are ~1e-14 of the O(1) loss, so L(W₁) − L(W₂) is rounding and two
directions cannot be compared; E keeps the tails: with the linear head, u_i = Σ_t s_it γ_it and

    D_i = γ_iρ − u_i = Σ_{t≠ρ} s_it (γ_iρ − γ_it)           (no cancellation against γ_iρ: the ρ term is 0)
    ℓ(γ_iρ − D_i) − ℓ(γ_iρ) = log1p(expm1(D_i) σ(−γ_iρ))     (ℓ(u) = log(1 + e^{−u}))

each term relative-accurate (s_it from the max-subtracted softmax is relative-accurate down to underflow,
1e-308). ``E`` is then exact to a few ulps of its own size, not of L's (numerics/prompt_path.prompt_excess is
the prompt model's twin).

The rounding bound ``excess_error`` is first-order forward analysis in the standard model |fl(a∘b) − a∘b| ≤
u|a∘b|, u = 2^-53, applied to the operations actually performed (no fitted constant):

* logits l_it = x_it^T (W z_i): two length-d dot products, |δl_it| ≤ 2d·u·(|x_it|^T |W| |z_i|) =: λ_it;
* s_it = exp(l_it − max)/Σ: relative error ≤ 2 max_t λ_it + (T + 3)u (the max's own error cancels in the
  ratio; exp, the T-term sum, the division); times (γ_iρ − γ_it): + u;
* D_i: a T-term sum of terms with both signs: + T·u·Σ_t |term_t| absolute, so
  |δD_i| ≤ (2 max_t λ_it + (2T + 5)u) · Σ_{t≠ρ} s_it |γ_iρ − γ_it|;
* e_i = h(D_i), h(D) = log1p(c(e^D − 1)), c = σ(−γ_iρ): |h'(D)| = c e^D / (1 − c + c e^D) ≤ 1, so the
  propagated error is |h'(D_i)| |δD_i|, plus 6u|e_i| for expm1, sigmoid, the product and log1p;
* the mean over n examples: + n·u·mean_i |e_i|.

γ_it = Y_i v^T x_it are computed once per dataset: their rounding is a perturbation of the problem shared by
every W compared, not an error of the comparison, so it does not enter the bound.

``decided(E₁, err₁, E₂, err₂)``: E₁ < E₂ holds for the exact values whenever E₂ − E₁ > err₁ + err₂.
"""

from __future__ import annotations

import torch

from . import attention as att

#: Unit roundoff of float64 (2^-53).
U64 = 2.0 ** -53


def _logits(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """l_it = x_it^T W z_i (R, n, T)."""
    return torch.matmul(X, torch.bmm(Z, W.mT).unsqueeze(-1)).squeeze(-1)


def logistic_excess(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, gamma: torch.Tensor,
                    ref: torch.Tensor, *, with_error: bool = False):
    """E_ρ(W) (R,) for the logistic loss and a linear head (``gamma`` (R, n, T) its fixed scores
    Y_i v^T x_it), ρ = ``ref`` (R, n) int64 token indices. With ``with_error``: (E, bound) with the rounding
    bound of the module docstring (R,)."""
    # the library's softmax (max-subtracted: each s_it relative-accurate), looked up at call time so that a
    # broken softmax (the power analysis's "softmax-no-normaliser") reaches the comparisons made with E too
    s = att.softmax(X, Z, W)
    r = ref.unsqueeze(-1)
    a = gamma.gather(-1, r).squeeze(-1)  # γ_iρ (R, n)
    gd = gamma.gather(-1, r) - gamma  # γ_iρ − γ_it, exactly 0 at ρ
    terms = s * gd
    D = terms.sum(-1)
    c = torch.sigmoid(-a)
    e = torch.log1p(torch.expm1(D) * c)
    E = e.mean(-1)
    if not with_error:
        return E
    n, T, d = X.shape[1], X.shape[2], X.shape[3]
    lam = 2 * d * U64 * torch.matmul(X.abs(), torch.bmm(Z.abs(), W.abs().mT).unsqueeze(-1)).squeeze(-1)
    dD = (2 * lam.amax(-1) + (2 * T + 5) * U64) * terms.abs().sum(-1)
    hp = c / ((1 - c) * torch.exp(-D) + c)  # h'(D) = c e^D / (1 − c + c e^D) ∈ (0, 1]
    err_i = hp * dD + 6 * U64 * e.abs()
    err = err_i.mean(-1) + n * U64 * e.abs().mean(-1)
    return E, err


def reference_tokens(X: torch.Tensor, Z: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
    """ρ_i = argmax_t x_it^T C z_i (R, n): the tokens the cone's centre C (R, d, d) selects (on a cone that
    selects α — the local paths' hypothesis ``cone_selects_alpha`` — every direction selects them)."""
    return _logits(X, Z, centre).argmax(-1)


def decided_less(E1, err1, E2, err2):
    """E₁ < E₂ for the exact values, certified by the rounding bounds (elementwise, numpy or torch)."""
    return (E2 - E1) > (err1 + err2)
